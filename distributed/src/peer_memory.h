// Ranks of one group on the same host copy bulk data straight out of each other's address
// space (Linux cross-memory attach, process_vm_readv): one copy per byte where TCP makes two
// (into the sender's socket, out of the receiver's) plus the kernel's socket work. Only the
// data moves this way; which buffer, when it is ready and when it may be reused still travel
// as frames over the group's TCP connections, so ordering, deadlines and failure handling are
// the transport's.
//
// A group uses it only when every rank can read every other (same kernel, same PID namespace,
// and the kernel allows it: same user and no ptrace restriction against it), decided once at
// rendezvous, so that all ranks pick the same algorithm for each collective.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "distributed/store.h"
#include "transport.h"

namespace tn::dist {

class PeerMemory {
 public:
  // Publishes how to find and probe this process; call before the rank's address is
  // published, so that a peer that can connect to it can also read this.
  PeerMemory(Store& store, int rank, int size);
  // After every peer connected: probes each, shares the verdict through the store and
  // enables reads only if every rank can read every other.
  void decide(Store& store, Clock::time_point deadline);

  bool enabled() const { return enabled_; }
  // Copies `bytes` at `address` in peer's memory into `out`. False when the range is no longer
  // mapped there (the peer let go of its buffer); PeerError naming the peer when its process
  // is gone or the kernel refuses.
  bool read(int peer, uint64_t address, void* out, uint64_t bytes) const;

 private:
  bool probe(const std::string& published, int peer);

  const int rank_;
  const int size_;
  // A random value the peers read back to prove they reach this very process.
  const uint64_t probe_value_;
  std::vector<pid_t> pids_;
  bool enabled_ = false;
};

}  // namespace tn::dist
