// Allreduce. Small messages: every rank sends its whole buffer to every other and reduces all
// of them locally (one step, the latency optimum). Large: the buffer is cut into one block per
// rank; each rank receives every peer's copy of its block, reduces it in ascending rank order
// and sends the result to every peer (reduce-scatter + allgather, each rank moving 2(P-1)/P of
// the buffer), pipelined in segments so reduction overlaps transfer. A large allreduce of a
// group on one host does the same with reads of the peers' memory (peer_memory.h) in place of
// the transfers.
#include "collectives.h"
#include "reduce_kernels.h"

namespace tn::dist {

namespace {

// Peers' copies are read a chunk at a time into scratch that stays in cache while the chunk is
// reduced, instead of the whole block being copied out and read back from memory.
constexpr uint64_t kPeerChunkBytes = 256 << 10;

// Each rank reduces its own block in place, reading the peers' copies of it, then copies every
// other block, reduced, from its owner. The blocks and the order of reduction are those of
// reduce_blocks, so the bits are the same as over TCP.
void allreduce_from_peer_memory(OpContext& context, Buffer& buffer, ReduceOp op) {
  enum : uint32_t { kAnnounce = 1, kReduced, kReleased };
  const int size = context.size(), rank = context.rank();
  const size_t element = element_size(buffer.dtype), count = static_cast<size_t>(buffer.numel);
  auto* data = static_cast<uint8_t*>(buffer.data);
  const std::vector<uint64_t> addresses =
      context.exchange(OpContext::slot(kAnnounce, 0), reinterpret_cast<uintptr_t>(data));

  const Range mine = block_of(count, size, rank);
  const size_t chunk = std::max<size_t>(1, kPeerChunkBytes / element);
  auto copies = scratch(chunk * element * static_cast<uint64_t>(size - 1));
  std::vector<const void*> sources(size);
  for (size_t first = mine.begin; first < mine.begin + mine.count; first += chunk) {
    const size_t n = std::min(chunk, mine.begin + mine.count - first);
    const uint64_t offset = first * element;
    for (int peer = 0, index = 0; peer < size; ++peer) {
      if (peer == rank) {
        sources[peer] = data + offset;
        continue;
      }
      uint8_t* copy = copies.get() + chunk * element * static_cast<uint64_t>(index++);
      context.read_peer(peer, addresses[peer] + offset, copy, n * element);
      sources[peer] = copy;
    }
    reduce_in_order(buffer.dtype, op, data + offset, sources.data(), size, n);
  }
  // Telling a peer my block is reduced also tells it I no longer read its copy of my block;
  // only then may it overwrite that with my result. Its own block in my buffer is overwritten
  // here only after it said the same.
  for (int peer = 0; peer < size; ++peer)
    if (peer != rank) context.tell(peer, OpContext::slot(kReduced, 0), 1);
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    context.hear(peer, OpContext::slot(kReduced, 0));
    const Range block = block_of(count, size, peer);
    if (block.count > 0)
      context.read_peer(peer, addresses[peer] + block.begin * element, data + block.begin * element,
                        block.count * element);
  }
  // The peers may still be reading my block: the buffer is the caller's again once none is.
  context.exchange(OpContext::slot(kReleased, 0), 1);
}

void allreduce_one_step(OpContext& context, Buffer& buffer, ReduceOp op) {
  const int size = context.size(), rank = context.rank();
  const uint64_t bytes = buffer.nbytes();
  auto copies = context.recv_copies(bytes);
  copies.sources[rank] = buffer.data;
  for (int peer = 0; peer < size; ++peer)
    if (peer != rank) context.send(peer, 0, buffer.data, bytes, buffer.owner);
  context.wait_all(copies.receives);
  context.finish_sends();  // the buffer is overwritten next
  reduce_in_order(buffer.dtype, op, buffer.data, copies.sources.data(), size,
                  static_cast<size_t>(buffer.numel));
}

}  // namespace

void run_allreduce(OpContext& context, Buffer& buffer, ReduceOp op) {
  if (context.size() == 1) return;  // a single rank's sum, product, min, max or average is itself
  if (buffer.nbytes() <= context.options().small_message_bytes)
    allreduce_one_step(context, buffer, op);
  else if (context.reads_peer_memory())
    allreduce_from_peer_memory(context, buffer, op);
  else
    reduce_blocks(context, buffer, op, -1);
}

// Reduce-scatter by block owners, then every reduced segment goes to every rank (root -1,
// allreduce) or to root only (reduce; non-root buffers keep their contents).
void reduce_blocks(OpContext& context, Buffer& buffer, ReduceOp op, int root) {
  const int size = context.size(), rank = context.rank();
  const size_t element = element_size(buffer.dtype), count = static_cast<size_t>(buffer.numel);
  auto* data = static_cast<uint8_t*>(buffer.data);
  const size_t segment = std::max<size_t>(1, context.options().segment_bytes / element);
  auto segments_of = [&](const Range& block) { return (block.count + segment - 1) / segment; };
  auto segment_range = [&](const Range& block, size_t s) {
    const size_t begin = block.begin + s * segment;
    return Range{begin, std::min(segment, block.begin + block.count - begin)};
  };

  const Range mine = block_of(count, size, rank);
  const uint64_t mine_bytes = mine.count * element;
  auto received = scratch(mine_bytes * static_cast<uint64_t>(size - 1));
  const bool keep_input = root >= 0 && rank != root;
  auto reduced = keep_input ? scratch(mine_bytes) : nullptr;
  uint8_t* reduced_at = keep_input ? reduced.get() : data + mine.begin * element;
  auto peer_copy = [&](int peer) {
    return received.get() + mine_bytes * static_cast<uint64_t>(peer < rank ? peer : peer - 1);
  };

  // Phase 1: peers' copies of my block.
  std::vector<std::vector<RequestPtr>> copies(size);
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    for (size_t s = 0; s < segments_of(mine); ++s) {
      const Range part = segment_range(mine, s);
      copies[peer].push_back(context.recv(peer, OpContext::slot(1, s),
                                          peer_copy(peer) + (part.begin - mine.begin) * element,
                                          part.count * element, received));
    }
  }
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const Range block = block_of(count, size, peer);
    for (size_t s = 0; s < segments_of(block); ++s) {
      const Range part = segment_range(block, s);
      context.send(peer, OpContext::slot(1, s), data + part.begin * element, part.count * element,
                   buffer.owner);
    }
  }
  // Phase 2 receives: the reduced blocks of the others, straight into the buffer. A peer can
  // only send segment s of its block after it has all of my copy of it, so my phase-1 send
  // of those bytes has left this buffer before they are overwritten.
  std::vector<RequestPtr> results;
  if (root < 0 || rank == root) {
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      const Range block = block_of(count, size, peer);
      for (size_t s = 0; s < segments_of(block); ++s) {
        const Range part = segment_range(block, s);
        results.push_back(context.recv(peer, OpContext::slot(2, s), data + part.begin * element,
                                       part.count * element, buffer.owner));
      }
    }
  }
  std::vector<const void*> sources(size);
  for (size_t s = 0; s < segments_of(mine); ++s) {
    const Range part = segment_range(mine, s);
    const size_t offset = (part.begin - mine.begin) * element;
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) {
        sources[peer] = data + part.begin * element;
      } else {
        context.wait(copies[peer][s]);
        sources[peer] = peer_copy(peer) + offset;
      }
    }
    reduce_in_order(buffer.dtype, op, reduced_at + offset, sources.data(), size, part.count);
    const std::shared_ptr<const void> owner =
        keep_input ? std::shared_ptr<const void>(reduced) : buffer.owner;
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank || (root >= 0 && peer != root)) continue;
      context.send(peer, OpContext::slot(2, s), reduced_at + offset, part.count * element, owner);
    }
  }
  for (auto& request : results) context.wait(request);
  context.finish_sends();
}

}  // namespace tn::dist
