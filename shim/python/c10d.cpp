// torch._C._distributed_c10d on the distributed/ library: stores, ReduceOp, the option
// classes, Work, ProcessGroup and ProcessGroupLocal, so the unmodified upstream
// torch.distributed runs with backend="local". Written with pybind11 (Debian's pybind11-dev):
// these are plain classes with attributes and overloads, which is what pybind11 is for; the
// tensor bindings stay on the raw C API for their speed.
#include <pybind11/chrono.h>
#include <pybind11/eval.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <string_view>
#include <thread>

#include "distributed/process_group.h"
#include "distributed/store.h"
#include "futures.h"
#include "python_shim.h"

namespace py = pybind11;
using namespace tn::dist;

namespace tn::py {
namespace {

// ---- ReduceOp: upstream's struct holding a RedOpType, which converts implicitly ----
enum class RedOpType : uint8_t {
  SUM = 0,
  AVG = 1,
  PRODUCT = 2,
  MIN = 3,
  MAX = 4,
  BAND = 5,
  BOR = 6,
  BXOR = 7,
  PREMUL_SUM = 8,
  UNUSED = 9
};
struct ReduceOpValue {
  RedOpType op = RedOpType::SUM;
};

ReduceOp to_library(const ReduceOpValue& value) {
  switch (value.op) {
    case RedOpType::SUM:
      return ReduceOp::Sum;
    case RedOpType::AVG:
      return ReduceOp::Avg;
    case RedOpType::PRODUCT:
      return ReduceOp::Product;
    case RedOpType::MIN:
      return ReduceOp::Min;
    case RedOpType::MAX:
      return ReduceOp::Max;
    case RedOpType::BAND:
      return ReduceOp::Band;
    case RedOpType::BOR:
      return ReduceOp::Bor;
    case RedOpType::BXOR:
      return ReduceOp::Bxor;
    case RedOpType::PREMUL_SUM:
      throw InvalidArgument(
          "ReduceOp.PREMUL_SUM is not supported by ProcessGroupLocal: it is NCCL's "
          "pre-multiplied sum; scale the tensor, then reduce with SUM");
    case RedOpType::UNUSED:
      break;
  }
  throw InvalidArgument("ReduceOp.UNUSED is not a reduction");
}

// ---- the option structs torch.distributed fills in ----
using Timeout = std::chrono::milliseconds;
constexpr Timeout kNoTimeout{-1};
struct BroadcastOptions {
  int64_t rootRank = 0, rootTensor = 0;
  Timeout timeout = kNoTimeout;
};
struct AllreduceOptions {
  ReduceOpValue reduceOp;
  Timeout timeout = kNoTimeout;
};
struct AllreduceCoalescedOptions : AllreduceOptions {};
struct ReduceOptions {
  ReduceOpValue reduceOp;
  int64_t rootRank = 0, rootTensor = 0;
  Timeout timeout = kNoTimeout;
};
struct AllGatherOptions {
  Timeout timeout = kNoTimeout;
};
struct GatherOptions {
  int64_t rootRank = 0;
  Timeout timeout = kNoTimeout;
};
struct ScatterOptions {
  int64_t rootRank = 0;
  Timeout timeout = kNoTimeout;
};
struct ReduceScatterOptions {
  ReduceOpValue reduceOp;
  Timeout timeout = kNoTimeout;
};
struct BarrierOptions {
  std::vector<int64_t> device_ids;
  Timeout timeout = kNoTimeout;
};
struct AllToAllOptions {
  Timeout timeout = kNoTimeout;
};

struct DistributedBackendOptions {};  // attributes are set from Python

enum class DebugLevel { OFF = 0, INFO = 1, DETAIL = 2 };
DebugLevel debug_level = DebugLevel::OFF;

// ---- tensors to buffers ----
Tensor tensor_argument(const ::py::handle& object, const char* operation) {
  if (!is_tensor(object.ptr()))
    throw ::py::type_error(std::string(operation) + ": expected a Tensor, got " +
                           Py_TYPE(object.ptr())->tp_name);
  return unpack(object.ptr());
}

Buffer buffer_of(const Tensor& tensor, const char* operation) {
  if (!tensor.is_contiguous())
    throw InvalidArgument(std::string(operation) +
                          ": ProcessGroupLocal needs contiguous tensors; call "
                          ".contiguous() first");
  tensor.bump_version();  // collectives write in place, as upstream's do
  return Buffer{tensor.data(), tensor.dtype(), tensor.numel(), tensor.storage()->memory()};
}

Buffer buffer_of(const ::py::handle& object, const char* operation) {
  return buffer_of(tensor_argument(object, operation), operation);
}

std::vector<Buffer> buffers_of(const ::py::list& tensors, const char* operation) {
  std::vector<Buffer> buffers;
  for (const auto& tensor : tensors) buffers.push_back(buffer_of(tensor, operation));
  return buffers;
}

// One Python tensor per list for the list forms upstream keeps for multi-GPU use.
::py::object single_tensor(const ::py::list& tensors, const char* operation) {
  if (tensors.size() != 1)
    throw InvalidArgument(std::string(operation) +
                          ": ProcessGroupLocal takes exactly one tensor per call "
                          "(the multi-device list forms are CUDA's), got " +
                          std::to_string(tensors.size()));
  return tensors[0];
}

::py::list single_list(const ::py::list& lists, const char* operation) {
  if (lists.size() != 1)
    throw InvalidArgument(std::string(operation) +
                          ": ProcessGroupLocal takes exactly one tensor list per "
                          "call, got " +
                          std::to_string(lists.size()));
  return lists[0].cast<::py::list>();
}

// ---- Work: one or more library operations and the tensors they fill ----
struct WorkHandle {
  std::vector<std::shared_ptr<Work>> works;
  ::py::list outputs;

  bool wait(std::optional<Timeout> timeout) {
    ::py::gil_scoped_release unlocked;
    for (auto& work : works) {
      std::optional<Milliseconds> limit;
      if (timeout && timeout->count() >= 0) limit = *timeout;
      if (!work->wait(limit))
        throw TimeoutError(work->operation() + ": Work.wait timed out after " +
                           std::to_string(limit->count()) + " ms");
    }
    return true;
  }
  bool is_completed() const {
    for (auto& work : works)
      if (!work->is_completed()) return false;
    return true;
  }
  std::exception_ptr error() const {
    for (auto& work : works)
      if (auto error = work->exception()) return error;
    return nullptr;
  }
};

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

std::shared_ptr<WorkHandle> handle(std::shared_ptr<Work> work, ::py::list outputs) {
  auto result = std::make_shared<WorkHandle>();
  result->works.push_back(std::move(work));
  result->outputs = std::move(outputs);
  return result;
}

// Starts a library operation without the GIL: a send may copy up to a socket buffer's worth
// (4 MiB) on the calling thread, which other Python threads need not wait for.
// `start` may only touch C++ values (the buffers are taken from the tensors beforehand).
template <typename Start>
std::shared_ptr<WorkHandle> released(::py::list outputs, Start start) {
  std::shared_ptr<Work> work;
  {
    ::py::gil_scoped_release unlocked;
    work = start();
  }
  return handle(std::move(work), std::move(outputs));
}

::py::list list_of(const ::py::handle& tensor) {
  ::py::list list;
  list.append(tensor);
  return list;
}

// ---- process groups ----
// Upstream's ProcessGroup is a base class Python can subclass; only ProcessGroupLocal carries a
// library group, and every collective below needs one.
struct ProcessGroupBase {
  ProcessGroupBase(int rank, int size) : rank(rank), size(size) {}
  virtual ~ProcessGroupBase() = default;
  int rank;
  int size;
  std::unique_ptr<ProcessGroup> group;

  ProcessGroup& local(const char* operation) const {
    if (!group)
      throw InvalidArgument(std::string("ProcessGroup.") + operation +
                            " is only implemented by ProcessGroupLocal (backend=\"local\")");
    return *group;
  }
};

// An option struct's timeout for one call: unset (negative, upstream's kUnsetTimeout) leaves
// the group's.
ProcessGroup::Timeout own_timeout(Timeout timeout) {
  return timeout.count() < 0 ? std::nullopt : ProcessGroup::Timeout(timeout);
}

std::shared_ptr<WorkHandle> allreduce(ProcessGroupBase& self, const ::py::object& tensor, ReduceOpValue op,
                                      Timeout timeout = kNoTimeout) {
  const Buffer buffer = buffer_of(tensor, "allreduce");
  const ReduceOp reduce_op = to_library(op);
  return released(list_of(tensor),
                  [&] { return self.local("allreduce").allreduce(buffer, reduce_op, own_timeout(timeout)); });
}

std::shared_ptr<WorkHandle> broadcast(ProcessGroupBase& self, const ::py::object& tensor, int64_t root,
                                      Timeout timeout = kNoTimeout) {
  const Buffer buffer = buffer_of(tensor, "broadcast");
  return released(list_of(tensor), [&] {
    return self.local("broadcast").broadcast(buffer, static_cast<int>(root), own_timeout(timeout));
  });
}

std::shared_ptr<WorkHandle> reduce(ProcessGroupBase& self, const ::py::object& tensor, int64_t root,
                                   ReduceOpValue op, Timeout timeout = kNoTimeout) {
  const Buffer buffer = buffer_of(tensor, "reduce");
  const ReduceOp reduce_op = to_library(op);
  return released(list_of(tensor), [&] {
    return self.local("reduce").reduce(buffer, static_cast<int>(root), reduce_op, own_timeout(timeout));
  });
}

std::shared_ptr<WorkHandle> allgather(ProcessGroupBase& self, const ::py::list& outputs,
                                      const ::py::object& input, Timeout timeout = kNoTimeout) {
  const Buffer in = buffer_of(input, "allgather");
  std::vector<Buffer> outs = buffers_of(outputs, "allgather");
  return released(
      outputs, [&] { return self.local("allgather").allgather(in, std::move(outs), own_timeout(timeout)); });
}

// The slices of `whole` that hold each rank's part, as buffers sharing its memory.
std::vector<Buffer> split_evenly(const Tensor& whole, int parts, const char* operation) {
  Buffer buffer = buffer_of(whole, operation);
  if (buffer.numel % parts != 0)
    throw InvalidArgument(std::string(operation) + ": a tensor of " + std::to_string(buffer.numel) +
                          " elements does not split into " + std::to_string(parts) + " equal parts");
  std::vector<Buffer> slices;
  const int64_t each = buffer.numel / parts;
  for (int i = 0; i < parts; ++i)
    slices.push_back(
        Buffer{static_cast<char*>(buffer.data) + i * each * static_cast<int64_t>(whole.itemsize()),
               buffer.dtype, each, buffer.owner});
  return slices;
}

std::vector<Buffer> split_sized(const Tensor& whole, const std::vector<int64_t>& split_sizes, int parts,
                                const char* operation) {
  if (split_sizes.empty()) return split_evenly(whole, parts, operation);
  Buffer buffer = buffer_of(whole, operation);
  if (static_cast<int>(split_sizes.size()) != parts)
    throw InvalidArgument(std::string(operation) + ": " + std::to_string(split_sizes.size()) +
                          " split sizes for a group of " + std::to_string(parts));
  const int64_t row = whole.dim() == 0 || whole.sizes()[0] == 0 ? 0 : whole.numel() / whole.sizes()[0];
  int64_t total = 0;
  std::vector<Buffer> slices;
  for (int64_t rows : split_sizes) {
    if (rows < 0) throw InvalidArgument(std::string(operation) + ": negative split size");
    slices.push_back(
        Buffer{static_cast<char*>(buffer.data) + total * row * static_cast<int64_t>(whole.itemsize()),
               buffer.dtype, rows * row, buffer.owner});
    total += rows;
  }
  if (whole.dim() == 0 || total != whole.sizes()[0])
    throw InvalidArgument(std::string(operation) + ": split sizes add up to " + std::to_string(total) +
                          " rows, the tensor has " + std::to_string(whole.dim() ? whole.sizes()[0] : 0));
  return slices;
}

void set_error_translation() {
  // Library errors surface as RuntimeError, as c10d's do; argument errors the same way upstream
  // raises them (RuntimeError), with our message naming what is wrong.
  ::py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const tn::dist::DistError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    } catch (const tn::Error& e) {
      set_python_error(e);
    }
  });
}

// Python sees each store kind as its own class; pybind11 needs a C++ type per class, so
// each is a Store that forwards to the library's store.
class ForwardingStore : public Store {
 public:
  explicit ForwardingStore(std::shared_ptr<Store> inner)
      : Store(inner->timeout()), inner_(std::move(inner)) {}
  void set(const std::string& key, const Bytes& value) override { inner_->set(key, value); }
  Bytes get(const std::string& key) override { return inner_->get(key); }
  int64_t add(const std::string& key, int64_t delta) override { return inner_->add(key, delta); }
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    return inner_->compare_set(key, expected, desired);
  }
  bool check(const std::vector<std::string>& keys) override { return inner_->check(keys); }
  void wait(const std::vector<std::string>& keys, Milliseconds timeout) override {
    inner_->wait(keys, timeout);
  }
  using Store::wait;
  bool delete_key(const std::string& key) override { return inner_->delete_key(key); }
  int64_t num_keys() override { return inner_->num_keys(); }
  const std::shared_ptr<Store>& inner() const { return inner_; }

 private:
  std::shared_ptr<Store> inner_;
};
struct HashStoreHandle : ForwardingStore {
  using ForwardingStore::ForwardingStore;
};
struct FileStoreHandle : ForwardingStore {
  using ForwardingStore::ForwardingStore;
};
struct TCPStoreHandle : ForwardingStore {
  using ForwardingStore::ForwardingStore;
};
struct PrefixStoreHandle : ForwardingStore {
  using ForwardingStore::ForwardingStore;
};

void set_store_timeout(Store& store, Milliseconds timeout) {
  store.set_timeout(timeout);
  if (auto* forwarding = dynamic_cast<ForwardingStore*>(&store)) forwarding->inner()->set_timeout(timeout);
}

struct LocalGroup : ProcessGroupBase {
  LocalGroup(std::shared_ptr<Store> store, int rank, int size, Milliseconds timeout)
      : ProcessGroupBase(rank, size) {
    ProcessGroupOptions options;
    options.timeout = timeout;
    // TORCHNATIVE_SAME_HOST_MEMORY=0 sends everything over TCP, as between hosts (the benchmark
    // measures both ways).
    if (const char* memory = std::getenv("TORCHNATIVE_SAME_HOST_MEMORY"))
      options.same_host_memory = std::string_view(memory) != "0";
    ::py::gil_scoped_release unlocked;  // the rendezvous waits for the other ranks
    group = std::make_unique<ProcessGroup>(std::move(store), rank, size, options);
  }
};

int root_of(int64_t root, int64_t root_tensor, const char* operation) {
  if (root_tensor != 0)
    throw InvalidArgument(std::string(operation) + ": rootTensor " + std::to_string(root_tensor) +
                          " names a second tensor of a multi-device call; ProcessGroupLocal takes one");
  return static_cast<int>(root);
}

void bind_process_groups(::py::module_& m) {
  using Group = ProcessGroupBase;
  using WorkPtr = std::shared_ptr<WorkHandle>;
  ::py::class_<Group, std::shared_ptr<Group>> group(m, "ProcessGroup");
  group.def(::py::init<int, int>(), ::py::arg("rank"), ::py::arg("size"))
      .def("rank", [](const Group& self) { return self.rank; })
      .def("size", [](const Group& self) { return self.size; })
      .def("name", [](const Group& self) { return std::string(self.group ? "local" : "undefined"); })
      .def(
          "broadcast",
          [](Group& self, const ::py::list& tensors, const BroadcastOptions& opts) {
            return broadcast(self, single_tensor(tensors, "broadcast"),
                             root_of(opts.rootRank, opts.rootTensor, "broadcast"), opts.timeout);
          },
          ::py::arg("tensors"), ::py::arg("opts") = BroadcastOptions())
      .def(
          "broadcast",
          [](Group& self, const ::py::object& tensor, int64_t root) { return broadcast(self, tensor, root); },
          ::py::arg("tensor"), ::py::arg("root"))
      .def(
          "allreduce",
          [](Group& self, const ::py::list& tensors, const AllreduceOptions& opts) {
            return allreduce(self, single_tensor(tensors, "allreduce"), opts.reduceOp, opts.timeout);
          },
          ::py::arg("tensors"), ::py::arg("opts") = AllreduceOptions())
      .def(
          "allreduce",
          [](Group& self, const ::py::list& tensors, ReduceOpValue op) {
            return allreduce(self, single_tensor(tensors, "allreduce"), op);
          },
          ::py::arg("tensors"), ::py::arg("op") = ReduceOpValue())
      .def(
          "allreduce",
          [](Group& self, const ::py::object& tensor, ReduceOpValue op) {
            return allreduce(self, tensor, op);
          },
          ::py::arg("tensor"), ::py::arg("op") = ReduceOpValue())
      .def(
          "allreduce_coalesced",
          [](Group& self, const ::py::list& tensors, const AllreduceCoalescedOptions& opts) {
            auto result = std::make_shared<WorkHandle>();
            for (const auto& tensor : tensors) {
              auto one = allreduce(self, ::py::reinterpret_borrow<::py::object>(tensor), opts.reduceOp,
                                   opts.timeout);
              result->works.push_back(one->works.front());
            }
            result->outputs = tensors;
            return result;
          },
          ::py::arg("tensors"), ::py::arg("opts") = AllreduceCoalescedOptions())
      .def(
          "reduce",
          [](Group& self, const ::py::list& tensors, const ReduceOptions& opts) {
            return reduce(self, single_tensor(tensors, "reduce"),
                          root_of(opts.rootRank, opts.rootTensor, "reduce"), opts.reduceOp, opts.timeout);
          },
          ::py::arg("tensors"), ::py::arg("opts") = ReduceOptions())
      .def(
          "reduce",
          [](Group& self, const ::py::object& tensor, int64_t root, ReduceOpValue op) {
            return reduce(self, tensor, root, op);
          },
          ::py::arg("tensor"), ::py::arg("root"), ::py::arg("op") = ReduceOpValue())
      .def(
          "allgather",
          [](Group& self, const ::py::list& output_lists, const ::py::list& inputs,
             const AllGatherOptions& opts) {
            return allgather(self, single_list(output_lists, "allgather"), single_tensor(inputs, "allgather"),
                             opts.timeout);
          },
          ::py::arg("output_tensors"), ::py::arg("input_tensors"), ::py::arg("opts") = AllGatherOptions())
      .def(
          "allgather",
          [](Group& self, const ::py::list& outputs, const ::py::object& input) {
            return allgather(self, outputs, input);
          },
          ::py::arg("output_tensors"), ::py::arg("input_tensor"))
      .def(
          "_allgather_base",
          [](Group& self, const ::py::object& output, const ::py::object& input,
             const AllGatherOptions& opts) -> WorkPtr {
            const Tensor whole = tensor_argument(output, "_allgather_base");
            std::vector<Buffer> slices = split_evenly(whole, self.size, "_allgather_base");
            const Buffer in = buffer_of(input, "_allgather_base");
            return released(list_of(output), [&] {
              return self.local("_allgather_base")
                  .allgather(in, std::move(slices), own_timeout(opts.timeout));
            });
          },
          ::py::arg("output"), ::py::arg("input"), ::py::arg("opts") = AllGatherOptions())
      .def(
          "allgather_coalesced",
          [](Group& self, const ::py::list& output_lists, const ::py::list& inputs,
             const AllGatherOptions& opts) {
            if (output_lists.size() != inputs.size())
              throw InvalidArgument("allgather_coalesced: " + std::to_string(output_lists.size()) +
                                    " output lists for " + std::to_string(inputs.size()) + " inputs");
            auto result = std::make_shared<WorkHandle>();
            for (size_t i = 0; i < inputs.size(); ++i)
              result->works.push_back(allgather(self, output_lists[i].cast<::py::list>(),
                                                ::py::reinterpret_borrow<::py::object>(inputs[i]),
                                                opts.timeout)
                                          ->works.front());
            result->outputs = output_lists;
            return result;
          },
          ::py::arg("output_lists"), ::py::arg("input_list"), ::py::arg("opts") = AllGatherOptions())
      .def(
          "gather",
          [](Group& self, const ::py::list& output_lists, const ::py::list& inputs,
             const GatherOptions& opts) {
            const int root = static_cast<int>(opts.rootRank);
            ::py::list outputs = output_lists.empty() ? ::py::list() : single_list(output_lists, "gather");
            std::vector<Buffer> buffers = buffers_of(outputs, "gather");
            const Buffer in = buffer_of(single_tensor(inputs, "gather"), "gather");
            return released(outputs, [&] {
              return self.local("gather").gather(in, std::move(buffers), root, own_timeout(opts.timeout));
            });
          },
          ::py::arg("output_tensors"), ::py::arg("input_tensors"), ::py::arg("opts") = GatherOptions())
      .def(
          "scatter",
          [](Group& self, const ::py::list& outputs, const ::py::list& input_lists,
             const ScatterOptions& opts) {
            const int root = static_cast<int>(opts.rootRank);
            ::py::list inputs = input_lists.empty() ? ::py::list() : single_list(input_lists, "scatter");
            ::py::object output = single_tensor(outputs, "scatter");
            std::vector<Buffer> ins = buffers_of(inputs, "scatter");
            const Buffer out = buffer_of(output, "scatter");
            return released(outputs, [&] {
              return self.local("scatter").scatter(std::move(ins), out, root, own_timeout(opts.timeout));
            });
          },
          ::py::arg("output_tensors"), ::py::arg("input_tensors"), ::py::arg("opts") = ScatterOptions())
      .def(
          "reduce_scatter",
          [](Group& self, const ::py::list& outputs, const ::py::list& input_lists,
             const ReduceScatterOptions& opts) {
            ::py::object output = single_tensor(outputs, "reduce_scatter");
            std::vector<Buffer> ins =
                buffers_of(single_list(input_lists, "reduce_scatter"), "reduce_scatter");
            const Buffer out = buffer_of(output, "reduce_scatter");
            const ReduceOp op = to_library(opts.reduceOp);
            return released(outputs, [&] {
              return self.local("reduce_scatter")
                  .reduce_scatter(std::move(ins), out, op, own_timeout(opts.timeout));
            });
          },
          ::py::arg("output_tensors"), ::py::arg("input_tensors"), ::py::arg("opts") = ReduceScatterOptions())
      .def(
          "_reduce_scatter_base",
          [](Group& self, const ::py::object& output, const ::py::object& input,
             const ReduceScatterOptions& opts) {
            std::vector<Buffer> slices = split_evenly(tensor_argument(input, "_reduce_scatter_base"),
                                                      self.size, "_reduce_scatter_base");
            const Buffer out = buffer_of(output, "_reduce_scatter_base");
            const ReduceOp op = to_library(opts.reduceOp);
            return released(list_of(output), [&] {
              return self.local("_reduce_scatter_base")
                  .reduce_scatter(std::move(slices), out, op, own_timeout(opts.timeout));
            });
          },
          ::py::arg("outputTensor"), ::py::arg("inputTensor"), ::py::arg("opts") = ReduceScatterOptions())
      .def(
          "alltoall_base",
          [](Group& self, const ::py::object& output, const ::py::object& input,
             const std::vector<int64_t>& output_split_sizes, const std::vector<int64_t>& input_split_sizes,
             const AllToAllOptions& opts) {
            auto outputs = split_sized(tensor_argument(output, "alltoall_base"), output_split_sizes,
                                       self.size, "alltoall_base");
            auto inputs = split_sized(tensor_argument(input, "alltoall_base"), input_split_sizes, self.size,
                                      "alltoall_base");
            return released(list_of(output), [&] {
              return self.local("alltoall_base")
                  .alltoall(std::move(inputs), std::move(outputs), own_timeout(opts.timeout));
            });
          },
          ::py::arg("output_tensor"), ::py::arg("input_tensor"), ::py::arg("output_split_sizes"),
          ::py::arg("input_split_sizes"), ::py::arg("opts") = AllToAllOptions())
      .def(
          "alltoall",
          [](Group& self, const ::py::list& outputs, const ::py::list& inputs, const AllToAllOptions& opts) {
            std::vector<Buffer> ins = buffers_of(inputs, "alltoall");
            std::vector<Buffer> outs = buffers_of(outputs, "alltoall");
            return released(outputs, [&] {
              return self.local("alltoall")
                  .alltoall(std::move(ins), std::move(outs), own_timeout(opts.timeout));
            });
          },
          ::py::arg("output_tensor"), ::py::arg("input_tensor"), ::py::arg("opts") = AllToAllOptions())
      .def(
          "send",
          [](Group& self, const ::py::list& tensors, int64_t dst, int64_t tag) {
            ::py::object tensor = single_tensor(tensors, "send");
            const Buffer buffer = buffer_of(tensor, "send");
            return released(tensors,
                            [&] { return self.local("send").send(buffer, static_cast<int>(dst), tag); });
          },
          ::py::arg("tensors"), ::py::arg("dstRank"), ::py::arg("tag"))
      .def(
          "recv",
          [](Group& self, const ::py::list& tensors, int64_t src, int64_t tag) {
            ::py::object tensor = single_tensor(tensors, "recv");
            const Buffer buffer = buffer_of(tensor, "recv");
            return released(tensors,
                            [&] { return self.local("recv").recv(buffer, static_cast<int>(src), tag); });
          },
          ::py::arg("tensors"), ::py::arg("srcRank"), ::py::arg("tag"))
      .def(
          "recv_anysource",
          [](Group& self, const ::py::list& tensors, int64_t tag) {
            ::py::object tensor = single_tensor(tensors, "recv_anysource");
            const Buffer buffer = buffer_of(tensor, "recv_anysource");
            return released(tensors, [&] { return self.local("recv_anysource").recv(buffer, -1, tag); });
          },
          ::py::arg("tensors"), ::py::arg("tag"))
      .def(
          "barrier",
          [](Group& self, const BarrierOptions& opts) {
            return released(::py::list(),
                            [&] { return self.local("barrier").barrier(own_timeout(opts.timeout)); });
          },
          ::py::arg("opts") = BarrierOptions())
      // batch_isend_irecv brackets its operations with these. Our point-to-point operations
      // start at once and never wait on each other, so there is nothing to batch.
      .def("_start_coalescing", [](Group&) {})
      .def("_end_coalescing", [](Group&, const ::py::list&) {})
      .def(
          "monitored_barrier",
          [](Group&, ::py::object, bool) -> WorkPtr {
            throw NotImplemented(
                "ProcessGroup.monitored_barrier is not supported by ProcessGroupLocal (upstream "
                "has it for gloo only); barrier() raises an error naming the missing rank");
          },
          ::py::arg("timeout") = ::py::none(), ::py::arg("wait_all_ranks") = false);
  ::py::class_<LocalGroup, Group, std::shared_ptr<LocalGroup>>(m, "ProcessGroupLocal")
      .def(::py::init<std::shared_ptr<Store>, int, int, Milliseconds>(), ::py::arg("store"),
           ::py::arg("rank"), ::py::arg("size"), ::py::arg("timeout") = Milliseconds(30 * 60 * 1000));
}

const char* kRegisterBackend = R"PY(
import importlib.abc, importlib.machinery, sys

def install(create):
    # torch.distributed learns of third-party backends through Backend.register_backend,
    # which exists only once torch/distributed/distributed_c10d.py has run: register "local"
    # the moment that module finishes loading, without touching upstream's files.
    target = "torch.distributed.distributed_c10d"
    if target in sys.modules:
        sys.modules[target].Backend.register_backend("local", create)
        return

    class RegisterLocalBackend(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path, target_module=None):
            if fullname != target:
                return None
            sys.meta_path.remove(self)
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                module.Backend.register_backend("local", create)

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, RegisterLocalBackend())
)PY";

}  // namespace

void init_c10d(PyObject* root_module, PyObject* c10d_module) {
  auto m = ::py::reinterpret_borrow<::py::module_>(c10d_module);
  set_error_translation();
  // Upstream's values: 30 minutes for a group, -1 ms for "no timeout" on Work.wait.
  m.attr("_DEFAULT_PG_TIMEOUT") = ::py::cast(Milliseconds(30 * 60 * 1000));
  m.attr("_DEFAULT_NO_TIMEOUT") = ::py::cast(kNoTimeout);

  ::py::class_<ReduceOpValue> reduce_op(m, "ReduceOp");
  ::py::enum_<RedOpType>(reduce_op, "RedOpType")
      .value("SUM", RedOpType::SUM)
      .value("AVG", RedOpType::AVG)
      .value("PRODUCT", RedOpType::PRODUCT)
      .value("MIN", RedOpType::MIN)
      .value("MAX", RedOpType::MAX)
      .value("BAND", RedOpType::BAND)
      .value("BOR", RedOpType::BOR)
      .value("BXOR", RedOpType::BXOR)
      .value("PREMUL_SUM", RedOpType::PREMUL_SUM)
      .value("UNUSED", RedOpType::UNUSED)
      .export_values();
  reduce_op.def(::py::init<>())
      .def(::py::init([](RedOpType op) { return ReduceOpValue{op}; }))
      .def_readwrite("op", &ReduceOpValue::op)
      .def("__eq__", [](const ReduceOpValue& a, const ReduceOpValue& b) { return a.op == b.op; })
      .def("__eq__", [](const ReduceOpValue& a, RedOpType b) { return a.op == b; })
      .def("__hash__", [](const ReduceOpValue& a) { return static_cast<int>(a.op); })
      .def("__repr__", [](const ReduceOpValue& a) {
        return "<ReduceOp." + ::py::str(::py::cast(a.op).attr("name")).cast<std::string>() + ">";
      });
  ::py::implicitly_convertible<RedOpType, ReduceOpValue>();

#define TN_TIMEOUT(T) .def_readwrite("timeout", &T::timeout)
  ::py::class_<BroadcastOptions>(m, "BroadcastOptions")
      .def(::py::init<>())
      .def_readwrite("rootRank", &BroadcastOptions::rootRank)
      .def_readwrite("rootTensor", &BroadcastOptions::rootTensor) TN_TIMEOUT(BroadcastOptions);
  ::py::class_<AllreduceOptions>(m, "AllreduceOptions")
      .def(::py::init<>())
      .def_readwrite("reduceOp", &AllreduceOptions::reduceOp) TN_TIMEOUT(AllreduceOptions);
  ::py::class_<AllreduceCoalescedOptions, AllreduceOptions>(m, "AllreduceCoalescedOptions")
      .def(::py::init<>());
  ::py::class_<ReduceOptions>(m, "ReduceOptions")
      .def(::py::init<>())
      .def_readwrite("reduceOp", &ReduceOptions::reduceOp)
      .def_readwrite("rootRank", &ReduceOptions::rootRank)
      .def_readwrite("rootTensor", &ReduceOptions::rootTensor) TN_TIMEOUT(ReduceOptions);
  ::py::class_<AllGatherOptions>(m, "AllGatherOptions").def(::py::init<>()) TN_TIMEOUT(AllGatherOptions);
  ::py::class_<GatherOptions>(m, "GatherOptions")
      .def(::py::init<>())
      .def_readwrite("rootRank", &GatherOptions::rootRank) TN_TIMEOUT(GatherOptions);
  ::py::class_<ScatterOptions>(m, "ScatterOptions")
      .def(::py::init<>())
      .def_readwrite("rootRank", &ScatterOptions::rootRank) TN_TIMEOUT(ScatterOptions);
  ::py::class_<ReduceScatterOptions>(m, "ReduceScatterOptions")
      .def(::py::init<>())
      .def_readwrite("reduceOp", &ReduceScatterOptions::reduceOp) TN_TIMEOUT(ReduceScatterOptions);
  ::py::class_<BarrierOptions>(m, "BarrierOptions")
      .def(::py::init<>())
      .def_readwrite("device_ids", &BarrierOptions::device_ids) TN_TIMEOUT(BarrierOptions);
  ::py::class_<AllToAllOptions>(m, "AllToAllOptions").def(::py::init<>()) TN_TIMEOUT(AllToAllOptions);
#undef TN_TIMEOUT
  // Filled by torch.distributed for backends registered with extended_api=True.
  ::py::class_<DistributedBackendOptions>(m, "_DistributedBackendOptions", ::py::dynamic_attr())
      .def(::py::init<>());

  ::py::enum_<DebugLevel>(m, "DebugLevel")
      .value("OFF", DebugLevel::OFF)
      .value("INFO", DebugLevel::INFO)
      .value("DETAIL", DebugLevel::DETAIL);
  m.def("get_debug_level", [] { return debug_level; });
  m.def("set_debug_level", [](DebugLevel level) { debug_level = level; });
  m.def("set_debug_level_from_env", [] {
    const char* value = std::getenv("TORCH_DISTRIBUTED_DEBUG");
    const std::string text = value ? value : "OFF";
    if (text == "OFF")
      debug_level = DebugLevel::OFF;
    else if (text == "INFO")
      debug_level = DebugLevel::INFO;
    else if (text == "DETAIL")
      debug_level = DebugLevel::DETAIL;
    else
      throw ::py::value_error("The value of TORCH_DISTRIBUTED_DEBUG must be OFF, INFO, or DETAIL, but is " +
                              text);
  });

  // ---- stores ----
  auto bytes_of = [](const std::string& text) { return Bytes(text.begin(), text.end()); };
  auto as_bytes = [](const Bytes& value) {
    return ::py::bytes(reinterpret_cast<const char*>(value.data()), value.size());
  };
  ::py::class_<Store, std::shared_ptr<Store>>(m, "Store")
      .def("set",
           [=](Store& store, const std::string& key, const std::string& value) {
             ::py::gil_scoped_release unlocked;
             store.set(key, bytes_of(value));
           })
      .def("get",
           [=](Store& store, const std::string& key) {
             Bytes value;
             {
               ::py::gil_scoped_release unlocked;
               value = store.get(key);
             }
             return as_bytes(value);
           })
      .def("add",
           [](Store& store, const std::string& key, int64_t value) {
             ::py::gil_scoped_release unlocked;
             return store.add(key, value);
           })
      .def(
          "compare_set",
          [=](Store& store, const std::string& key, const std::string& expected, const std::string& desired) {
            Bytes value;
            {
              ::py::gil_scoped_release unlocked;
              value = store.compare_set(key, bytes_of(expected), bytes_of(desired));
            }
            return as_bytes(value);
          })
      .def("delete_key",
           [](Store& store, const std::string& key) {
             ::py::gil_scoped_release unlocked;
             return store.delete_key(key);
           })
      .def("num_keys",
           [](Store& store) {
             ::py::gil_scoped_release unlocked;
             return store.num_keys();
           })
      .def("set_timeout", &set_store_timeout)
      .def("wait",
           [](Store& store, const std::vector<std::string>& keys) {
             ::py::gil_scoped_release unlocked;
             store.wait(keys);
           })
      .def("wait",
           [](Store& store, const std::vector<std::string>& keys, Milliseconds timeout) {
             ::py::gil_scoped_release unlocked;
             store.wait(keys, timeout);
           })
      .def_property_readonly("timeout", [](const Store& store) { return store.timeout(); });

  ::py::class_<HashStoreHandle, Store, std::shared_ptr<HashStoreHandle>>(m, "HashStore").def(::py::init([] {
    return std::make_shared<HashStoreHandle>(make_hash_store());
  }));
  ::py::class_<FileStoreHandle, Store, std::shared_ptr<FileStoreHandle>>(m, "FileStore")
      .def(::py::init([](const std::string& path, int num_workers) {
             ::py::gil_scoped_release unlocked;
             return std::make_shared<FileStoreHandle>(
                 make_file_store(path, num_workers < 0 ? std::nullopt : std::optional<int>(num_workers)));
           }),
           ::py::arg("file_name"), ::py::arg("world_size") = -1);
  ::py::class_<TCPStoreHandle, Store, std::shared_ptr<TCPStoreHandle>>(m, "TCPStore")
      .def(::py::init([](const std::string& host, int port, std::optional<int> world_size, bool is_master,
                         Milliseconds timeout, bool wait_for_workers, bool /*multi_tenant*/) {
             if (port < 0 || port > 65535)
               throw InvalidArgument("TCPStore: port " + std::to_string(port) + " is out of range");
             TCPStoreOptions options;
             options.host = host;
             options.port = static_cast<uint16_t>(port);
             options.is_master = is_master;
             options.world_size = world_size;
             options.wait_for_workers = wait_for_workers;
             options.timeout = timeout;
             ::py::gil_scoped_release unlocked;
             return std::make_shared<TCPStoreHandle>(make_tcp_store(options));
           }),
           ::py::arg("host_name"), ::py::arg("port"), ::py::arg("world_size") = ::py::none(),
           ::py::arg("is_master") = false, ::py::arg("timeout") = Milliseconds(300000),
           ::py::arg("wait_for_workers") = true, ::py::arg("multi_tenant") = false)
      .def_property_readonly("host",
                             [](const TCPStoreHandle& store) { return tcp_store_host(*store.inner()); })
      .def_property_readonly("port",
                             [](const TCPStoreHandle& store) { return tcp_store_port(*store.inner()); });
  ::py::class_<PrefixStoreHandle, Store, std::shared_ptr<PrefixStoreHandle>>(m, "PrefixStore")
      .def(::py::init([](const std::string& prefix, std::shared_ptr<Store> inner) {
             return std::make_shared<PrefixStoreHandle>(make_prefix_store(prefix, std::move(inner)));
           }),
           ::py::arg("prefix"), ::py::arg("store"))
      .def_property_readonly("underlying_store",
                             [](const PrefixStoreHandle& store) { return inner_of(*store.inner()); });

  // ---- Work ----
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

  bind_process_groups(m);

  // DistributedDataParallel and FullyShardedDataParallel call this first; refusing here names
  // what is missing before they reach the Reducer.
  m.def("_verify_params_across_processes", [](::py::args, ::py::kwargs) {
    throw NotImplemented(
        "DistributedDataParallel and FullyShardedDataParallel are not supported by torchnative: they need "
        "c10d's Reducer (bucketed gradient all_reduce driven by autograd hooks) and autograd. Average "
        "gradients with torch.distributed.all_reduce after backward instead.");
  });

  // torch.distributed.is_available() is True once this exists; it also registers "local".
  static PyMethodDef c10d_init_def = {"_c10d_init",
                                      [](PyObject*, PyObject*) -> PyObject* {
                                        try {
                                          ::py::dict scope;
                                          ::py::exec(kRegisterBackend, scope);
                                          auto module = ::py::module_::import("torch._C._distributed_c10d");
                                          scope["install"](module.attr("ProcessGroupLocal"));
                                          Py_RETURN_TRUE;
                                        } catch (::py::error_already_set& error) {
                                          error.restore();
                                          return nullptr;
                                        }
                                      },
                                      METH_NOARGS, nullptr};
  PyModule_AddObject(root_module, "_c10d_init", PyCFunction_NewEx(&c10d_init_def, nullptr, nullptr));
}

}  // namespace tn::py
