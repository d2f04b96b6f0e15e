// Rendezvous stores with c10d's semantics: a key-value map that ranks use to find each other.
// Values are bytes; `add` keeps a decimal integer, as c10d's stores do, so `get` of an added
// key returns its digits.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distributed/errors.h"

namespace tn::dist {

using Bytes = std::vector<uint8_t>;
using Milliseconds = std::chrono::milliseconds;

class Store {
 public:
  explicit Store(Milliseconds timeout) : timeout_(timeout) {}
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  virtual void set(const std::string& key, const Bytes& value) = 0;
  // Waits up to timeout() for the key to exist; TimeoutError names the key otherwise.
  virtual Bytes get(const std::string& key) = 0;
  // Adds to the integer stored under key (0 when absent) and returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // c10d's compareSet: when the key is absent and `expected` is empty, or when the current
  // value equals `expected`, stores `desired`. Returns the value now stored (or `expected`
  // when the key is absent and `expected` is not empty).
  virtual Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) = 0;
  // True when every key exists; does not wait.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // Waits until every key exists; TimeoutError names the missing keys.
  virtual void wait(const std::vector<std::string>& keys, Milliseconds timeout) = 0;
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }
  virtual bool delete_key(const std::string& key) = 0;
  virtual int64_t num_keys() = 0;

  Milliseconds timeout() const { return timeout_; }
  void set_timeout(Milliseconds timeout) { timeout_ = timeout; }

 private:
  Milliseconds timeout_;
};

// In-process store, thread-safe (c10d's HashStore).
std::shared_ptr<Store> make_hash_store(Milliseconds timeout = std::chrono::minutes(5));

// A store in a file shared by processes on one machine (c10d's FileStore). The file is
// removed when the last of `num_users` users (when given) closes it.
std::shared_ptr<Store> make_file_store(const std::string& path, std::optional<int> num_users,
                                       Milliseconds timeout = std::chrono::minutes(5));

// Every key of `inner` prefixed with "<prefix>/" (c10d's PrefixStore).
std::shared_ptr<Store> make_prefix_store(const std::string& prefix, std::shared_ptr<Store> inner);
const std::string& prefix_of(const Store& store);  // "" unless made by make_prefix_store
std::shared_ptr<Store> inner_of(const Store& store);

// TCP store (c10d's TCPStore). The master listens on `port` (0 picks a free one, see
// tcp_store_port) and serves every client; each client connects with retries until timeout.
// With `world_size` and `wait_for_workers`, the master's constructor waits until world_size
// participants (itself included) have connected.
struct TCPStoreOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  bool is_master = false;
  std::optional<int> world_size;
  bool wait_for_workers = true;
  Milliseconds timeout = std::chrono::minutes(5);
};
std::shared_ptr<Store> make_tcp_store(const TCPStoreOptions& options);
uint16_t tcp_store_port(const Store& store);  // the port the master listens on / the client reached
const std::string& tcp_store_host(const Store& store);

}  // namespace tn::dist
