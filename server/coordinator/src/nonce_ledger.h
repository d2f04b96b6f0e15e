// Used nonces, made durable in batches. A signed request is served only once its nonce is on disk
// (so a replay is refused across a crash), and SQLite syncs the disk once per transaction: with a
// transaction per request, a thousand devices fetching their round at once were a thousand syncs
// in a row behind the state store's one mutex. Here the requests that arrive while a batch is
// being written wait together and go in the next one, one sync for all of them; each still
// returns only once its own nonce is durable.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "guarded_state.h"

namespace tn::server {

class NonceLedger {
 public:
  explicit NonceLedger(GuardedState& state) : state_(state) {}

  // True if `key_id` had never used `nonce` (it now has); false for a replay. Returns once the
  // nonce is durable. Throws InvalidArgument for a key id or nonce the store refuses (before it
  // joins a batch, so it cannot fail anyone else's), and whatever writing the batch threw.
  bool record(std::string key_id, std::string nonce, int64_t timestamp_ms);
  // Transactions written so far (each one sync), for tests and metrics.
  uint64_t batches_written() const;

 private:
  struct Batch {
    std::vector<StateStore::NonceUse> uses;
    std::vector<bool> fresh;
    std::exception_ptr error;
    bool written = false;
  };

  GuardedState& state_;
  mutable std::mutex mutex_;
  std::condition_variable written_;
  std::shared_ptr<Batch> open_ = std::make_shared<Batch>();  // collecting the next batch
  bool writing_ = false;
  uint64_t batches_written_ = 0;
};

}  // namespace tn::server
