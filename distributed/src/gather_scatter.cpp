// Allgather, gather and scatter: every piece goes straight from its owner to the rank that
// needs it, which is already the minimum each rank must receive. A large allgather of a group
// on one host copies each piece out of its owner's memory instead (peer_memory.h): one copy
// per byte where TCP makes two.
#include "collectives.h"

namespace tn::dist {

namespace {

void allgather_from_peer_memory(OpContext& context, Buffer& input, std::vector<Buffer>& outputs) {
  enum : uint32_t { kAnnounce = 1, kReleased };
  const int size = context.size(), rank = context.rank();
  const std::vector<uint64_t> addresses =
      context.exchange(OpContext::slot(kAnnounce, 0), reinterpret_cast<uintptr_t>(input.data));
  for (int peer = 0; peer < size; ++peer)
    if (peer != rank) context.read_peer(peer, addresses[peer], outputs[peer].data, outputs[peer].nbytes());
  // The peers may still be reading my input (which may be a slice of the outputs): it is the
  // caller's again once none is.
  context.exchange(OpContext::slot(kReleased, 0), 1);
  copy_local(input, outputs[rank]);
}

}  // namespace

void run_allgather(OpContext& context, Buffer& input, std::vector<Buffer>& outputs) {
  if (input.nbytes() > context.options().small_message_bytes && context.reads_peer_memory())
    return allgather_from_peer_memory(context, input, outputs);
  const int size = context.size(), rank = context.rank();
  std::vector<RequestPtr> receives = context.recv_each(outputs);
  for (int peer = 0; peer < size; ++peer)
    if (peer != rank) context.send(peer, 0, input.data, input.nbytes(), input.owner);
  context.finish_sends();  // the input may be a slice of the outputs
  copy_local(input, outputs[rank]);
  context.wait_all(receives);
}

void run_gather(OpContext& context, Buffer& input, std::vector<Buffer>& outputs, int root) {
  const int rank = context.rank();
  if (rank != root) {
    context.send(root, 0, input.data, input.nbytes(), input.owner);
    context.finish_sends();
    return;
  }
  std::vector<RequestPtr> receives = context.recv_each(outputs);
  copy_local(input, outputs[rank]);
  context.wait_all(receives);
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
  copy_local(inputs[rank], output);
}

}  // namespace tn::dist
