// Reduce-scatter: each rank receives every peer's contribution to its output and reduces them
// in ascending rank order.
#include "collectives.h"
#include "reduce_kernels.h"

namespace tn::dist {

void run_reduce_scatter(OpContext& context, std::vector<Buffer>& inputs, Buffer& output, ReduceOp op) {
  const int size = context.size(), rank = context.rank();
  const uint64_t bytes = output.nbytes();
  auto received = scratch(bytes * static_cast<uint64_t>(size));
  std::vector<RequestPtr> receives;
  std::vector<const void*> sources(size);
  for (int peer = 0, index = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    uint8_t* slot = received.get() + bytes * static_cast<uint64_t>(index++);
    receives.push_back(context.recv(peer, 0, slot, bytes, received));
    sources[peer] = slot;
  }
  for (int peer = 0; peer < size; ++peer)
    if (peer != rank) context.send(peer, 0, inputs[peer].data, bytes, inputs[peer].owner);
  for (auto& request : receives) context.wait(request);
  context.finish_sends();  // the output may overlap the inputs
  sources[rank] = inputs[rank].data;
  reduce_in_order(output.dtype, op, output.data, sources.data(), size, static_cast<size_t>(output.numel));
}

}  // namespace tn::dist
