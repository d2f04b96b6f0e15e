#include "peer_memory.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

namespace tn::dist {

namespace {

std::string key_of(const char* what, int rank) {
  return std::string("memory/") + what + "/" + std::to_string(rank);
}
std::string as_text(const Bytes& bytes) { return std::string(bytes.begin(), bytes.end()); }
Bytes as_bytes(const std::string& text) { return Bytes(text.begin(), text.end()); }

// The same boot of the same kernel and the same PID namespace: only then does a peer's pid
// name the peer's process here. Empty when it cannot be told.
std::string host_identity() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  if (!(boot >> boot_id)) return {};
  char namespace_link[128] = {};
  const ssize_t length = ::readlink("/proc/self/ns/pid", namespace_link, sizeof namespace_link - 1);
  if (length <= 0) return {};
  return boot_id + "/" + std::string(namespace_link, static_cast<size_t>(length));
}

uint64_t random_value() {
  std::random_device entropy;
  return (uint64_t{entropy()} << 32) | entropy();
}

}  // namespace

PeerMemory::PeerMemory(Store& store, int rank, int size)
    : rank_(rank), size_(size), probe_value_(random_value()), pids_(size, 0) {
  std::ostringstream identity;
  identity << host_identity() << ' ' << ::getpid() << ' ' << reinterpret_cast<uintptr_t>(&probe_value_) << ' '
           << probe_value_;
  store.set(key_of("identity", rank_), as_bytes(identity.str()));
}

bool PeerMemory::probe(const std::string& published, int peer) {
  std::istringstream fields(published);
  std::string identity;
  long long pid = 0;
  uint64_t address = 0, value = 0;
  if (!(fields >> identity >> pid >> address >> value) || identity.empty() || identity != host_identity() ||
      pid <= 0)
    return false;
  uint64_t seen = 0;
  iovec local{&seen, sizeof seen}, remote{reinterpret_cast<void*>(address), sizeof seen};
  if (::process_vm_readv(static_cast<pid_t>(pid), &local, 1, &remote, 1, 0) != sizeof seen || seen != value)
    return false;
  pids_[peer] = static_cast<pid_t>(pid);
  return true;
}

void PeerMemory::decide(Store& store, Clock::time_point deadline) {
  std::string readable(static_cast<size_t>(size_), '1');
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    const std::string key = key_of("identity", peer);
    // A peer that published nothing (built without this) is simply not readable.
    if (!store.check({key}) || !probe(as_text(store.get(key)), peer)) readable[peer] = '0';
  }
  store.set(key_of("readable", rank_), as_bytes(readable));
  bool everyone = true;
  for (int other = 0; other < size_; ++other) {
    const std::string key = key_of("readable", other);
    const auto left = std::chrono::duration_cast<Milliseconds>(deadline - Clock::now());
    store.wait({key}, std::max(left, Milliseconds(1)));
    if (as_text(store.get(key)).find('0') != std::string::npos) everyone = false;
  }
  enabled_ = everyone;
}

bool PeerMemory::read(int peer, uint64_t address, void* out, uint64_t bytes) const {
  auto* into = static_cast<uint8_t*>(out);
  uint64_t done = 0;
  while (done < bytes) {
    iovec local{into + done, bytes - done}, remote{reinterpret_cast<void*>(address + done), bytes - done};
    const ssize_t got = ::process_vm_readv(pids_[peer], &local, 1, &remote, 1, 0);
    if (got > 0) {
      done += static_cast<uint64_t>(got);
      continue;
    }
    const int error = got < 0 ? errno : EFAULT;
    if (error == EINTR) continue;
    if (error == EFAULT) return false;
    throw PeerError("rank " + std::to_string(peer) + " " +
                    (error == ESRCH ? std::string("exited while its memory was being read")
                                    : "could not be read (" + std::string(std::strerror(error)) + ")"));
  }
  return true;
}

}  // namespace tn::dist
