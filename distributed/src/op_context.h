// What one collective sees while it runs: its rank, the group size, its sequence number and
// signature, a deadline, and send/receive primitives bound to those. The algorithms in this
// folder are written against this and know nothing of sockets.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distributed/process_group.h"
#include "scratch.h"
#include "transport.h"

namespace tn::dist {

class OpContext {
 public:
  OpContext(Transport& transport, int rank, int size, uint64_t sequence, Signature signature,
            const ProcessGroupOptions& options, Milliseconds timeout)
      : transport_(transport),
        rank_(rank),
        size_(size),
        sequence_(sequence),
        signature_(signature),
        options_(options),
        timeout_(timeout),
        deadline_(Clock::now() + timeout),
        name_(collective_name(signature.collective)) {}
  OpContext(const OpContext&) = delete;
  OpContext& operator=(const OpContext&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const Signature& signature() const { return signature_; }
  const ProcessGroupOptions& options() const { return options_; }
  // This operation's own timeout (the group's unless the call gave one) and the deadline it sets.
  Milliseconds timeout() const { return timeout_; }
  Clock::time_point deadline() const { return deadline_; }
  Transport& transport() { return transport_; }
  uint64_t sequence() const { return sequence_; }

  // Frames of one operation between two ranks are told apart by slot: phase and segment.
  static uint32_t slot(uint32_t phase, uint32_t segment) { return (phase << 24) | segment; }

  RequestPtr recv(int source, uint32_t slot, void* data, uint64_t bytes, std::shared_ptr<const void> owner,
                  std::function<void(const Request&)> on_finish = {});
  void send(int dest, uint32_t slot, const void* data, uint64_t bytes, std::shared_ptr<const void> owner);
  // A send the caller waits for itself, which finish_sends leaves alone: for a root that carries
  // on when a peer is lost.
  RequestPtr send_request(int dest, uint32_t slot, const void* data, uint64_t bytes,
                          std::shared_ptr<const void> owner);
  // Sends one value in a frame that owns its memory, and forgets it: nothing waits for it (a
  // peer lost meanwhile shows in this operation's receives from it), so an operation may send
  // any number of them without keeping a request for each.
  void tell(int dest, uint32_t slot, uint64_t value);
  // Waits for the value `source` told in `slot`.
  uint64_t hear(int source, uint32_t slot);
  // Tells every peer `value`, then hears each one's value in the same slot (by rank).
  std::vector<uint64_t> exchange(uint32_t slot, uint64_t value);
  // Whether every rank of the group reads the others' memory directly (peer_memory.h).
  bool reads_peer_memory() const { return transport_.peer_memory() != nullptr; }
  // Copies `bytes` at `address` in peer's memory (reads_peer_memory() only).
  void read_peer(int peer, uint64_t address, void* out, uint64_t bytes);
  void wait(const RequestPtr& request);
  void wait_all(const std::vector<RequestPtr>& requests);

  // Receives from every peer straight into buffers[peer] (one buffer per rank).
  std::vector<RequestPtr> recv_each(std::vector<Buffer>& buffers);
  // Receives every peer's `bytes` into one scratch block; sources[peer] points at that copy,
  // sources[rank] is left for the caller to fill.
  struct PeerCopies {
    std::shared_ptr<uint8_t[]> memory;
    std::vector<RequestPtr> receives;
    std::vector<const void*> sources;
  };
  PeerCopies recv_copies(uint64_t bytes);
  // Waits for every send this operation queued: the caller's memory is free again after this.
  void finish_sends();

 private:
  Transport& transport_;
  const int rank_;
  const int size_;
  const uint64_t sequence_;
  const Signature signature_;
  const ProcessGroupOptions& options_;
  const Milliseconds timeout_;
  const Clock::time_point deadline_;
  const std::string name_;
  std::vector<RequestPtr> sends_;
};

// Splits `count` elements into `parts` contiguous ranges as evenly as possible.
struct Range {
  size_t begin;
  size_t count;
};
Range block_of(size_t count, int parts, int index);

// This rank's own part of a gather-like operation: a copy unless both are the same memory.
void copy_local(const Buffer& from, Buffer& to);

}  // namespace tn::dist
