// torch._C._distributed_c10d's ProcessGroup and ProcessGroupLocal: each collective's Python
// overloads (the list forms upstream keeps for multi-device calls, the single-tensor forms) on
// the distributed/ library's ProcessGroup.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <string>
#include <string_view>

#include "c10d.h"
#include "distributed/store.h"
#include "python_shim.h"

namespace py = pybind11;

namespace tn::py::c10d {
namespace {

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

using Group = ProcessGroupBase;
using GroupClass = ::py::class_<Group, std::shared_ptr<Group>>;
using WorkPtr = std::shared_ptr<WorkHandle>;

// ProcessGroup(rank, size), the base Python subclasses: its rank, size and backend name.
void bind_basics(GroupClass& group) {
  group.def(::py::init<int, int>(), ::py::arg("rank"), ::py::arg("size"))
      .def("rank", [](const Group& self) { return self.rank; })
      .def("size", [](const Group& self) { return self.size; })
      .def("name", [](const Group& self) { return std::string(self.group ? "local" : "undefined"); });
}

// broadcast, allreduce and reduce: one tensor per call, written in place.
void bind_reductions(GroupClass& group) {
  group
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
          ::py::arg("tensor"), ::py::arg("root"), ::py::arg("op") = ReduceOpValue());
}

// allgather, gather and scatter: one tensor per rank, collected or handed out.
void bind_gathers(GroupClass& group) {
  group
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
          ::py::arg("output_tensors"), ::py::arg("input_tensors"), ::py::arg("opts") = ScatterOptions());
}

// reduce_scatter and alltoall: every rank sends a part to every other.
void bind_exchanges(GroupClass& group) {
  group
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
          ::py::arg("output_tensor"), ::py::arg("input_tensor"), ::py::arg("opts") = AllToAllOptions());
}

// A send or receive of the one tensor in `tensors`, started by `call` on the library's group.
template <typename Call>
WorkPtr point_to_point(Group& self, const ::py::list& tensors, const char* operation, Call call) {
  const Buffer buffer = buffer_of(single_tensor(tensors, operation), operation);
  return released(tensors, [&] { return call(self.local(operation), buffer); });
}

// send, recv and barrier, and the batching hooks batch_isend_irecv calls.
void bind_point_to_point(GroupClass& group) {
  group
      .def(
          "send",
          [](Group& self, const ::py::list& tensors, int64_t dst, int64_t tag) {
            return point_to_point(self, tensors, "send", [&](ProcessGroup& group, const Buffer& buffer) {
              return group.send(buffer, static_cast<int>(dst), tag);
            });
          },
          ::py::arg("tensors"), ::py::arg("dstRank"), ::py::arg("tag"))
      .def(
          "recv",
          [](Group& self, const ::py::list& tensors, int64_t src, int64_t tag) {
            return point_to_point(self, tensors, "recv", [&](ProcessGroup& group, const Buffer& buffer) {
              return group.recv(buffer, static_cast<int>(src), tag);
            });
          },
          ::py::arg("tensors"), ::py::arg("srcRank"), ::py::arg("tag"))
      .def(
          "recv_anysource",
          [](Group& self, const ::py::list& tensors, int64_t tag) {
            return point_to_point(
                self, tensors, "recv_anysource",
                [&](ProcessGroup& group, const Buffer& buffer) { return group.recv(buffer, -1, tag); });
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
}

}  // namespace

void bind_process_groups(::py::module_& m) {
  GroupClass group(m, "ProcessGroup");
  bind_basics(group);
  bind_reductions(group);
  bind_gathers(group);
  bind_exchanges(group);
  bind_point_to_point(group);
  ::py::class_<LocalGroup, Group, std::shared_ptr<LocalGroup>>(m, "ProcessGroupLocal")
      .def(::py::init<std::shared_ptr<Store>, int, int, Milliseconds>(), ::py::arg("store"),
           ::py::arg("rank"), ::py::arg("size"), ::py::arg("timeout") = Milliseconds(30 * 60 * 1000));
}

}  // namespace tn::py::c10d
