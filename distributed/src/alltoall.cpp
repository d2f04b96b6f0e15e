// All-to-all: inputs[r] goes to rank r, outputs[r] comes from rank r; sizes may differ per
// pair. A size disagreement between the two ends is caught by the receiving side's length check.
#include <cstring>

#include "collectives.h"

namespace tn::dist {

void run_alltoall(OpContext& context, std::vector<Buffer>& inputs, std::vector<Buffer>& outputs) {
  const int size = context.size(), rank = context.rank();
  std::vector<RequestPtr> receives;
  for (int peer = 0; peer < size; ++peer)
    if (peer != rank)
      receives.push_back(
          context.recv(peer, 0, outputs[peer].data, outputs[peer].nbytes(), outputs[peer].owner));
  for (int peer = 0; peer < size; ++peer)
    if (peer != rank) context.send(peer, 0, inputs[peer].data, inputs[peer].nbytes(), inputs[peer].owner);
  context.finish_sends();
  if (inputs[rank].nbytes() != outputs[rank].nbytes())
    throw MismatchError("alltoall: rank " + std::to_string(rank) + " sends itself " +
                        std::to_string(inputs[rank].numel) + " elements but expects " +
                        std::to_string(outputs[rank].numel));
  if (inputs[rank].data != outputs[rank].data && outputs[rank].nbytes() > 0)
    std::memmove(outputs[rank].data, inputs[rank].data, outputs[rank].nbytes());
  for (auto& request : receives) context.wait(request);
}

}  // namespace tn::dist
