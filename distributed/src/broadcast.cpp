// Broadcast. Small messages: root sends to each rank directly. Large: a chain
// root -> root+1 -> ... in segments, so every link carries the buffer once and all links
// stream at the same time (with two ranks, the segments still let the receiver take most of
// them straight into its buffer even when it posts its receives after the first arrived).
#include "collectives.h"

namespace tn::dist {

void run_broadcast(OpContext& context, Buffer& buffer, int root) {
  const int size = context.size(), rank = context.rank();
  if (size == 1) return;
  const uint64_t bytes = buffer.nbytes();
  auto* data = static_cast<uint8_t*>(buffer.data);
  if (bytes <= context.options().small_message_bytes) {
    if (rank == root) {
      for (int peer = 0; peer < size; ++peer)
        if (peer != root) context.send(peer, 0, data, bytes, buffer.owner);
      context.finish_sends();
    } else {
      context.wait(context.recv(root, 0, data, bytes, buffer.owner));
    }
    return;
  }
  const int position = (rank - root + size) % size;
  const int previous = (rank - 1 + size) % size, next = (rank + 1) % size;
  // At least eight segments, so the chain's links stream concurrently even for a few MiB.
  const uint64_t segment = std::max<uint64_t>(element_size(buffer.dtype),
                                              std::min<uint64_t>(context.options().segment_bytes, bytes / 8));
  const uint64_t segments = (bytes + segment - 1) / segment;
  std::vector<RequestPtr> parts;
  if (position > 0)
    for (uint64_t s = 0; s < segments; ++s)
      parts.push_back(context.recv(previous, OpContext::slot(0, static_cast<uint32_t>(s)), data + s * segment,
                                   std::min(segment, bytes - s * segment), buffer.owner));
  for (uint64_t s = 0; s < segments; ++s) {
    if (position > 0) context.wait(parts[s]);
    if (position < size - 1)
      context.send(next, OpContext::slot(0, static_cast<uint32_t>(s)), data + s * segment,
                   std::min(segment, bytes - s * segment), buffer.owner);
  }
  context.finish_sends();
}

}  // namespace tn::dist
