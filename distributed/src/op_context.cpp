#include "op_context.h"

#include <algorithm>
#include <cstring>

#include "peer_memory.h"

namespace tn::dist {

RequestPtr OpContext::recv(int source, uint32_t slot, void* data, uint64_t bytes,
                           std::shared_ptr<const void> owner, std::function<void(const Request&)> on_finish) {
  return transport_.post_recv(FrameKind::Collective, source, sequence_, slot, signature_, data, bytes,
                              std::move(owner), std::move(on_finish));
}

void OpContext::send(int dest, uint32_t slot, const void* data, uint64_t bytes,
                     std::shared_ptr<const void> owner) {
  sends_.push_back(send_request(dest, slot, data, bytes, std::move(owner)));
}

RequestPtr OpContext::send_request(int dest, uint32_t slot, const void* data, uint64_t bytes,
                                   std::shared_ptr<const void> owner) {
  return transport_.send(dest, FrameKind::Collective, sequence_, slot, signature_, data, bytes,
                         std::move(owner));
}

void OpContext::tell(int dest, uint32_t slot, uint64_t value) {
  auto payload = std::make_shared<const uint64_t>(value);
  transport_.send(dest, FrameKind::Collective, sequence_, slot, signature_, payload.get(), sizeof value,
                  payload);
}

uint64_t OpContext::hear(int source, uint32_t slot) {
  auto value = std::make_shared<uint64_t>(0);
  wait(recv(source, slot, value.get(), sizeof(uint64_t), value));
  return *value;
}

std::vector<uint64_t> OpContext::exchange(uint32_t slot, uint64_t value) {
  std::vector<uint64_t> values(size_, value);
  for (int peer = 0; peer < size_; ++peer)
    if (peer != rank_) tell(peer, slot, value);
  for (int peer = 0; peer < size_; ++peer)
    if (peer != rank_) values[peer] = hear(peer, slot);
  return values;
}

void OpContext::read_peer(int peer, uint64_t address, void* out, uint64_t bytes) {
  std::string failure;
  try {
    if (transport_.peer_memory()->read(peer, address, out, bytes)) return;
    failure = "rank " + std::to_string(peer) + " let go of the buffer it announced while it was read";
  } catch (const PeerError& error) {
    failure = error.what();
  }
  // A peer lets go of its buffer, or exits, before the operation ends only when its part
  // failed or it died. If it failed, its abort frame (ahead of its disconnection) says why.
  const auto until = std::min(deadline_, Clock::now() + std::chrono::seconds(1));
  if (auto why = transport_.failure_involving(peer, until)) failure = *why;
  throw PeerError(name_ + " failed: " + failure);
}

void OpContext::wait(const RequestPtr& request) { transport_.wait(*request, deadline_, timeout_, name_); }

void OpContext::wait_all(const std::vector<RequestPtr>& requests) {
  for (const auto& request : requests) wait(request);
}

std::vector<RequestPtr> OpContext::recv_each(std::vector<Buffer>& buffers) {
  std::vector<RequestPtr> receives;
  for (int peer = 0; peer < size_; ++peer)
    if (peer != rank_)
      receives.push_back(recv(peer, 0, buffers[peer].data, buffers[peer].nbytes(), buffers[peer].owner));
  return receives;
}

OpContext::PeerCopies OpContext::recv_copies(uint64_t bytes) {
  PeerCopies copies{scratch(bytes * static_cast<uint64_t>(size_ - 1)), {}, std::vector<const void*>(size_)};
  for (int peer = 0, index = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    uint8_t* slot = copies.memory.get() + bytes * static_cast<uint64_t>(index++);
    copies.receives.push_back(recv(peer, 0, slot, bytes, copies.memory));
    copies.sources[peer] = slot;
  }
  return copies;
}

void OpContext::finish_sends() {
  for (const auto& request : sends_) wait(request);
  sends_.clear();
}

void copy_local(const Buffer& from, Buffer& to) {
  if (from.data != to.data && from.nbytes() > 0) std::memmove(to.data, from.data, from.nbytes());
}

Range block_of(size_t count, int parts, int index) {
  const size_t base = count / static_cast<size_t>(parts), extra = count % static_cast<size_t>(parts);
  const size_t i = static_cast<size_t>(index);
  return {i * base + std::min(i, extra), base + (i < extra ? 1 : 0)};
}

}  // namespace tn::dist
