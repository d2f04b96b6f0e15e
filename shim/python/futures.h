// torch._C.Future (futures.cpp), shared with c10d.cpp, whose Work.get_future completes one.
// Written with pybind11 like c10d.cpp: upstream's torch.futures.Future combines type(torch._C.Future)
// with Generic's metaclass, which needs a metaclass of its own (pybind11's), not plain `type`.
#pragma once

#include <pybind11/pybind11.h>

#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace tn::py {

// pybind11 objects have hidden visibility; classes holding them must too (they are internal to
// the extension anyway).
#define TN_HIDDEN __attribute__((visibility("hidden")))

// One future's outcome (upstream's c10::ivalue::Future): a value or an error, set once, and the
// callbacks to run then. Every member is used with the GIL held, so Python objects are never
// touched or released without it; wait_for_completion is the exception and must be called
// without the GIL, because completion happens under it.
class TN_HIDDEN FutureState {
 public:
  bool completed() const;
  // Throws RuntimeError when already completed, as upstream's markCompleted does.
  void complete(pybind11::object value);
  // Like complete, for a list that each read hands out as a new list of the same elements, as
  // upstream's futures holding a C++ tensor list do (Work.get_future's).
  void complete_with_list_copied_per_read(pybind11::list value);
  // Completes with `error` unless already completed (upstream's setErrorIfNeeded).
  void fail(std::exception_ptr error);
  void wait_for_completion() const;
  // The value, or the error rethrown; RuntimeError before completion.
  pybind11::object value() const;
  std::exception_ptr error() const { return error_; }
  // Runs `callback` once completed: at once when already.
  void add_callback(std::function<void()> callback);

 private:
  // Marks completion under the mutex (the waiters' condition), then runs the callbacks.
  void finish(const std::function<void()>& record_outcome);

  mutable std::mutex mutex_;
  mutable std::condition_variable completion_;
  bool completed_ = false;
  pybind11::object value_;
  bool copy_list_per_read_ = false;
  std::exception_ptr error_;
  std::vector<std::function<void()>> callbacks_;
};

// What Python holds (upstream's PythonFutureWrapper). Several may share one state: collect_all's
// value holds new ones, without their unwrap function.
struct TN_HIDDEN PythonFuture {
  explicit PythonFuture(std::shared_ptr<FutureState> state) : state(std::move(state)) {}
  std::shared_ptr<FutureState> state;
  // Called with the value by value() and wait(), for the exception it raises (set_exception's).
  pybind11::object unwrap;
};

}  // namespace tn::py
