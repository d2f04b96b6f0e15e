// Barrier: an empty frame to and from every peer. No rank leaves before every rank has entered.
#include "collectives.h"

namespace tn::dist {

void run_barrier(OpContext& context) {
  const int size = context.size(), rank = context.rank();
  std::vector<RequestPtr> receives;
  for (int peer = 0; peer < size; ++peer)
    if (peer != rank) receives.push_back(context.recv(peer, 0, nullptr, 0, nullptr));
  for (int peer = 0; peer < size; ++peer)
    if (peer != rank) context.send(peer, 0, nullptr, 0, nullptr);
  for (auto& request : receives) context.wait(request);
  context.finish_sends();
}

}  // namespace tn::dist
