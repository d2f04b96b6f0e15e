// The fixture and helpers the server_state_test sources share: a scratch state directory with a
// store opened on it (StateStoreTest), small models and round results, a raw sqlite3 connection
// to the same database, and file helpers that check bytes without the library under test.
#pragma once

#include <gtest/gtest.h>
#include <sodium.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "federated/round.h"
#include "server/state_store.h"
#include "test_support.h"

namespace tn::server::state_test {

namespace fs = std::filesystem;
using tn::ScalarType;
using tn::Shape;
using tn::federated::copy_tensor;
using tn::federated::DeviceId;
using tn::federated::Model;
using tn::federated::NamedTensor;
using tn::test::expect_same_model;
using namespace tn::server;

// ---- helpers ----------------------------------------------------------------------------------

template <typename T>
inline NamedTensor tensor_of(std::string name, ScalarType dtype, Shape shape, const std::vector<T>& values) {
  return copy_tensor(std::move(name), dtype, std::move(shape), std::as_bytes(std::span(values)));
}

inline std::string public_key(int seed) { return std::string(32, char('A' + seed)); }

inline std::string file_contents(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

inline void write_contents(const fs::path& path, std::string_view bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), std::streamsize(bytes.size()));
}

// Computed here with libsodium directly, not with the library under test.
inline std::string blake2b_hex(std::string_view bytes) {
  unsigned char digest[32];
  crypto_generichash(digest, sizeof digest, reinterpret_cast<const unsigned char*>(bytes.data()),
                     bytes.size(), nullptr, 0);
  char hex[65];
  sodium_bin2hex(hex, sizeof hex, digest, sizeof digest);
  return hex;
}

// A second connection to the state database, as an operator's sqlite3 shell would open it.
class RawDatabase {
 public:
  explicit RawDatabase(const fs::path& state_directory) {
    const std::string path = (state_directory / "state.sqlite3").string();
    if (sqlite3_open_v2(path.c_str(), &handle_, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK)
      throw std::runtime_error("cannot open " + path);
    sqlite3_busy_timeout(handle_, 10000);
  }
  RawDatabase(const RawDatabase&) = delete;
  RawDatabase& operator=(const RawDatabase&) = delete;
  ~RawDatabase() { sqlite3_close(handle_); }

  void execute(const std::string& sql) {
    char* error = nullptr;
    if (sqlite3_exec(handle_, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
      const std::string message = error ? error : "?";
      sqlite3_free(error);
      throw std::runtime_error(sql + ": " + message);
    }
  }
  // The first column of every row, as text ("NULL" for NULL).
  std::vector<std::string> column(const std::string& sql) {
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(handle_, sql.c_str(), -1, &statement, nullptr) != SQLITE_OK)
      throw std::runtime_error(sql + ": " + sqlite3_errmsg(handle_));
    std::vector<std::string> values;
    int code;
    while ((code = sqlite3_step(statement)) == SQLITE_ROW) {
      const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(statement, 0));
      values.emplace_back(text ? text : "NULL");
    }
    sqlite3_finalize(statement);
    if (code != SQLITE_DONE) throw std::runtime_error(sql + ": " + sqlite3_errmsg(handle_));
    return values;
  }

 private:
  sqlite3* handle_ = nullptr;
};

// Every file under `root`, relative to it.
inline std::set<std::string> files_under(const fs::path& root) {
  std::set<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(root))
    if (entry.is_regular_file()) files.insert(fs::relative(entry.path(), root).string());
  return files;
}

class StateStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "server_state_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    directory_ = pattern;
    ASSERT_GE(sodium_init(), 0);
  }
  void TearDown() override { fs::remove_all(directory_); }

  OpenOptions options(OpenOptions::FileCheck check = OpenOptions::FileCheck::Hashes) {
    OpenOptions options;
    options.file_check = check;
    options.now_unix_ms = [this] { return now_ms_; };
    return options;
  }
  StateStore open(OpenOptions::FileCheck check = OpenOptions::FileCheck::Hashes) {
    return StateStore::open(directory_, options(check));
  }

  static Model small_model(float scale = 1.0f) {
    return {
        {tensor_of<float>("weight", ScalarType::Float, {2, 2}, {1 * scale, 2 * scale, 3 * scale, 4 * scale}),
         tensor_of<int64_t>("steps", ScalarType::Long, {1}, {42})}};
  }
  static TaskDefinition definition(const std::string& id = "mnist", const std::string& strategy = "fedavg") {
    TaskDefinition task;
    task.id = id;
    task.strategy = strategy;
    task.strategy_params = nlohmann::json::object();
    task.round_params = {{"devices_per_round", 2}, {"round_timeout_ms", 60000}};
    task.rounds_planned = 5;
    return task;
  }
  // A task with devices a, b and c registered.
  void populate(StateStore& store, const std::string& strategy = "fedavg") {
    for (int i = 0; i < 3; ++i)
      store.register_device(std::string(1, char('a' + i)), public_key(i), {{"n", i}});
    store.create_task(definition("mnist", strategy), small_model());
  }
  static RoundResult completed(std::vector<DeviceId> contributors, std::vector<DeviceId> missing, Model model,
                               uint64_t rounds) {
    RoundResult result;
    result.outcome = RoundState::Completed;
    result.contributors = std::move(contributors);
    result.missing = std::move(missing);
    result.new_model = std::move(model);
    result.strategy_state = tn::federated::StrategyState{
        {{"strategy", "fedavg"},
         {"params",
          {{"evaluate_config", nlohmann::json::object()}, {"fit_config", nlohmann::json::object()}}},
         {"rounds", rounds}},
        {}};
    return result;
  }
  static RoundResult abandoned(std::vector<DeviceId> contributors, std::vector<DeviceId> missing) {
    RoundResult result;
    result.outcome = RoundState::Abandoned;
    result.contributors = std::move(contributors);
    result.missing = std::move(missing);
    result.abandon_reason = "1 of the 2 updates required arrived";
    return result;
  }

  fs::path directory_;
  int64_t now_ms_ = 1'700'000'000'000;
};

}  // namespace tn::server::state_test
