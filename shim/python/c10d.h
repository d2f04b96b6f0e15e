// torch._C._distributed_c10d, shared by its binding files (c10d*.cpp): the ReduceOp and option
// structs torch.distributed fills in, and Work, the handle every collective returns. Private to
// the extension. The binding files are written with pybind11 (Debian's pybind11-dev): these are
// plain classes with attributes and overloads, which is what pybind11 is for; the tensor
// bindings stay on the raw C API for their speed.
#pragma once

#include <pybind11/pybind11.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <vector>

#include "distributed/process_group.h"
#include "futures.h"

namespace tn::py::c10d {

using namespace tn::dist;

// ReduceOp: upstream's struct holding a RedOpType, which converts implicitly.
// Upstream's numbering: SUM is 0, counting up in this order.
enum class RedOpType : uint8_t { SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR, PREMUL_SUM, UNUSED };
struct ReduceOpValue {
  RedOpType op = RedOpType::SUM;
};

// The library's reduction for a ReduceOp; refuses PREMUL_SUM and UNUSED by name.
ReduceOp to_library(const ReduceOpValue& value);

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

// Work: one or more library operations and the tensors they fill.
struct TN_HIDDEN WorkHandle {
  std::vector<std::shared_ptr<Work>> works;
  pybind11::list outputs;

  bool wait(std::optional<Timeout> timeout);
  bool is_completed() const;
  std::exception_ptr error() const;  // the first work's error, if any
};

std::shared_ptr<WorkHandle> handle(std::shared_ptr<Work> work, pybind11::list outputs);

// Starts a library operation without the GIL: a send may copy up to a socket buffer's worth
// (4 MiB) on the calling thread, which other Python threads need not wait for.
// `start` may only touch C++ values (the buffers are taken from the tensors beforehand).
template <typename Start>
std::shared_ptr<WorkHandle> released(pybind11::list outputs, Start start) {
  std::shared_ptr<Work> work;
  {
    pybind11::gil_scoped_release unlocked;
    work = start();
  }
  return handle(std::move(work), std::move(outputs));
}

// The classes of each part of the module, in the order init_c10d binds them.
void bind_options(pybind11::module_& m);         // c10d_options.cpp: ReduceOp, *Options, DebugLevel
void bind_stores(pybind11::module_& m);          // c10d_stores.cpp
void bind_work(pybind11::module_& m);            // c10d_work.cpp
void bind_process_groups(pybind11::module_& m);  // c10d_process_group.cpp

}  // namespace tn::py::c10d
