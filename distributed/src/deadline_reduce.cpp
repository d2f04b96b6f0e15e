// The federated hub's reduce: root combines whatever arrived by the deadline, in ascending rank
// order, and says exactly who is in the result. A rank that died or was late is missing, never
// silently partly counted; its late frame is dropped when the operation retires.
#include "collectives.h"
#include "reduce_kernels.h"

namespace tn::dist {

void run_deadline_reduce(OpContext& context, Buffer& buffer, int root, ReduceOp op,
                         Clock::time_point deadline, DeadlineReduceResult& result) {
  const int size = context.size(), rank = context.rank();
  const uint64_t bytes = buffer.nbytes();
  if (rank != root) {
    context.send(root, 0, buffer.data, bytes, buffer.owner);
    context.finish_sends();
    return;
  }
  auto received = scratch(bytes * static_cast<uint64_t>(size));
  std::vector<RequestPtr> receives(size);
  for (int peer = 0; peer < size; ++peer)
    if (peer != rank)
      receives[peer] =
          context.recv(peer, 0, received.get() + bytes * static_cast<uint64_t>(peer), bytes, received);
  std::vector<const void*> sources;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) {
      sources.push_back(buffer.data);
      result.contributors.push_back(peer);
      continue;
    }
    Transport& transport = context.transport();
    if (transport.wait_quietly(*receives[peer], deadline) && receives[peer]->state == Request::State::Done) {
      sources.push_back(received.get() + bytes * static_cast<uint64_t>(peer));
      result.contributors.push_back(peer);
    } else {
      transport.cancel(receives[peer]);
      result.missing.push_back(peer);
    }
  }
  if (auto failure = context.transport().group_failure())
    throw PeerError("deadline_reduce failed: " + *failure);
  reduce_in_order(buffer.dtype, op, buffer.data, sources.data(), static_cast<int>(sources.size()),
                  static_cast<size_t>(buffer.numel));
}

}  // namespace tn::dist
