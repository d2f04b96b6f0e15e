// Allgather, gather and scatter: every piece goes straight from its owner to the rank that
// needs it, which is already the minimum each rank must receive.
#include <cstring>

#include "collectives.h"

namespace tn::dist {

namespace {

void copy_own(const Buffer& from, Buffer& to) {
  if (from.data != to.data && from.nbytes() > 0) std::memmove(to.data, from.data, from.nbytes());
}

}  // namespace

void run_allgather(OpContext& context, Buffer& input, std::vector<Buffer>& outputs) {
  const int size = context.size(), rank = context.rank();
  std::vector<RequestPtr> receives;
  for (int peer = 0; peer < size; ++peer)
    if (peer != rank)
      receives.push_back(
          context.recv(peer, 0, outputs[peer].data, outputs[peer].nbytes(), outputs[peer].owner));
  for (int peer = 0; peer < size; ++peer)
    if (peer != rank) context.send(peer, 0, input.data, input.nbytes(), input.owner);
  context.finish_sends();  // the input may be a slice of the outputs
  copy_own(input, outputs[rank]);
  for (auto& request : receives) context.wait(request);
}

void run_gather(OpContext& context, Buffer& input, std::vector<Buffer>& outputs, int root) {
  const int size = context.size(), rank = context.rank();
  if (rank != root) {
    context.send(root, 0, input.data, input.nbytes(), input.owner);
    context.finish_sends();
    return;
  }
  std::vector<RequestPtr> receives;
  for (int peer = 0; peer < size; ++peer)
    if (peer != rank)
      receives.push_back(
          context.recv(peer, 0, outputs[peer].data, outputs[peer].nbytes(), outputs[peer].owner));
  copy_own(input, outputs[rank]);
  for (auto& request : receives) context.wait(request);
}

void run_scatter(OpContext& context, std::vector<Buffer>& inputs, Buffer& output, int root) {
  const int size = context.size(), rank = context.rank();
  if (rank != root) {
    context.wait(context.recv(root, 0, output.data, output.nbytes(), output.owner));
    return;
  }
  for (int peer = 0; peer < size; ++peer)
    if (peer != rank) context.send(peer, 0, inputs[peer].data, inputs[peer].nbytes(), inputs[peer].owner);
  context.finish_sends();
  copy_own(inputs[rank], output);
}

}  // namespace tn::dist
