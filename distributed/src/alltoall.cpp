// All-to-all: inputs[r] goes to rank r, outputs[r] comes from rank r; sizes may differ per
// pair. A size disagreement between the two ends is caught by the receiving side's length check.
#include "collectives.h"

namespace tn::dist {

void run_alltoall(OpContext& context, std::vector<Buffer>& inputs, std::vector<Buffer>& outputs) {
  const int size = context.size(), rank = context.rank();
  std::vector<RequestPtr> receives = context.recv_each(outputs);
  for (int peer = 0; peer < size; ++peer)
    if (peer != rank) context.send(peer, 0, inputs[peer].data, inputs[peer].nbytes(), inputs[peer].owner);
  context.finish_sends();
  if (inputs[rank].nbytes() != outputs[rank].nbytes())
    throw MismatchError("alltoall: rank " + std::to_string(rank) + " sends itself " +
                        std::to_string(inputs[rank].numel) + " elements but expects " +
                        std::to_string(outputs[rank].numel));
  copy_local(inputs[rank], outputs[rank]);
  context.wait_all(receives);
}

}  // namespace tn::dist
