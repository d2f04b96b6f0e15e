// torch._C._distributed_c10d's ReduceOp, the option structs torch.distributed fills in for each
// collective, and the debug level.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <iterator>
#include <string>

#include "c10d.h"

namespace py = pybind11;

namespace tn::py::c10d {
namespace {

struct DistributedBackendOptions {};  // attributes are set from Python

enum class DebugLevel { OFF = 0, INFO = 1, DETAIL = 2 };
DebugLevel debug_level = DebugLevel::OFF;

void bind_reduce_op(::py::module_& m) {
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
}

void bind_option_structs(::py::module_& m) {
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
}

void bind_debug_level(::py::module_& m) {
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
}

}  // namespace

ReduceOp to_library(const ReduceOpValue& value) {
  // Indexed by RedOpType, whose values are upstream's; PREMUL_SUM and UNUSED have no entry.
  static constexpr ReduceOp kLibrary[] = {ReduceOp::Sum, ReduceOp::Avg,  ReduceOp::Product, ReduceOp::Min,
                                          ReduceOp::Max, ReduceOp::Band, ReduceOp::Bor,     ReduceOp::Bxor};
  if (value.op == RedOpType::PREMUL_SUM)
    throw InvalidArgument(
        "ReduceOp.PREMUL_SUM is not supported by ProcessGroupLocal: it is NCCL's "
        "pre-multiplied sum; scale the tensor, then reduce with SUM");
  const auto index = static_cast<size_t>(value.op);
  if (index >= std::size(kLibrary)) throw InvalidArgument("ReduceOp.UNUSED is not a reduction");
  return kLibrary[index];
}

void bind_options(::py::module_& m) {
  bind_reduce_op(m);
  bind_option_structs(m);
  bind_debug_level(m);
}

}  // namespace tn::py::c10d
