// ProcessGroupLocal: collectives among the ranks of a group over Asio TCP.
//
// Every operation is asynchronous and returns a Work. Operations run one at a time, in call
// order, on the group's worker thread; sockets are served by its I/O thread, which always keeps
// reading, so a rank that sends never blocks on a peer that is also sending.
//
// Reductions are deterministic: each element is combined in ascending rank order
// (((x0 op x1) op x2) ...) by exactly one rank, and every rank receives those bits.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/scalar_type.h"
#include "distributed/errors.h"
#include "distributed/store.h"

namespace tn::dist {

enum class ReduceOp : uint8_t { Sum, Product, Min, Max, Band, Bor, Bxor, Avg };
const char* reduce_op_name(ReduceOp op);

// A contiguous typed buffer. `owner` keeps the memory alive until the operation that uses it
// has finished, even if the caller lets go of everything else.
struct Buffer {
  void* data = nullptr;
  ScalarType dtype = ScalarType::Float;
  int64_t numel = 0;
  std::shared_ptr<const void> owner;
  size_t nbytes() const;
};

class Work {
 public:
  virtual ~Work() = default;
  bool is_completed() const;
  // Waits for completion and rethrows the operation's error, if any. With a timeout, returns
  // false when it expires first (the operation itself keeps its own deadline).
  bool wait(std::optional<Milliseconds> timeout = std::nullopt);
  std::exception_ptr exception() const;  // null while pending or after success
  // The rank a recv-from-any-source received from (-1 until it completes).
  int source_rank() const;
  // Runs `callback` once the work has finished: at once, on this thread, if it has; otherwise on
  // the thread that finishes it (the group's worker or I/O thread, or a waiter). It must be
  // quick and must not wait for anything (the I/O thread serves every connection).
  void on_finished(std::function<void()> callback);
  const std::string& operation() const { return operation_; }

 protected:
  explicit Work(std::string operation) : operation_(std::move(operation)) {}

 private:
  friend class ProcessGroup;
  struct State;
  std::string operation_;
  std::shared_ptr<State> state_;
};

// How the ranks are connected. FullMesh: every rank to every other, so every collective works.
// Star: every other rank (a spoke) connects to the hub only, which is what a coordinator with
// many devices needs (one connection per device, no device-to-device traffic); only
// operations that route through the hub are allowed.
enum class Topology : uint8_t { FullMesh, Star };

struct ProcessGroupOptions {
  // Every operation fails with TimeoutError naming the missing rank after this long.
  Milliseconds timeout = std::chrono::minutes(30);
  // Address this rank listens on for its peers (published through the store).
  std::string host = "127.0.0.1";
  // Messages at most this large use the one-step algorithms (latency); larger ones are split
  // in blocks and pipelined in segments (bandwidth).
  size_t small_message_bytes = 64 * 1024;
  size_t segment_bytes = 1 << 20;
  Topology topology = Topology::FullMesh;
  // Ranks on the same host copy large buffers straight from each other's memory (Linux
  // process_vm_readv) instead of through TCP, when every rank of the group can read every
  // other; otherwise, or when false, all data goes over TCP. ProcessGroup::reads_peer_memory
  // says which was chosen.
  bool same_host_memory = true;
  // Star only: the rank every other rank connects to. Broadcast, reduce, deadline_reduce,
  // gather and scatter must be rooted there, send/recv must have it at one end, and barrier
  // goes through it; everything else is refused by name.
  int hub = 0;
  // When root's copies of the other ranks' buffers in deadline_reduce (and in a star group's
  // large reduce) would take more memory than this, root writes each arriving contribution to
  // an unlinked file in deadline_reduce_spool_directory ($TMPDIR or /tmp when empty; it should
  // be on disk, not tmpfs) instead, holding at most this much (at least one segment) of
  // arriving segments in memory at a time.
  uint64_t deadline_reduce_spool_bytes = uint64_t{256} << 20;
  std::string deadline_reduce_spool_directory;
};

// What root keeps of a deadline reduce it did not fold into a buffer (deadline_reduce_deferred):
// the contributions as they landed, in its memory or its spool file, folded a range at a time on
// demand. For a root that should never hold the whole result (the federated hub's float64 sum
// is twice a float32 model of gigabytes): it consumes the reduction piece by piece instead.
class DeferredReduction {
 public:
  virtual ~DeferredReduction() = default;
  // out (count elements of the reduce's dtype) = elements [first, first + count) reduced over
  // the contributing ranks in ascending rank order, with the bits deadline_reduce gives.
  virtual void fold(uint64_t first, uint64_t count, void* out) = 0;
  // out (count elements of the reduce's dtype) = elements [first, first + count) of `rank`'s
  // contribution exactly as it landed, for a root that needs each contribution apart (the
  // federated hub's median, trimmed mean and Krum) without holding them all whole. Refuses
  // (InvalidArgument) a rank that did not contribute and a range beyond the buffer.
  virtual void read(int rank, uint64_t first, uint64_t count, void* out) = 0;
};

// Which ranks a deadline reduce combined, in ascending order, which it gave up on, and which
// it refused (their contribution arrived but failed root's check).
struct DeadlineReduceResult {
  std::vector<int> contributors;
  std::vector<int> missing;
  std::vector<std::pair<int, std::string>> refused;  // rank, why
  // Bytes root wrote to its spool file (0 when the contributions fitted in memory).
  uint64_t spooled_bytes = 0;
  // Root's time folding the contributions together once the round closed: the reduction
  // proper, apart from waiting for and receiving them (0 when the fold was deferred).
  double fold_seconds = 0;
  // Root of deadline_reduce_deferred: the contributions, to fold on demand.
  std::shared_ptr<DeferredReduction> deferred;
};

// Root's check of another rank's contribution to a deadline reduce, called for each segment as
// it lands (in order, `offset` in bytes from the buffer's start): the reason to refuse the whole
// contribution, or nothing. A refused rank is left out of the result like a missing one, but
// listed with its reason; the federated hub uses it to keep a NaN or a forged example count
// out of the sum, naming the device.
using ContributionCheck =
    std::function<std::optional<std::string>(int rank, uint64_t offset, const void* data, uint64_t bytes)>;

class ProcessGroup {
 public:
  // Rendezvous through `store`: every rank publishes its address, connects to the others and
  // waits until the full mesh is up (or the timeout passes, naming the ranks that never came).
  // In a star, a spoke is ready once connected to the hub, the hub once every spoke connected.
  ProcessGroup(std::shared_ptr<Store> store, int rank, int size, ProcessGroupOptions options = {});
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const;
  int size() const;
  const ProcessGroupOptions& options() const;
  // Whether large collectives copy straight from the peers' memory (options.same_host_memory).
  bool reads_peer_memory() const;
  // Closes the connection to `rank` as if it had failed, for a caller that learned by other
  // means that the rank is gone while its connection stayed open (the federated hub: a device
  // whose heartbeats stopped). Whatever involves it fails, naming it with `reason`, and a
  // deadline reduce still waiting for it leaves it out as missing (a contribution that landed
  // whole stays in). In a full mesh that fails the group, as any lost peer does. False when the
  // connection was lost already (a rank that finished and exited): nothing to do.
  bool disconnect(int rank, const std::string& reason);

  // Every operation below takes an optional timeout of its own; without one, options().timeout
  // applies (c10d's per-call option timeouts).
  using Timeout = std::optional<Milliseconds>;

  std::shared_ptr<Work> allreduce(Buffer buffer, ReduceOp op, Timeout timeout = {});
  std::shared_ptr<Work> broadcast(Buffer buffer, int root, Timeout timeout = {});
  // A star hub's broadcast to whichever spokes remain: one whose connection is lost before or
  // while its part goes out is listed in `lost` (ascending) instead of failing the operation,
  // so that a federated round goes on without a device that died while the model went out. The
  // spokes call broadcast(buffer, hub). Star hub only.
  std::shared_ptr<Work> broadcast_to_reachable(Buffer buffer, std::shared_ptr<std::vector<int>> lost,
                                               Timeout timeout = {});
  // Only root's buffer receives the result; the others' buffers are left as they were.
  std::shared_ptr<Work> reduce(Buffer buffer, int root, ReduceOp op, Timeout timeout = {});
  // outputs[r] receives rank r's input (one buffer per rank, each input's size).
  std::shared_ptr<Work> allgather(Buffer input, std::vector<Buffer> outputs, Timeout timeout = {});
  // outputs is used on root only (one per rank); others pass an empty vector.
  std::shared_ptr<Work> gather(Buffer input, std::vector<Buffer> outputs, int root, Timeout timeout = {});
  // inputs is used on root only (one per rank).
  std::shared_ptr<Work> scatter(std::vector<Buffer> inputs, Buffer output, int root, Timeout timeout = {});
  // inputs[r] is this rank's contribution to rank r's output.
  std::shared_ptr<Work> reduce_scatter(std::vector<Buffer> inputs, Buffer output, ReduceOp op,
                                       Timeout timeout = {});
  // inputs[r] goes to rank r; outputs[r] comes from rank r. Sizes may differ per rank, but what
  // rank a sends rank b must be what rank b expects from rank a.
  std::shared_ptr<Work> alltoall(std::vector<Buffer> inputs, std::vector<Buffer> outputs,
                                 Timeout timeout = {});
  std::shared_ptr<Work> barrier(Timeout timeout = {});
  std::shared_ptr<Work> send(Buffer buffer, int dst, int64_t tag, Timeout timeout = {});
  // src -1 receives from whichever rank sends with this tag first.
  std::shared_ptr<Work> recv(Buffer buffer, int src, int64_t tag, Timeout timeout = {});

  // The federated hub's reduce: root sums what arrives from the other ranks before `deadline`
  // (plus its own buffer) and records exactly who contributed; late contributions are
  // discarded by sequence number, never added to a later round. Non-root ranks stream their
  // buffer in segments as fast as root takes them and complete once it is written, or once
  // root has closed the round without them; their result lists themselves as a contributor in
  // the first case (root may still have refused it) and as missing in the second.
  std::shared_ptr<Work> deadline_reduce(Buffer buffer, int root, ReduceOp op, Milliseconds deadline,
                                        std::shared_ptr<DeadlineReduceResult> result,
                                        ContributionCheck check = {});
  // Root's side of a deadline_reduce of `numel` elements of `dtype` (the other ranks call
  // deadline_reduce as usual) that keeps the contributions instead of folding them into a
  // buffer: root contributes nothing of its own and folds what it needs, when it needs it, from
  // result->deferred. Root still appears among result->contributors.
  std::shared_ptr<Work> deadline_reduce_deferred(ScalarType dtype, int64_t numel, int root, ReduceOp op,
                                                 Milliseconds deadline,
                                                 std::shared_ptr<DeadlineReduceResult> result,
                                                 ContributionCheck check = {});

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Raises this process's soft limit on open files to its hard limit and returns the limit now in
// force. A star hub holds a connection per spoke, and its store master one per rank while they
// rendezvous; a process running many ranks holds a few descriptors per rank. A thousand ranks
// outgrow the customary soft limit of 1024 long before the hard limit.
uint64_t raise_open_files_limit();

}  // namespace tn::dist
