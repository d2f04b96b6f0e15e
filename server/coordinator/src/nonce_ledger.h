// Used nonces, made durable in batches. A signed request is served only once its nonce is on disk
// (so a replay is refused across a crash), and SQLite syncs the disk once per transaction: with a
// transaction per request, a thousand devices fetching their round at once were a thousand syncs
// in a row behind the state store's one mutex. Here one thread writes the nonces that arrived
// while it wrote the previous batch, one sync for all of them, and answers each request once its
// own nonce is durable. A request waits without holding a thread (record with a callback), so a
// burst of requests is not a burst of threads each waiting for a sync.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "guarded_state.h"

namespace tn::server {

class NonceLedger {
 public:
  // fresh: `key_id` had never used the nonce (it now has); false for a replay. error: what
  // writing the batch threw (fresh is then false).
  using Recorded = std::function<void(bool fresh, std::exception_ptr error)>;

  explicit NonceLedger(GuardedState& state);
  // Answers every request already recorded, then stops.
  ~NonceLedger();
  NonceLedger(const NonceLedger&) = delete;
  NonceLedger& operator=(const NonceLedger&) = delete;

  // `recorded` runs on the ledger's thread once the nonce is durable (or its batch failed); it
  // should be short, since the next batch waits for it, and must not throw. Throws InvalidArgument, without
  // calling `recorded`, for a key id or nonce the store refuses (before it joins a batch, so it cannot fail
  // anyone else's).
  void record(std::string key_id, std::string nonce, int64_t timestamp_ms, Recorded recorded);
  // The same, waiting: true if fresh; rethrows what writing the batch threw.
  bool record(std::string key_id, std::string nonce, int64_t timestamp_ms);
  // Transactions written so far (each one sync), for tests and metrics.
  uint64_t batches_written() const;

 private:
  void write_batches();

  GuardedState& state_;
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::vector<StateStore::NonceUse> uses_;  // the next batch, with the answer each one awaits
  std::vector<Recorded> waiting_;
  bool stopping_ = false;
  std::atomic<uint64_t> batches_written_ = 0;
  std::thread writer_;  // last: it starts once the rest is constructed
};

}  // namespace tn::server
