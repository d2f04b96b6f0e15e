#include "nonce_ledger.h"

#include <future>
#include <utility>

#include "server/state_errors.h"

namespace tn::server {

NonceLedger::NonceLedger(GuardedState& state) : state_(state), writer_([this] { write_batches(); }) {}

NonceLedger::~NonceLedger() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  arrived_.notify_one();
  writer_.join();
}

void NonceLedger::record(std::string key_id, std::string nonce, int64_t timestamp_ms, Recorded recorded) {
  if (auto problem = StateStore::nonce_problem(key_id, nonce)) throw InvalidArgument(*problem);
  {
    std::lock_guard lock(mutex_);
    uses_.push_back({std::move(key_id), std::move(nonce), timestamp_ms});
    waiting_.push_back(std::move(recorded));
  }
  arrived_.notify_one();
}

bool NonceLedger::record(std::string key_id, std::string nonce, int64_t timestamp_ms) {
  std::promise<bool> answer;
  std::future<bool> answered = answer.get_future();
  record(std::move(key_id), std::move(nonce), timestamp_ms, [&answer](bool fresh, std::exception_ptr error) {
    if (error)
      answer.set_exception(error);
    else
      answer.set_value(fresh);
  });
  return answered.get();
}

void NonceLedger::write_batches() {
  std::unique_lock lock(mutex_);
  for (;;) {
    arrived_.wait(lock, [&] { return stopping_ || !uses_.empty(); });
    if (uses_.empty()) return;  // stopping, with nobody left waiting
    std::vector<StateStore::NonceUse> uses = std::exchange(uses_, {});
    std::vector<Recorded> waiting = std::exchange(waiting_, {});
    lock.unlock();
    std::vector<bool> fresh;
    std::exception_ptr error;
    try {
      fresh = state_.with([&](StateStore& store) { return store.record_nonces(uses); });
    } catch (...) {
      error = std::current_exception();
    }
    ++batches_written_;
    for (size_t i = 0; i < waiting.size(); ++i) waiting[i](!error && fresh[i], error);
    lock.lock();
  }
}

uint64_t NonceLedger::batches_written() const { return batches_written_; }

}  // namespace tn::server
