// torch._C.Future and torch._C._collect_all, which upstream's torch/futures/__init__.py wraps
// (torch.futures.Future, collect_all, wait_all), with upstream's semantics: callbacks run when the
// future completes, on the completing thread, with the future as argument; a `then` callback's
// exception fails the future `then` returned; an add_done_callback exception is reported and
// dropped; set_exception is set_result plus an unwrap function that raises on value()/wait().
#include "futures.h"

#include <pybind11/stl.h>

#include <stdexcept>
#include <string>

#include "python_shim.h"

namespace py = pybind11;

namespace tn::py {

bool FutureState::completed() const {
  std::lock_guard lock(mutex_);
  return completed_;
}

void FutureState::finish(const std::function<void()>& record_outcome) {
  {
    std::lock_guard lock(mutex_);
    if (completed_)
      throw std::runtime_error(
          "Attempting to mark a completed Future as complete again. Note that a Future can only be "
          "marked completed once.");
    record_outcome();
    completed_ = true;
  }
  completion_.notify_all();
  // A callback may add callbacks to this (now completed) state; those run at once instead.
  std::vector<std::function<void()>> callbacks = std::move(callbacks_);
  callbacks_.clear();
  for (auto& callback : callbacks) callback();
}

void FutureState::complete(::py::object value) {
  finish([&] { value_ = std::move(value); });
}

void FutureState::complete_with_list_copied_per_read(::py::list value) {
  finish([&] {
    value_ = std::move(value);
    copy_list_per_read_ = true;
  });
}

void FutureState::fail(std::exception_ptr error) {
  if (completed()) return;
  finish([&] { error_ = std::move(error); });
}

void FutureState::wait_for_completion() const {
  std::unique_lock lock(mutex_);
  completion_.wait(lock, [&] { return completed_; });
}

::py::object FutureState::value() const {
  if (!completed())
    throw std::runtime_error("Future.value() was called before the Future completed; wait() for it first");
  if (error_) std::rethrow_exception(error_);
  if (copy_list_per_read_) {
    PyObject* copy = PySequence_List(value_.ptr());
    if (!copy) throw ::py::error_already_set();
    return ::py::reinterpret_steal<::py::list>(copy);
  }
  return value_;
}

void FutureState::add_callback(std::function<void()> callback) {
  if (completed())
    callback();
  else
    callbacks_.push_back(std::move(callback));
}

namespace {

using FuturePtr = std::shared_ptr<PythonFuture>;

::py::object value_of(const PythonFuture& future) {
  ::py::object value = future.state->value();
  if (future.unwrap) future.unwrap(value);
  return value;
}

::py::object wait_for(const PythonFuture& future) {
  {
    ::py::gil_scoped_release unlocked;
    future.state->wait_for_completion();
  }
  return value_of(future);
}

std::string callback_error(const char* what) {
  return std::string("Got the following error when running the callback: ") + what;
}

FuturePtr then(const FuturePtr& self, const ::py::function& callback) {
  auto next = std::make_shared<FutureState>();
  self->state->add_callback([self, callback, next] {
    try {
      next->complete(callback(self));
    } catch (const std::exception& error) {  // pybind11's error_already_set included
      next->fail(std::make_exception_ptr(std::runtime_error(callback_error(error.what()))));
    }
  });
  return std::make_shared<PythonFuture>(next);
}

void add_done_callback(const FuturePtr& self, const ::py::function& callback) {
  self->state->add_callback([self, callback] {
    try {
      callback(self);
    } catch (const std::exception& error) {
      // Upstream logs such an error and carries on: nothing waits on a done-callback's outcome.
      std::string message = callback_error(error.what());
      if (!message.ends_with('\n')) message += '\n';
      PySys_FormatStderr("%s", message.c_str());
    }
  });
}

// Completes when every future has (with the first error as soon as one fails); its value is a new
// future per member sharing that member's state, and its wait()/value() wait on the members
// themselves, so their unwrap functions (set_exception's) raise there.
FuturePtr collect_all(const std::vector<FuturePtr>& futures) {
  auto all = std::make_shared<FutureState>();
  ::py::list members;
  for (const auto& future : futures) {
    if (!future) throw ::py::type_error("_collect_all: a Future can't be None");
    members.append(std::make_shared<PythonFuture>(future->state));
  }
  if (futures.empty()) all->complete(members);
  auto remaining = std::make_shared<size_t>(futures.size());
  for (const auto& future : futures)
    future->state->add_callback([all, remaining, members, member = future->state] {
      if (member->error()) {
        all->fail(member->error());
      } else if (--*remaining == 0 && !all->completed()) {
        all->complete(members);
      }
    });
  auto result = std::make_shared<PythonFuture>(all);
  result->unwrap = ::py::cpp_function([futures](const ::py::object&) {
    for (const auto& future : futures) wait_for(*future);
  });
  return result;
}

void check_devices(const ::py::sequence& devices) {
  for (const auto& device : devices) {
    if (!is_device(device.ptr()))
      throw ::py::type_error(std::string("Future(devices): expected a list of torch.device, got ") +
                             Py_TYPE(device.ptr())->tp_name);
    const std::string type = ::py::str(device.attr("type"));
    if (type != "cpu")
      throw std::runtime_error("PyTorch is not linked with support for " + type + " devices");
    if (device.attr("index").is_none())
      throw ::py::value_error("Expected devices to have indices, got " + std::string(::py::str(device)));
  }
}

}  // namespace

// Arguments stay positional-only (arg0, ...), as upstream binds them.
void init_futures(PyObject* module) {
  auto m = ::py::reinterpret_borrow<::py::module_>(module);
  ::py::class_<PythonFuture, FuturePtr> future(m, "Future");
  future
      .def(::py::init([](const ::py::sequence& devices) {
        check_devices(devices);
        return std::make_shared<PythonFuture>(std::make_shared<FutureState>());
      }))
      .def("done", [](const PythonFuture& self) { return self.state->completed(); })
      .def("value", &value_of)
      .def("wait", &wait_for)
      .def("then", &then)
      .def("add_done_callback", &add_done_callback)
      .def("set_result",
           [](PythonFuture& self, ::py::object result) { self.state->complete(std::move(result)); })
      .def("_set_unwrap_func", [](PythonFuture& self, const ::py::function& unwrap) { self.unwrap = unwrap; })
      .def("__getstate__", [](const PythonFuture&) -> ::py::tuple {
        throw std::runtime_error("Can not pickle torch.futures.Future");
      });
  m.def("_collect_all", &collect_all);
  // Upstream's class prints as <class 'torch.Future'> (its signatures still say torch._C.Future).
  future.attr("__module__") = "torch";
}

}  // namespace tn::py
