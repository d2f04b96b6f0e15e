// Reduce to root. Small messages: every rank sends to root, which reduces in ascending rank
// order. Large: the block owners reduce (as in allreduce) and send their blocks to root only,
// so root receives the buffer's size once instead of once per rank. A star has no links
// between block owners: there every rank streams its buffer to root at root's pace, as
// deadline_reduce does, so root's memory stays bounded however many spokes send.
#include "collectives.h"
#include "reduce_kernels.h"

namespace tn::dist {

void run_reduce(OpContext& context, Buffer& buffer, int root, ReduceOp op) {
  const int size = context.size(), rank = context.rank();
  if (size == 1) return;
  const uint64_t bytes = buffer.nbytes();
  if (bytes > context.options().small_message_bytes) {
    if (context.options().topology == Topology::FullMesh) return reduce_blocks(context, buffer, op, root);
    if (rank != root) {
      send_streamed(context, buffer, root);  // root fails the reduce if this rank's buffer is short
      return;
    }
    receive_streamed(context, buffer, op, context.deadline(), true);
    return;
  }
  if (rank != root) {
    context.send(root, 0, buffer.data, bytes, buffer.owner);
    context.finish_sends();
    return;
  }
  auto copies = context.recv_copies(bytes);
  copies.sources[rank] = buffer.data;
  context.wait_all(copies.receives);
  reduce_in_order(buffer.dtype, op, buffer.data, copies.sources.data(), size,
                  static_cast<size_t>(buffer.numel));
}

}  // namespace tn::dist
