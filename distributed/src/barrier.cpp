// Barrier: an empty frame to and from every peer. No rank leaves before every rank has entered.
// A star's spokes only reach the hub: each tells the hub it has entered, and the hub lets them
// all go once every one has.
#include "collectives.h"

namespace tn::dist {

namespace {

void star_barrier(OpContext& context) {
  const int size = context.size(), rank = context.rank(), hub = context.options().hub;
  const uint32_t entered = OpContext::slot(0, 0), released = OpContext::slot(1, 0);
  if (rank != hub) {
    context.send(hub, entered, nullptr, 0, nullptr);
    context.wait(context.recv(hub, released, nullptr, 0, nullptr));
    return;
  }
  std::vector<RequestPtr> arrivals;
  for (int peer = 0; peer < size; ++peer)
    if (peer != hub) arrivals.push_back(context.recv(peer, entered, nullptr, 0, nullptr));
  context.wait_all(arrivals);
  for (int peer = 0; peer < size; ++peer)
    if (peer != hub) context.send(peer, released, nullptr, 0, nullptr);
}

}  // namespace

void run_barrier(OpContext& context) {
  if (context.options().topology == Topology::Star) return star_barrier(context);
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
