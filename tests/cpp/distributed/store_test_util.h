// What the store tests share: timeouts, bytes as text, a temporary directory per test and a
// TCP store's master and clients.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>

#include "distributed/store.h"
#include "test_support.h"

namespace tn::dist {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Long enough that nothing expected to succeed ever times out, even under sanitizers.
constexpr Milliseconds kGenerousTimeout = 5s;
// Short enough to keep the timeout tests fast.
constexpr Milliseconds kShortTimeout = 200ms;

inline Bytes bytes_of(const std::string& text) { return Bytes(text.begin(), text.end()); }
inline std::string text_of(const Bytes& bytes) { return std::string(bytes.begin(), bytes.end()); }

using tn::test::message_of;

// A directory of its own for each test's files, removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tn_store_test_XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline std::shared_ptr<Store> tcp_master(std::optional<int> world_size = std::nullopt, uint16_t port = 0,
                                         Milliseconds timeout = kGenerousTimeout) {
  TCPStoreOptions options;
  options.is_master = true;
  options.port = port;
  options.world_size = world_size;
  options.timeout = timeout;
  return make_tcp_store(options);
}

inline std::shared_ptr<Store> tcp_client(uint16_t port, std::optional<int> world_size = std::nullopt,
                                         Milliseconds timeout = kGenerousTimeout) {
  TCPStoreOptions options;
  options.port = port;
  options.world_size = world_size;
  options.timeout = timeout;
  return make_tcp_store(options);
}

}  // namespace tn::dist
