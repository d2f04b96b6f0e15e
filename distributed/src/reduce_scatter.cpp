// Reduce-scatter: each rank receives every peer's contribution to its output and reduces them
// in ascending rank order.
#include "collectives.h"
#include "reduce_kernels.h"

namespace tn::dist {

void run_reduce_scatter(OpContext& context, std::vector<Buffer>& inputs, Buffer& output, ReduceOp op) {
  const int size = context.size(), rank = context.rank();
  auto copies = context.recv_copies(output.nbytes());
  for (int peer = 0; peer < size; ++peer)
    if (peer != rank) context.send(peer, 0, inputs[peer].data, output.nbytes(), inputs[peer].owner);
  context.wait_all(copies.receives);
  context.finish_sends();  // the output may overlap the inputs
  copies.sources[rank] = inputs[rank].data;
  reduce_in_order(output.dtype, op, output.data, copies.sources.data(), size,
                  static_cast<size_t>(output.numel));
}

}  // namespace tn::dist
