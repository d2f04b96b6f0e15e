// c10d's HashStore: an in-process map behind one mutex. Every write notifies a condition
// variable on which get/wait sleep until their keys exist.
#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <mutex>
#include <unordered_map>

#include "distributed/store.h"
#include "store_common.h"

namespace tn::dist {
namespace {

// Counters are ASCII decimal, as in c10d, so a `get` of a counter reads its digits.
int64_t parse_counter(const std::string& key, const Bytes& value) {
  const char* first = reinterpret_cast<const char*>(value.data());
  const char* last = first + value.size();
  int64_t counter = 0;
  const auto [end, error] = std::from_chars(first, last, counter);
  if (error != std::errc() || end != last) {
    throw InvalidArgument("add: key '" + key + "' holds a value that is not a decimal integer");
  }
  return counter;
}

class HashStore final : public Store {
 public:
  using Store::Store;

  void set(const std::string& key, const Bytes& value) override {
    {
      std::lock_guard lock(mutex_);
      data_[key] = value;
    }
    key_written_.notify_all();
  }

  Bytes get(const std::string& key) override {
    std::unique_lock lock(mutex_);
    wait_locked(lock, {key}, timeout(), "get");
    return data_.at(key);
  }

  int64_t add(const std::string& key, int64_t delta) override {
    int64_t sum = 0;
    {
      std::lock_guard lock(mutex_);
      const auto found = data_.find(key);
      const int64_t current = found == data_.end() ? 0 : parse_counter(key, found->second);
      if (__builtin_add_overflow(current, delta, &sum)) {
        throw InvalidArgument("add: key '" + key + "' would overflow a 64-bit integer");
      }
      const std::string digits = std::to_string(sum);
      data_[key] = Bytes(digits.begin(), digits.end());
    }
    key_written_.notify_all();
    return sum;
  }

  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    std::unique_lock lock(mutex_);
    const auto found = data_.find(key);
    if (found == data_.end()) {
      if (!expected.empty()) return expected;
    } else if (found->second != expected) {
      return found->second;
    }
    data_[key] = desired;
    lock.unlock();
    key_written_.notify_all();
    return desired;
  }

  bool check(const std::vector<std::string>& keys) override {
    std::lock_guard lock(mutex_);
    return missing_locked(keys).empty();
  }

  void wait(const std::vector<std::string>& keys, Milliseconds timeout) override {
    std::unique_lock lock(mutex_);
    wait_locked(lock, keys, timeout, "wait");
  }

  bool delete_key(const std::string& key) override {
    std::lock_guard lock(mutex_);
    return data_.erase(key) > 0;
  }

  int64_t num_keys() override {
    std::lock_guard lock(mutex_);
    return static_cast<int64_t>(data_.size());
  }

 private:
  std::vector<std::string> missing_locked(const std::vector<std::string>& keys) const {
    std::vector<std::string> missing;
    std::copy_if(keys.begin(), keys.end(), std::back_inserter(missing),
                 [this](const std::string& key) { return !data_.contains(key); });
    return missing;
  }

  // A zero timeout (c10d's kNoTimeout) or one beyond a century waits without limit; capping
  // long timeouts also keeps the condition variable's nanosecond arithmetic from overflowing.
  void wait_locked(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                   Milliseconds timeout, const char* operation) {
    if (timeout < Milliseconds::zero()) {
      throw InvalidArgument(std::string(operation) + ": negative timeout of " +
                            std::to_string(timeout.count()) + " ms");
    }
    const auto all_present = [&] { return missing_locked(keys).empty(); };
    if (unlimited_timeout(timeout)) {
      key_written_.wait(lock, all_present);
      return;
    }
    if (key_written_.wait_for(lock, timeout, all_present)) return;
    throw TimeoutError(std::string(operation) + " timed out after " + std::to_string(timeout.count()) +
                       " ms for key(s) " + quote_keys(missing_locked(keys)));
  }

  std::mutex mutex_;
  std::condition_variable key_written_;
  std::unordered_map<std::string, Bytes> data_;
};

}  // namespace

std::shared_ptr<Store> make_hash_store(Milliseconds timeout) { return std::make_shared<HashStore>(timeout); }

}  // namespace tn::dist
