#include "op_context.h"

#include <algorithm>

namespace tn::dist {

RequestPtr OpContext::recv(int source, uint32_t slot, void* data, uint64_t bytes,
                           std::shared_ptr<const void> owner) {
  return transport_.post_recv(FrameKind::Collective, source, sequence_, slot, signature_, data, bytes,
                              std::move(owner));
}

void OpContext::send(int dest, uint32_t slot, const void* data, uint64_t bytes,
                     std::shared_ptr<const void> owner) {
  sends_.push_back(transport_.send(dest, FrameKind::Collective, sequence_, slot, signature_, data, bytes,
                                   std::move(owner)));
}

void OpContext::wait(const RequestPtr& request) {
  transport_.wait(*request, deadline_, options_.timeout, name_);
}

void OpContext::finish_sends() {
  for (const auto& request : sends_) wait(request);
  sends_.clear();
}

Range block_of(size_t count, int parts, int index) {
  const size_t base = count / static_cast<size_t>(parts), extra = count % static_cast<size_t>(parts);
  const size_t i = static_cast<size_t>(index);
  return {i * base + std::min(i, extra), base + (i < extra ? 1 : 0)};
}

}  // namespace tn::dist
