// torch._C._distributed_c10d's Work and the futures Work.get_future returns.
#include <pybind11/stl.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "c10d.h"

namespace py = pybind11;

namespace tn::py::c10d {
namespace {

// The first error of `works`, all finished.
std::exception_ptr first_error(const std::vector<std::shared_ptr<Work>>& works) {
  for (const auto& work : works)
    if (auto error = work->exception()) return error;
  return nullptr;
}

void complete_from(FutureState& state, std::exception_ptr error, const ::py::list& outputs) {
  if (error)
    state.fail(std::move(error));
  else
    state.complete_with_list_copied_per_read(outputs);
}

// A future waiting for its works: its Python objects are touched and released only with the
// GIL held, by the FutureCompleter; whoever drops the last reference afterwards finds none.
struct TN_HIDDEN PendingFuture {
  std::vector<std::shared_ptr<Work>> works;
  ::py::list outputs;
  std::shared_ptr<FutureState> state;
  std::atomic<size_t> unfinished{0};
};

// Completes the futures of finished works under the GIL, on one thread of its own: the library
// finishes works on threads that must never wait for the GIL (its I/O thread serves every
// connection), and a thread per pending future would not scale. Futures' callbacks run on this
// thread, as upstream's run on its backend's.
class TN_HIDDEN FutureCompleter {
 public:
  // Never destroyed: its thread may still wait when static objects are torn down at exit.
  static FutureCompleter& instance() {
    static auto* completer = new FutureCompleter();
    return *completer;
  }

  void post(std::shared_ptr<PendingFuture> pending) {
    {
      std::lock_guard lock(mutex_);
      ready_.push_back(std::move(pending));
    }
    ready_changed_.notify_one();
  }

 private:
  FutureCompleter() {
    std::thread([this] { run(); }).detach();
  }

  void run() {
    for (;;) {
      std::shared_ptr<PendingFuture> pending;
      {
        std::unique_lock lock(mutex_);
        ready_changed_.wait(lock, [this] { return !ready_.empty(); });
        pending = std::move(ready_.front());
        ready_.pop_front();
      }
      // A finalizing interpreter may already have freed these objects: leave them alone (taking
      // the GIL then would also end this thread inside PyGILState_Ensure).
      if (!Py_IsInitialized() || _Py_IsFinalizing()) {
        static_cast<void>(new std::shared_ptr<PendingFuture>(std::move(pending)));  // leaked, see above
        continue;
      }
      ::py::gil_scoped_acquire locked;
      const ::py::list outputs = std::move(pending->outputs);
      const std::shared_ptr<FutureState> state = std::move(pending->state);
      complete_from(*state, first_error(pending->works), outputs);
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_changed_;
  std::deque<std::shared_ptr<PendingFuture>> ready_;
};

// Work.get_future: a new future each call, as upstream's, whose value is Work.result(),
// completed by the FutureCompleter once every work has finished. It holds the works and the
// outputs, never the group, so it may outlive the group (destroying a group fails its pending
// work).
std::shared_ptr<PythonFuture> future_of(const WorkHandle& work) {
  auto state = std::make_shared<FutureState>();
  if (work.is_completed()) {
    complete_from(*state, work.error(), work.outputs);
    return std::make_shared<PythonFuture>(std::move(state));
  }
  auto pending = std::make_shared<PendingFuture>();
  pending->works = work.works;
  pending->outputs = work.outputs;
  pending->state = state;
  pending->unfinished = work.works.size();
  for (const auto& one : work.works)
    one->on_finished([pending] {
      if (--pending->unfinished == 0) FutureCompleter::instance().post(pending);
    });
  return std::make_shared<PythonFuture>(std::move(state));
}

}  // namespace

bool WorkHandle::wait(std::optional<Timeout> timeout) {
  ::py::gil_scoped_release unlocked;
  for (auto& work : works) {
    std::optional<Milliseconds> limit;
    if (timeout && timeout->count() >= 0) limit = *timeout;
    if (!work->wait(limit))
      throw TimeoutError(work->operation() + ": Work.wait timed out after " + std::to_string(limit->count()) +
                         " ms");
  }
  return true;
}

bool WorkHandle::is_completed() const {
  for (auto& work : works)
    if (!work->is_completed()) return false;
  return true;
}

std::exception_ptr WorkHandle::error() const { return first_error(works); }

std::shared_ptr<WorkHandle> handle(std::shared_ptr<Work> work, ::py::list outputs) {
  auto result = std::make_shared<WorkHandle>();
  result->works.push_back(std::move(work));
  result->outputs = std::move(outputs);
  return result;
}

void bind_work(::py::module_& m) {
  ::py::class_<WorkHandle, std::shared_ptr<WorkHandle>>(m, "Work")
      .def("wait", &WorkHandle::wait, ::py::arg("timeout") = std::optional<Timeout>())
      .def("is_completed", &WorkHandle::is_completed)
      .def("is_success",
           [](const WorkHandle& work) {
             if (!work.is_completed())
               throw InvalidArgument("Work.is_success: the operation has not completed yet; wait() first");
             return !work.error();
           })
      .def("exception",
           [](const WorkHandle& work) -> ::py::object {
             auto error = work.error();
             if (!error) return ::py::none();
             try {
               std::rethrow_exception(error);
             } catch (const std::exception& e) {
               return ::py::reinterpret_steal<::py::object>(
                   PyObject_CallFunction(PyExc_RuntimeError, "s", e.what()));
             }
           })
      .def("source_rank", [](const WorkHandle& work) { return work.works.front()->source_rank(); })
      .def("_source_rank", [](const WorkHandle& work) { return work.works.front()->source_rank(); })
      .def("result", [](const WorkHandle& work) { return work.outputs; })
      .def("synchronize", [](const WorkHandle&) {})  // CPU work has no stream to synchronize
      .def("get_future", &future_of);
}

}  // namespace tn::py::c10d
