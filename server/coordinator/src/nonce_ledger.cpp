#include "nonce_ledger.h"

#include <utility>

#include "server/state_errors.h"

namespace tn::server {

bool NonceLedger::record(std::string key_id, std::string nonce, int64_t timestamp_ms) {
  if (auto problem = StateStore::nonce_problem(key_id, nonce)) throw InvalidArgument(*problem);
  std::unique_lock lock(mutex_);
  const std::shared_ptr<Batch> batch = open_;
  const size_t index = batch->uses.size();
  batch->uses.push_back({std::move(key_id), std::move(nonce), timestamp_ms});
  while (!batch->written) {
    if (writing_) {
      written_.wait(lock);
      continue;
    }
    // No batch is being written: this thread writes the open one (its own, or one that its own
    // was taken into is already written and it would not be here).
    writing_ = true;
    const std::shared_ptr<Batch> taken = std::exchange(open_, std::make_shared<Batch>());
    lock.unlock();
    try {
      taken->fresh = state_.with([&](StateStore& store) { return store.record_nonces(taken->uses); });
    } catch (...) {
      taken->error = std::current_exception();
    }
    lock.lock();
    taken->written = true;
    writing_ = false;
    ++batches_written_;
    written_.notify_all();
  }
  if (batch->error) std::rethrow_exception(batch->error);
  return batch->fresh[index];
}

uint64_t NonceLedger::batches_written() const {
  std::lock_guard lock(mutex_);
  return batches_written_;
}

}  // namespace tn::server
