// Profiler scopes: profiler::_record_function_enter and _record_function_exit, which
// torch.autograd.profiler.record_function opens and closes (every Optimizer.step does).
// Upstream's RecordFunction reports to the callbacks of an active profiler. The shim has
// no profiler (torch.autograd.profiler.profile is refused by name), so a scope has nothing
// to report to; its handle is what upstream hands out, a uint8 tensor of the size of
// libtorch's RecordFunction (288 bytes), here zeros, and exit accepts only such a handle.
#include <algorithm>
#include <memory>
#include <vector>

#include "common.h"

namespace tn {

namespace {

constexpr int64_t kHandleBytes = 288;

// The storages of the handles enter gave out that are still alive.
std::vector<std::weak_ptr<Storage>>& live_handles() {
  static std::vector<std::weak_ptr<Storage>> handles;
  return handles;
}

TN_KERNEL("profiler::_record_function_enter", {
  auto& handles = live_handles();
  std::erase_if(handles, [](const std::weak_ptr<Storage>& h) { return h.expired(); });
  Tensor handle = ops::zeros({kHandleBytes}, ScalarType::Byte);
  handles.push_back(handle.storage());
  return handle;
});

TN_KERNEL("profiler::_record_function_exit", {
  const Tensor& handle = a.tensor(0);
  if (handle.dtype() != ScalarType::Byte) throw Error("Expected temporary cpp type wrapper");
  const auto& handles = live_handles();
  bool issued = std::any_of(handles.begin(), handles.end(),
                            [&](const std::weak_ptr<Storage>& h) { return h.lock() == handle.storage(); });
  if (!issued) throw Error("Expected temporary cpp type wrapper of type at::RecordFunction");
  return IValue::tuple({});
});

}  // namespace

}  // namespace tn
