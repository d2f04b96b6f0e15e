// Broadcast. While root's total (one copy per peer) is small, root sends to every rank
// directly; beyond that, a chain root -> root+1 -> ... so every link carries the buffer once
// and all links stream at the same time. Past the one-step size, the buffer moves in at least
// eight segments: a receiver that posts its receives after the first segments arrived still
// takes the rest straight into its buffer, and chain links overlap. A star has no links between
// spokes, so its hub always sends to every spoke itself (and, for the federated hub, may carry on
// past spokes lost on the way: run_broadcast_to_reachable). In a group on one host, a buffer past
// the one-step size is copied by every rank straight from root's memory (peer_memory.h).
#include "collectives.h"

namespace tn::dist {

namespace {
constexpr uint64_t kDirectTotalBytes = 4 << 20;
// Root queues every segment for every peer at once, a request each: with a thousand spokes and a
// model of gigabytes, segments of segment_bytes would make millions of them.
constexpr uint64_t kMaxStarSegments = 64;

void broadcast_from_peer_memory(OpContext& context, Buffer& buffer, int root) {
  enum : uint32_t { kAnnounce = 1, kCopied };
  if (context.rank() == root) {
    for (int peer = 0; peer < context.size(); ++peer)
      if (peer != root)
        context.tell(peer, OpContext::slot(kAnnounce, 0), reinterpret_cast<uintptr_t>(buffer.data));
    // Root's buffer is the caller's again once every peer has its copy.
    for (int peer = 0; peer < context.size(); ++peer)
      if (peer != root) context.hear(peer, OpContext::slot(kCopied, 0));
    return;
  }
  context.read_peer(root, context.hear(root, OpContext::slot(kAnnounce, 0)), buffer.data, buffer.nbytes());
  context.tell(root, OpContext::slot(kCopied, 0), 1);
}

// How the buffer is cut: every rank of the broadcast cuts it the same way.
struct Segments {
  uint64_t bytes, segment, count;
  Segments(const OpContext& context, const Buffer& buffer) : bytes(buffer.nbytes()) {
    const ProcessGroupOptions& options = context.options();
    segment = bytes <= options.small_message_bytes
                  ? std::max<uint64_t>(bytes, 1)
                  : std::max<uint64_t>(element_size(buffer.dtype),
                                       std::min<uint64_t>(options.segment_bytes, bytes / 8));
    if (options.topology == Topology::Star)
      segment = std::max(segment, (bytes + kMaxStarSegments - 1) / kMaxStarSegments);
    count = std::max<uint64_t>(1, (bytes + segment - 1) / segment);
  }
  uint64_t part(uint64_t s) const { return std::min(segment, bytes - std::min(bytes, s * segment)); }
  static uint32_t slot(uint64_t s) { return OpContext::slot(0, static_cast<uint32_t>(s)); }
};

}  // namespace

std::vector<int> run_broadcast_to_reachable(OpContext& context, Buffer& buffer) {
  const int size = context.size(), root = context.rank();
  const Segments segments(context, buffer);
  auto* data = static_cast<uint8_t*>(buffer.data);
  std::vector<std::vector<RequestPtr>> sends(size);
  for (uint64_t s = 0; s < segments.count; ++s)
    for (int peer = 0; peer < size; ++peer)
      if (peer != root)
        sends[peer].push_back(context.send_request(peer, Segments::slot(s), data + s * segments.segment,
                                                   segments.part(s), buffer.owner));
  std::vector<int> lost;
  for (int peer = 0; peer < size; ++peer) {
    try {
      for (const auto& request : sends[peer]) context.wait(request);
    } catch (const PeerError&) {
      if (!context.transport().peer_failure(peer)) throw;  // the group's failure, not the spoke's
      lost.push_back(peer);
    }
  }
  return lost;
}

void run_broadcast(OpContext& context, Buffer& buffer, int root) {
  const int size = context.size(), rank = context.rank();
  if (size == 1) return;
  const uint64_t bytes = buffer.nbytes();
  if (context.reads_peer_memory() && bytes > context.options().small_message_bytes)
    return broadcast_from_peer_memory(context, buffer, root);
  auto* data = static_cast<uint8_t*>(buffer.data);
  const bool star = context.options().topology == Topology::Star;
  const Segments cut(context, buffer);
  const uint64_t segment = cut.segment, segments = cut.count;
  auto part = [&](uint64_t s) { return cut.part(s); };
  auto slot = [](uint64_t s) { return Segments::slot(s); };

  const bool direct = star || bytes * static_cast<uint64_t>(size - 1) <= kDirectTotalBytes ||
                      bytes <= context.options().small_message_bytes;
  const int position = (rank - root + size) % size;
  const int from = direct ? root : (rank - 1 + size) % size;
  std::vector<RequestPtr> parts;
  if (position > 0)
    for (uint64_t s = 0; s < segments; ++s)
      parts.push_back(context.recv(from, slot(s), data + s * segment, part(s), buffer.owner));
  for (uint64_t s = 0; s < segments; ++s) {
    if (position > 0) context.wait(parts[s]);
    if (direct && position == 0) {
      for (int peer = 0; peer < size; ++peer)
        if (peer != root) context.send(peer, slot(s), data + s * segment, part(s), buffer.owner);
    } else if (!direct && position < size - 1) {
      context.send((rank + 1) % size, slot(s), data + s * segment, part(s), buffer.owner);
    }
  }
  context.finish_sends();
}

}  // namespace tn::dist
