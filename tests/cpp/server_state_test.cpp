// tn_server_state: the schema, every create/read/update path, the atomicity of closing a round,
// the safetensors files (round trip, exact bytes, refusal of corrupt ones), the clean-up on open,
// nonces, resuming a federated Task bit for bit, and SIGKILL at random instants.
#include <gtest/gtest.h>
#include <signal.h>
#include <sodium.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "federated/errors.h"
#include "federated/round.h"
#include "server/safetensors.h"
#include "server/state_store.h"
#include "test_support.h"

namespace {

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
NamedTensor tensor_of(std::string name, ScalarType dtype, Shape shape, const std::vector<T>& values) {
  return copy_tensor(std::move(name), dtype, std::move(shape), std::as_bytes(std::span(values)));
}

std::string public_key(int seed) { return std::string(32, char('A' + seed)); }

std::string file_contents(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

void write_contents(const fs::path& path, std::string_view bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), std::streamsize(bytes.size()));
}

// Computed here with libsodium directly, not with the library under test.
std::string blake2b_hex(std::string_view bytes) {
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
std::set<std::string> files_under(const fs::path& root) {
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

// ---- schema -----------------------------------------------------------------------------------

TEST_F(StateStoreTest, CreatesTheSchemaAtItsLatestMigrationOnce) {
  {
    StateStore store = open();
    EXPECT_EQ(store.schema_version(), 1);
  }
  StateStore reopened = open();  // a second open must not apply the migration again
  EXPECT_EQ(reopened.schema_version(), 1);
  RawDatabase raw(directory_);
  EXPECT_EQ(raw.column("SELECT version FROM schema_migrations"), std::vector<std::string>{"1"});
  EXPECT_EQ(raw.column("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name"),
            (std::vector<std::string>{"devices", "model_versions", "round_devices", "rounds",
                                      "schema_migrations", "strategy_states", "tasks", "used_nonces"}));
  EXPECT_EQ(raw.column("PRAGMA journal_mode"), std::vector<std::string>{"wal"});
  EXPECT_EQ(raw.column("PRAGMA integrity_check"), std::vector<std::string>{"ok"});
}

TEST_F(StateStoreTest, RefusesADatabaseFromANewerBuild) {
  { StateStore store = open(); }
  RawDatabase(directory_).execute("INSERT INTO schema_migrations (version, applied_at_ms) VALUES (2, 0)");
  try {
    open();
    FAIL() << "a schema newer than the build was accepted";
  } catch (const StateError& error) {
    EXPECT_NE(std::string(error.what()).find("schema version 2, newer than the 1"), std::string::npos)
        << error.what();
  }
}

TEST_F(StateStoreTest, OneStoreAtATimePerDirectory) {
  StateStore store = open();
  EXPECT_THROW(open(), Conflict);
}

TEST_F(StateStoreTest, ForeignKeysAreEnforced) {
  StateStore store = open();
  populate(store);
  // A round of a task that does not exist, through the store's own connection settings, is
  // refused; through a raw connection (foreign keys off by default) the check finds it.
  EXPECT_THROW(store.begin_round("nope", {1, 0, {"a"}, 0}), NotFound);
  RawDatabase raw(directory_);
  raw.execute(
      "INSERT INTO round_devices (task_id, round_number, device_id, outcome) VALUES ('mnist', 9, 'zz', "
      "'selected')");
  EXPECT_EQ(raw.column("PRAGMA foreign_key_check").size(), 2u);
}

// ---- devices ----------------------------------------------------------------------------------

TEST_F(StateStoreTest, RegistersFindsTouchesAndListsDevices) {
  {
    StateStore store = open();
    const Device phone = store.register_device("phone-1", public_key(1), {{"memory_bytes", 4096}});
    EXPECT_EQ(phone.registered_at_ms, now_ms_);
    EXPECT_EQ(phone.last_seen_ms, now_ms_);
    store.register_device("laptop", public_key(2), nlohmann::json::object());

    EXPECT_EQ(store.device("phone-1")->metadata["memory_bytes"], 4096);
    EXPECT_EQ(store.find_device_by_key(public_key(2))->id, "laptop");
    EXPECT_FALSE(store.find_device_by_key(public_key(3)));
    EXPECT_FALSE(store.device("tablet"));

    now_ms_ += 5000;
    // Forward only, unknown devices skipped, all in one transaction.
    EXPECT_EQ(store.record_last_seen({{"phone-1", now_ms_}, {"laptop", now_ms_ - 9000}, {"tablet", now_ms_}}),
              1u);
    EXPECT_EQ(store.device("phone-1")->last_seen_ms, now_ms_);
    EXPECT_EQ(store.device("phone-1")->registered_at_ms, now_ms_ - 5000);
    EXPECT_EQ(store.device("laptop")->last_seen_ms, now_ms_ - 5000);
  }
  StateStore reopened = open();
  const std::vector<Device> devices = reopened.list_devices();
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].id, "laptop");
  EXPECT_EQ(devices[1].id, "phone-1");
  EXPECT_EQ(devices[1].public_key, public_key(1));
  EXPECT_EQ(devices[1].last_seen_ms, now_ms_);
}

TEST_F(StateStoreTest, RefusesDuplicateAndMalformedDevices) {
  StateStore store = open();
  store.register_device("phone-1", public_key(1), {});
  EXPECT_THROW(store.register_device("phone-1", public_key(2), {}), Conflict);
  try {
    store.register_device("phone-2", public_key(1), {});
    FAIL() << "a public key was registered twice";
  } catch (const Conflict& error) {
    EXPECT_NE(std::string(error.what()).find("already registered to device 'phone-1'"), std::string::npos);
  }
  EXPECT_THROW(store.register_device("phone-3", std::string(31, 'k'), {}), InvalidArgument);
  EXPECT_THROW(store.register_device("phone/3", public_key(3), {}), InvalidArgument);
  EXPECT_THROW(store.register_device("", public_key(3), {}), InvalidArgument);
  EXPECT_EQ(store.list_devices().size(), 1u);
}

// ---- tasks ------------------------------------------------------------------------------------

TEST_F(StateStoreTest, CreatesReadsListsAndEndsTasks) {
  StateStore store = open();
  const TaskRecord created = store.create_task(definition("mnist"), small_model());
  EXPECT_EQ(created.state, TaskState::Running);
  now_ms_ += 1;
  store.create_task(definition("cifar", "fedavgm"), small_model(2));

  const std::optional<TaskRecord> mnist = store.task("mnist");
  ASSERT_TRUE(mnist);
  EXPECT_EQ(mnist->definition.strategy, "fedavg");
  EXPECT_EQ(mnist->definition.round_params["devices_per_round"], 2);
  EXPECT_EQ(mnist->definition.rounds_planned, 5u);
  EXPECT_EQ(mnist->created_at_ms, now_ms_ - 1);
  EXPECT_FALSE(store.task("imagenet"));
  ASSERT_EQ(store.list_tasks().size(), 2u);
  EXPECT_EQ(store.list_tasks()[0].definition.id, "mnist");  // creation order

  // Version 0 is the initial model, in a file whose bytes hash to the recorded digest.
  const std::vector<ModelVersionRecord> versions = store.list_model_versions("mnist");
  ASSERT_EQ(versions.size(), 1u);
  EXPECT_EQ(versions[0].version, 0u);
  EXPECT_EQ(versions[0].file_path, "models/mnist/0.safetensors");
  const std::string bytes = file_contents(directory_ / versions[0].file_path);
  EXPECT_EQ(bytes.size(), versions[0].byte_size);
  EXPECT_EQ(blake2b_hex(bytes), versions[0].blake2b_256_hex);
  EXPECT_EQ(bytes, encode_safetensors(small_model()));
  expect_same_model(small_model(), store.load_model("mnist", 0));
  EXPECT_EQ(store.load_strategy_state("cifar", 0).meta["strategy"], "fedavgm");
  EXPECT_EQ(store.latest_model_version("cifar"), 0u);
  EXPECT_THROW(store.load_model("mnist", 1), NotFound);
  EXPECT_THROW(store.load_model("imagenet", 0), NotFound);

  store.set_task_state("cifar", TaskState::Stopped, "operator request");
  EXPECT_EQ(store.task("cifar")->state, TaskState::Stopped);
  EXPECT_EQ(store.task("cifar")->state_reason, "operator request");
  EXPECT_THROW(store.set_task_state("cifar", TaskState::Completed, ""), Conflict);
  EXPECT_THROW(store.set_task_state("mnist", TaskState::Running, ""), InvalidArgument);
  EXPECT_THROW(store.set_task_state("imagenet", TaskState::Stopped, ""), NotFound);
}

TEST_F(StateStoreTest, RefusesDuplicateAndMalformedTasks) {
  StateStore store = open();
  store.create_task(definition("mnist"), small_model());
  EXPECT_THROW(store.create_task(definition("mnist"), small_model()), Conflict);
  EXPECT_THROW(store.create_task(definition(".."), small_model()), InvalidArgument);
  EXPECT_THROW(store.create_task(definition("a/b"), small_model()), InvalidArgument);
  EXPECT_THROW(store.create_task(definition("t2", "fedmagic"), small_model()), InvalidArgument);
  TaskDefinition bad_params = definition("t3", "fedavgm");
  bad_params.strategy_params = {{"server_momentum", 2.0}};
  EXPECT_THROW(store.create_task(bad_params, small_model()), InvalidArgument);
  Model short_tensor = small_model();
  short_tensor.tensors[0].nbytes = 12;  // the shape says 16
  EXPECT_THROW(store.create_task(definition("t4"), short_tensor), InvalidArgument);
  EXPECT_EQ(store.list_tasks().size(), 1u);
  // Nothing of the refused tasks was left on disk.
  EXPECT_EQ(files_under(directory_ / "models"), std::set<std::string>{"mnist/0.safetensors"});
}

// ---- rounds -----------------------------------------------------------------------------------

TEST_F(StateStoreTest, BeginsAndClosesRounds) {
  StateStore store = open();
  populate(store);
  EXPECT_FALSE(store.last_committed_round("mnist"));

  EXPECT_THROW(store.begin_round("mnist", {2, 0, {"a"}, 0}), Conflict);        // not the next number
  EXPECT_THROW(store.begin_round("mnist", {1, 1, {"a"}, 0}), Conflict);        // not the latest version
  EXPECT_THROW(store.begin_round("mnist", {1, 0, {"a", "zz"}, 0}), NotFound);  // unregistered device
  EXPECT_THROW(store.begin_round("mnist", {1, 0, {"a", "a"}, 0}), InvalidArgument);
  EXPECT_THROW(store.begin_round("mnist", {1, 0, {}, 0}), InvalidArgument);

  const RoundRecord begun = store.begin_round("mnist", {1, 0, {"c", "a", "b"}, now_ms_ + 60000});
  EXPECT_EQ(begun.state, RoundState::Open);
  EXPECT_EQ(begun.selected, (std::vector<DeviceId>{"a", "b", "c"}));
  EXPECT_EQ(begun.deadline_ms, now_ms_ + 60000);
  EXPECT_FALSE(begun.closed_at_ms);
  EXPECT_THROW(store.begin_round("mnist", {2, 0, {"a"}, 0}), Conflict);  // one open round per task
  EXPECT_THROW(store.set_task_state("mnist", TaskState::Stopped, ""), Conflict);

  // Contributors and missing must partition the selection exactly.
  EXPECT_THROW(store.close_round("mnist", 1, completed({"a", "b"}, {}, small_model(2), 1)), InvalidArgument);
  EXPECT_THROW(store.close_round("mnist", 1, completed({"a", "b"}, {"c", "zz"}, small_model(2), 1)),
               InvalidArgument);
  EXPECT_THROW(store.close_round("mnist", 1, completed({"a", "b"}, {"b", "c"}, small_model(2), 1)),
               InvalidArgument);
  RoundResult without_model = completed({"a"}, {"b", "c"}, small_model(2), 1);
  without_model.new_model.reset();
  EXPECT_THROW(store.close_round("mnist", 1, without_model), InvalidArgument);
  RoundResult other_strategy = completed({"a"}, {"b", "c"}, small_model(2), 1);
  other_strategy.strategy_state->meta["strategy"] = "krum";
  EXPECT_THROW(store.close_round("mnist", 1, other_strategy), InvalidArgument);
  EXPECT_THROW(store.close_round("mnist", 2, completed({"a"}, {"b", "c"}, small_model(2), 1)), NotFound);

  now_ms_ += 1000;
  const RoundRecord closed = store.close_round("mnist", 1, completed({"c", "a"}, {"b"}, small_model(2), 1));
  EXPECT_EQ(closed.state, RoundState::Completed);
  EXPECT_EQ(closed.contributors, (std::vector<DeviceId>{"a", "c"}));
  EXPECT_EQ(closed.missing, std::vector<DeviceId>{"b"});
  EXPECT_EQ(closed.model_version_out, 1u);
  EXPECT_EQ(closed.closed_at_ms, now_ms_);
  EXPECT_THROW(store.close_round("mnist", 1, abandoned({"a"}, {"b", "c"})), Conflict);
  EXPECT_EQ(store.latest_model_version("mnist"), 1u);
  expect_same_model(small_model(2), store.load_model("mnist", 1));
  EXPECT_EQ(store.load_strategy_state("mnist", 1).meta["rounds"], 1);

  store.begin_round("mnist", {2, 1, {"a", "b"}, 0});
  RoundResult with_contribution = abandoned({"a"}, {"b"});
  with_contribution.new_model = small_model(3);
  EXPECT_THROW(store.close_round("mnist", 2, with_contribution), InvalidArgument);
  const RoundRecord given_up = store.close_round("mnist", 2, abandoned({"a"}, {"b"}));
  EXPECT_EQ(given_up.state, RoundState::Abandoned);
  EXPECT_FALSE(given_up.model_version_out);
  EXPECT_EQ(given_up.abandon_reason, "1 of the 2 updates required arrived");
  EXPECT_FALSE(given_up.interrupted);
  EXPECT_EQ(store.latest_model_version("mnist"), 1u);
  EXPECT_EQ(store.last_committed_round("mnist")->round_number, 2u);

  // The task ends with its last round, in the same transaction.
  store.begin_round("mnist", {3, 1, {"a", "b", "c"}, 0});
  RoundResult last = completed({"a", "b", "c"}, {}, small_model(4), 2);
  last.task_end = TaskEnd{TaskState::Completed, "5 rounds planned, 5 done"};
  store.close_round("mnist", 3, last);
  EXPECT_EQ(store.task("mnist")->state, TaskState::Completed);
  EXPECT_THROW(store.begin_round("mnist", {4, 2, {"a"}, 0}), Conflict);

  const std::vector<RoundRecord> rounds = store.list_rounds("mnist");
  ASSERT_EQ(rounds.size(), 3u);
  EXPECT_EQ(rounds[2].model_version_in, 1u);
  EXPECT_EQ(rounds[2].model_version_out, 2u);
  EXPECT_EQ(store.round("mnist", 1)->contributors, (std::vector<DeviceId>{"a", "c"}));
  EXPECT_FALSE(store.round("mnist", 4));
  EXPECT_EQ(store.list_model_versions("mnist").size(), 3u);
}

// A failure anywhere in close_round leaves the round open and no model version, row or file.
TEST_F(StateStoreTest, ClosingARoundIsAllOrNothing) {
  {
    StateStore store = open();
    populate(store);
    store.begin_round("mnist", {1, 0, {"a", "b"}, 0});
    store.close_round("mnist", 1, completed({"a", "b"}, {}, small_model(2), 1));
    store.begin_round("mnist", {2, 1, {"a", "b"}, 0});

    // The strategy state is refused after the model file was written: that file goes too.
    RoundResult bad_state = completed({"a"}, {"b"}, small_model(3), 2);
    bad_state.strategy_state->tensors.tensors.push_back(
        tensor_of<double>("momentum/weight", ScalarType::Double, {2, 2}, {1, 2, 3}));
    EXPECT_THROW(store.close_round("mnist", 2, bad_state), InvalidArgument);
    EXPECT_FALSE(fs::exists(directory_ / "models/mnist/2.safetensors"));

    // The database refuses the last insert of the transaction (a trigger stands in for a full
    // disk): the round's update, the model version and the file are all gone.
    RawDatabase(directory_)
        .execute(
            "CREATE TRIGGER refuse_state BEFORE INSERT ON strategy_states BEGIN SELECT RAISE(ABORT, 'disk "
            "full'); END");
    EXPECT_THROW(store.close_round("mnist", 2, completed({"a"}, {"b"}, small_model(3), 2)), DatabaseError);
    EXPECT_EQ(store.round("mnist", 2)->state, RoundState::Open);
    EXPECT_TRUE(store.round("mnist", 2)->contributors.empty());
    EXPECT_EQ(store.latest_model_version("mnist"), 1u);
    EXPECT_FALSE(fs::exists(directory_ / "models/mnist/2.safetensors"));
    EXPECT_FALSE(fs::exists(directory_ / "strategy_states/mnist/2.safetensors"));

    RawDatabase(directory_).execute("DROP TRIGGER refuse_state");
    store.close_round("mnist", 2, completed({"a"}, {"b"}, small_model(3), 2));
    EXPECT_EQ(store.latest_model_version("mnist"), 2u);
  }
  StateStore reopened = open();
  EXPECT_TRUE(reopened.open_report().removed_files.empty());
  EXPECT_TRUE(reopened.open_report().damaged_files.empty());
  expect_same_model(small_model(3), reopened.load_model("mnist", 2));
}

// ---- safetensors ------------------------------------------------------------------------------

Model every_dtype_model() {
  std::mt19937 random(7);
  auto random_bytes = [&random](size_t count) {
    std::vector<uint8_t> bytes(count);
    for (uint8_t& byte : bytes) byte = uint8_t(random());
    return bytes;
  };
  Model model;
  const std::pair<ScalarType, Shape> tensors[] = {
      {ScalarType::Float, {3, 2}}, {ScalarType::Double, {5}}, {ScalarType::Half, {2, 2, 2}},
      {ScalarType::BFloat16, {7}}, {ScalarType::Long, {}},    {ScalarType::Int, {1, 3}},
      {ScalarType::Short, {4}},    {ScalarType::Char, {9}},   {ScalarType::Byte, {2, 5}},
      {ScalarType::Bool, {6}},     {ScalarType::Float, {0}},  {ScalarType::Bool, {3, 0, 2}},
      {ScalarType::Double, {0, 4}}};
  for (const auto& [dtype, shape] : tensors) {
    int64_t count = 1;
    for (int64_t dimension : shape) count *= dimension;
    std::vector<uint8_t> bytes = random_bytes(size_t(count) * tn::element_size(dtype));
    if (dtype == ScalarType::Bool)
      for (uint8_t& byte : bytes) byte &= 1;
    const std::string name =
        std::string(safetensors_dtype_name(dtype)) + "/" + std::to_string(model.tensors.size());
    model.tensors.push_back(tensor_of<uint8_t>(name, dtype, shape, bytes));
  }
  return model;
}

std::shared_ptr<const std::vector<std::byte>> as_file(std::string_view bytes) {
  const auto* begin = reinterpret_cast<const std::byte*>(bytes.data());
  return std::make_shared<const std::vector<std::byte>>(begin, begin + bytes.size());
}

TEST(Safetensors, RoundTripsEveryDtypeAndEmptyTensors) {
  const Model model = every_dtype_model();
  const std::string bytes = encode_safetensors(model, {{"format", "pt"}});
  const SafetensorsContents decoded = decode_safetensors(as_file(bytes), "every_dtype.safetensors");
  expect_same_model(model, decoded.model);
  EXPECT_EQ(decoded.metadata, (SafetensorsMetadata{{"format", "pt"}}));
  // The names safetensors gives the dtypes.
  for (const auto& [dtype, name] :
       std::vector<std::pair<ScalarType, std::string>>{{ScalarType::Float, "F32"},
                                                       {ScalarType::Double, "F64"},
                                                       {ScalarType::Half, "F16"},
                                                       {ScalarType::BFloat16, "BF16"},
                                                       {ScalarType::Long, "I64"},
                                                       {ScalarType::Int, "I32"},
                                                       {ScalarType::Short, "I16"},
                                                       {ScalarType::Char, "I8"},
                                                       {ScalarType::Byte, "U8"},
                                                       {ScalarType::Bool, "BOOL"}}) {
    EXPECT_EQ(safetensors_dtype_name(dtype), name);
    EXPECT_EQ(safetensors_dtype(name), dtype);
  }
}

TEST_F(StateStoreTest, StoresAndLoadsEveryDtype) {
  {
    StateStore store = open();
    store.create_task(definition("all"), every_dtype_model());
  }
  StateStore reopened = open();
  expect_same_model(every_dtype_model(), reopened.load_model("all", 0));
}

// Byte for byte what the format specifies, written out by hand.
TEST(Safetensors, WritesExactlyTheSpecifiedBytes) {
  const Model tiny{{tensor_of<float>("bias", ScalarType::Float, {2}, {1.0f, -2.0f}),
                    tensor_of<int64_t>("step", ScalarType::Long, {}, {7})}};
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"bias":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("step":{"dtype":"I64","shape":[],"data_offsets":[8,16]}})";  // 144 bytes: no padding
  ASSERT_EQ(header.size(), 144u);
  const std::string expected = std::string("\x90\0\0\0\0\0\0\0", 8) + header +
                               std::string("\x00\x00\x80\x3f\x00\x00\x00\xc0", 8) +  // 1.0f, -2.0f
                               std::string("\x07\0\0\0\0\0\0\0", 8);                 // 7
  EXPECT_EQ(encode_safetensors(tiny, {{"format", "pt"}}), expected);

  // 113 bytes of JSON are padded with 7 spaces to 120; a 0-element tensor spans [4, 4].
  const Model padded{{tensor_of<uint16_t>("w", ScalarType::Half, {1, 2}, {0x3c00, 0xc000}),
                      tensor_of<uint8_t>("mask", ScalarType::Bool, {0}, {})}};
  const std::string expected_padded =
      std::string("\x78\0\0\0\0\0\0\0", 8) +
      R"({"w":{"dtype":"F16","shape":[1,2],"data_offsets":[0,4]},"mask":{"dtype":"BOOL","shape":[0],"data_offsets":[4,4]}})" +
      "       " + std::string("\x00\x3c\x00\xc0", 4);  // float16 1.0, -2.0
  EXPECT_EQ(encode_safetensors(padded), expected_padded);
  EXPECT_EQ(safetensors_header(padded), expected_padded.substr(0, 128));
}

TEST(Safetensors, RefusesModelsItCannotWrite) {
  Model named_like_metadata{{tensor_of<float>("__metadata__", ScalarType::Float, {1}, {1.0f})}};
  EXPECT_THROW(encode_safetensors(named_like_metadata), InvalidArgument);
  Model invalid_utf8{{tensor_of<float>("w\xff", ScalarType::Float, {1}, {1.0f})}};
  EXPECT_THROW(encode_safetensors(invalid_utf8), InvalidArgument);
  Model repeated{{tensor_of<float>("w", ScalarType::Float, {1}, {1.0f}),
                  tensor_of<float>("w", ScalarType::Float, {1}, {1.0f})}};
  EXPECT_THROW(encode_safetensors(repeated), InvalidArgument);
}

// Builds a file from a header text and `data_bytes` zero bytes of data.
std::string file_with_header(const std::string& header, size_t data_bytes) {
  std::string length(8, '\0');
  for (size_t i = 0; i < 8; ++i) length[i] = char((header.size() >> (8 * i)) & 0xff);
  return length + header + std::string(data_bytes, '\0');
}

TEST(Safetensors, RefusesCorruptFilesByName) {
  const std::string valid =
      encode_safetensors(Model{{tensor_of<float>("a", ScalarType::Float, {2}, {1.0f, 2.0f}),
                                tensor_of<int32_t>("b", ScalarType::Int, {1}, {3})}});
  std::string huge_length = valid;
  huge_length[5] = '\x7f';
  std::string too_long = valid;
  too_long[0] = char(uint8_t(too_long[0]) + 1);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {valid.substr(0, 5), "shorter than the 8-byte header length"},
      {valid.substr(0, valid.size() - 1), "tensor 'b' ends at data offset 12, past the 11 data bytes"},
      {valid.substr(0, 40), "follow (truncated?)"},
      {huge_length, "exceeds the bound"},
      {valid + "x", "the tensors cover 12 data bytes, the file has 13"},
      {too_long, "the header contains a NUL byte"},  // the length now takes in the first data byte
      {file_with_header(R"( {"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4),
       "does not start with '{'"},
      {file_with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)", 4),
       "not valid UTF-8 JSON"},
      {file_with_header("{\"a\xc3\x28\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4),
       "not valid UTF-8 JSON"},
      {file_with_header(
           R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           8),
       "repeats the key \"a\""},
      {file_with_header(R"({"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4),
       "repeats the key \"dtype\""},
      {file_with_header(R"({"a":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", 4),
       "unknown dtype \"F33\""},
      {file_with_header(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
       "invalid dimension -1"},
      {file_with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4),
       "spans 4 bytes, its dtype \"F32\" and shape [2] make 8"},
      {file_with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", 4),
       "invalid data_offsets"},
      {file_with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":1}})", 4),
       "not exactly {dtype, shape, data_offsets}"},
      {file_with_header(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           8),
       "tensor 'b' starts at data offset 4 where 8 was expected"},
      {file_with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
       "tensor 'a' starts at data offset 4 where 0 was expected"},
      {file_with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 2),
       "past the 2 data bytes"},
      {file_with_header(R"({"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,4]}})", 4),
       "overflows"},
      {file_with_header(R"({"__metadata__":{"k":1}})", 0), "metadata 'k' is not a string"},
      {file_with_header(R"({"":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4), "empty"},
  };
  for (const auto& [bytes, problem] : cases) {
    try {
      decode_safetensors(as_file(bytes), "models/x/3.safetensors");
      ADD_FAILURE() << "accepted a file that should fail with: " << problem;
    } catch (const CorruptFile& error) {
      EXPECT_EQ(error.path, "models/x/3.safetensors");
      EXPECT_NE(std::string(error.what()).find(problem), std::string::npos)
          << "expected \"" << problem << "\" in: " << error.what();
    }
  }
}

TEST_F(StateStoreTest, RefusesAStoredFileThatWasTruncatedOrAlteredByName) {
  {
    StateStore store = open();
    populate(store);
    store.begin_round("mnist", {1, 0, {"a"}, 0});
    store.close_round("mnist", 1, completed({"a"}, {}, small_model(2), 1));
  }
  const fs::path truncated = directory_ / "models/mnist/0.safetensors";
  const fs::path altered = directory_ / "models/mnist/1.safetensors";
  const std::string original = file_contents(truncated);
  write_contents(truncated, std::string_view(original).substr(0, original.size() - 3));
  std::string flipped = file_contents(altered);
  flipped.back() ^= 0x01;
  write_contents(altered, flipped);

  StateStore store = open();
  const std::vector<FileProblem>& damaged = store.open_report().damaged_files;
  ASSERT_EQ(damaged.size(), 2u);
  EXPECT_EQ(damaged[0].path, truncated.string());
  EXPECT_NE(damaged[0].problem.find("the database recorded " + std::to_string(original.size())),
            std::string::npos);
  EXPECT_EQ(damaged[1].path, altered.string());
  EXPECT_NE(damaged[1].problem.find("BLAKE2b-256"), std::string::npos);
  EXPECT_TRUE(store.open_report().removed_files.empty());  // a damaged file is reported, never deleted
  try {
    store.load_model("mnist", 1);
    FAIL() << "an altered model was loaded";
  } catch (const CorruptFile& error) {
    EXPECT_EQ(error.path, altered.string());
  }
  EXPECT_THROW(store.load_model("mnist", 0), CorruptFile);
  EXPECT_THROW(store.resume_point("mnist"), CorruptFile);
  EXPECT_EQ(store.verify_files().size(), 2u);
}

TEST_F(StateStoreTest, SizeCheckAtOpenFindsTruncationAndLoadStillVerifiesTheHash) {
  {
    StateStore store = open();
    populate(store);
  }
  const fs::path model = directory_ / "models/mnist/0.safetensors";
  std::string flipped = file_contents(model);
  flipped.back() ^= 0x01;
  write_contents(model, flipped);
  {
    StateStore store = open(OpenOptions::FileCheck::Sizes);
    EXPECT_TRUE(store.open_report().damaged_files.empty());  // same size: only a hash finds it
    EXPECT_THROW(store.load_model("mnist", 0), CorruptFile);
  }
  fs::remove(model);
  StateStore store = open(OpenOptions::FileCheck::Sizes);
  ASSERT_EQ(store.open_report().damaged_files.size(), 1u);
  EXPECT_EQ(store.open_report().damaged_files[0].path, model.string());
}

// ---- open: clean-up and interrupted rounds ------------------------------------------------------

TEST_F(StateStoreTest, DeletesFilesLeftByInterruptedWritesOnOpen) {
  {
    StateStore store = open();
    populate(store);
  }
  const std::set<std::string> committed = files_under(directory_ / "models");
  write_contents(directory_ / "models/mnist/.tmp-1.safetensors", "half a mod");  // killed mid-write
  write_contents(directory_ / "models/mnist/1.safetensors",
                 encode_safetensors(small_model(2)));  // before commit
  write_contents(directory_ / "strategy_states/mnist/1.safetensors", encode_safetensors({}));
  fs::create_directories(directory_ / "models/never-committed");
  write_contents(directory_ / "models/never-committed/0.safetensors", encode_safetensors(small_model()));

  StateStore store = open();
  std::vector<std::string> removed = store.open_report().removed_files;
  std::sort(removed.begin(), removed.end());
  EXPECT_EQ(removed,
            (std::vector<std::string>{(directory_ / "models/mnist/.tmp-1.safetensors").string(),
                                      (directory_ / "models/mnist/1.safetensors").string(),
                                      (directory_ / "models/never-committed/0.safetensors").string(),
                                      (directory_ / "strategy_states/mnist/1.safetensors").string()}));
  EXPECT_EQ(files_under(directory_ / "models"), committed);
  EXPECT_FALSE(fs::exists(directory_ / "models/never-committed"));
  EXPECT_TRUE(store.open_report().damaged_files.empty());
  EXPECT_TRUE(store.verify_files().empty());
  expect_same_model(small_model(), store.load_model("mnist", 0));
}

TEST_F(StateStoreTest, MarksRoundsLeftOpenAsInterruptedAndResumesAfterThem) {
  {
    StateStore store = open();
    populate(store);
    store.begin_round("mnist", {1, 0, {"a", "b"}, 0});
    store.close_round("mnist", 1, completed({"a", "b"}, {}, small_model(2), 1));
    store.begin_round("mnist", {2, 1, {"a", "b"}, 0});
    store.close_round("mnist", 2, abandoned({"a"}, {"b"}));
    store.begin_round("mnist", {3, 1, {"a", "b", "c"}, 0});
  }  // the coordinator stops with round 3 open
  now_ms_ += 7000;
  StateStore store = open();
  EXPECT_EQ(store.open_report().interrupted_rounds,
            (std::vector<std::pair<std::string, uint64_t>>{{"mnist", 3}}));
  const RoundRecord interrupted = *store.round("mnist", 3);
  EXPECT_EQ(interrupted.state, RoundState::Abandoned);
  EXPECT_TRUE(interrupted.interrupted);
  EXPECT_EQ(interrupted.closed_at_ms, now_ms_);
  EXPECT_EQ(interrupted.selected.size(), 3u);
  EXPECT_TRUE(interrupted.contributors.empty());  // who had sent an update is not known

  const ResumePoint point = store.resume_point("mnist");
  EXPECT_EQ(point.model_version, 1u);
  expect_same_model(small_model(2), point.model);
  EXPECT_EQ(point.strategy_state.meta["rounds"], 1);
  EXPECT_EQ(point.last_committed_round->round_number, 3u);
  EXPECT_EQ(point.next_round_number, 4u);
  EXPECT_EQ(point.abandoned_in_a_row, 1u);  // round 2; the interrupted round 3 does not count
  const tn::federated::TaskCheckpoint checkpoint = point.checkpoint();
  EXPECT_EQ(checkpoint.meta, (nlohmann::json{{"task", "mnist"},
                                             {"model_version", 1},
                                             {"next_round_id", 4},
                                             {"abandoned_in_a_row", 1},
                                             {"failure", ""}}));
  store.begin_round("mnist", {4, 1, {"a"}, 0});
}

// ---- nonces -----------------------------------------------------------------------------------

TEST_F(StateStoreTest, RefusesAReusedNonceUntilItIsPruned) {
  const std::string nonce(16, '\x01');
  {
    StateStore store = open();
    EXPECT_TRUE(store.record_nonce("phone-1", nonce, 1000));
    EXPECT_FALSE(store.record_nonce("phone-1", nonce, 2000));
    EXPECT_TRUE(store.record_nonce("phone-2", nonce, 1000));  // nonces are per signer
    EXPECT_TRUE(store.record_nonce("", std::string(16, '\x02'), 3000));
    EXPECT_THROW(store.record_nonce("phone-1", "", 1000), InvalidArgument);
    EXPECT_THROW(store.record_nonce(std::string(300, 'k'), nonce, 1000), InvalidArgument);
  }
  StateStore store = open();
  EXPECT_FALSE(store.record_nonce("phone-1", nonce, 2000));  // remembered across a restart
  EXPECT_EQ(store.prune_nonces(2000), 2u);
  EXPECT_EQ(store.prune_nonces(2000), 0u);
  EXPECT_TRUE(store.record_nonce("phone-1", nonce, 4000));
  EXPECT_FALSE(store.record_nonce("", std::string(16, '\x02'), 4000));
}

TEST_F(StateStoreTest, RecordsABatchOfNoncesInOneGoAndRefusesItWholeForABadOne) {
  StateStore store = open();
  EXPECT_TRUE(store.record_nonce("phone-1", "used", 1000));
  using Use = StateStore::NonceUse;
  EXPECT_EQ(store.record_nonces({Use{"phone-1", "a", 1000}, Use{"phone-1", "used", 1000},
                                 Use{"phone-2", "a", 1000}, Use{"phone-1", "a", 1000}}),
            (std::vector<bool>{true, false, true, false}));
  // A nonce the store cannot take refuses the batch before anything is written.
  EXPECT_THROW(store.record_nonces({Use{"phone-1", "b", 1000}, Use{"phone-1", "", 1000}}), InvalidArgument);
  EXPECT_TRUE(store.record_nonce("phone-1", "b", 1000));
  EXPECT_EQ(store.nonce_problem("phone-1", std::string(1025, 'n')).value_or(""),
            "nonce of key 'phone-1': 1025 bytes, not 1 to 1024");
  EXPECT_EQ(store.nonce_problem("phone-1", "fine"), std::nullopt);
}

// ---- a federated coordinator on top: resume bit for bit, and SIGKILL -----------------------------

constexpr const char* kTaskId = "crash";
const std::vector<DeviceId> kDevices = {"dev-0", "dev-1", "dev-2", "dev-3"};
constexpr int64_t kWeights = 4096;  // 16 KiB of float32, 32 KiB of float64 momentum

tn::federated::TaskConfig crash_task_config() {
  tn::federated::TaskConfig config;
  config.name = kTaskId;
  config.selection.min_devices = 2;
  config.round_timeout = std::chrono::minutes(1);
  config.min_updates = 2;
  config.max_retries = 3;
  config.seed = 11;
  return config;
}

Model crash_initial_model() {
  std::vector<float> weights(kWeights);
  for (int64_t i = 0; i < kWeights; ++i) weights[size_t(i)] = float(i % 97) / 128.0f;
  return {{tensor_of<float>("w", ScalarType::Float, {kWeights}, weights),
           tensor_of<float>("b", ScalarType::Float, {4}, {0.5f, -0.5f, 0.25f, 0.0f}),
           tensor_of<int64_t>("steps", ScalarType::Long, {1}, {0})}};
}

TaskDefinition crash_task_definition() {
  TaskDefinition definition;
  definition.id = kTaskId;
  definition.strategy = "fedavgm";
  definition.strategy_params = {{"server_learning_rate", 1.0}, {"server_momentum", 0.9}};
  definition.rounds_planned = 1000000;
  return definition;
}

// Device k's update to `global` at model version v: the global model plus a deterministic step,
// so that the sequence of models depends only on the version, not on round ids or timing.
tn::federated::Update device_update(const Model& global, size_t k, uint64_t round_id, uint64_t version) {
  Model model;
  for (const NamedTensor& tensor : global.tensors) {
    if (tensor.dtype != ScalarType::Float) {
      model.tensors.push_back(tensor);
      continue;
    }
    std::vector<float> values(size_t(tensor.numel()));
    std::memcpy(values.data(), tensor.data.get(), tensor.nbytes);
    for (size_t i = 0; i < values.size(); ++i)
      values[i] += float(int64_t((k * 31 + version * 17 + i) % 13) - 6) / 64.0f;
    model.tensors.push_back(tensor_of<float>(tensor.name, tensor.dtype, tensor.shape, values));
  }
  return {kDevices[k], round_id, version, int64_t(10 + k), std::move(model)};
}

// One round attempt as a coordinator runs it: every version's first attempt gets a single update
// when version % 4 == 2, so that abandoned rounds are exercised too.
void run_round(tn::federated::Task& task, StateStore* store) {
  ASSERT_TRUE(task.start_round(kDevices).ok());
  const tn::federated::RoundPlan plan = task.current_round()->plan();
  const uint64_t abandoned_so_far = task.checkpoint().meta["abandoned_in_a_row"];
  if (store)
    store->begin_round(
        kTaskId,
        {plan.round_id, plan.model_version, plan.selected,
         std::chrono::duration_cast<std::chrono::milliseconds>(plan.deadline.time_since_epoch()).count()});
  const bool starve = plan.model_version % 4 == 2 && abandoned_so_far == 0;
  for (size_t k = 0; k < (starve ? 1 : kDevices.size()); ++k)
    task.submit(device_update(task.global_model(), k, plan.round_id, plan.model_version));
  const tn::federated::RoundOutcome outcome = task.close_round();
  ASSERT_EQ(outcome.status,
            starve ? tn::federated::RoundStatus::Abandoned : tn::federated::RoundStatus::Completed);
  if (!store) return;
  RoundResult result;
  result.contributors = outcome.contributors;
  result.missing = outcome.missing;
  if (outcome.status == tn::federated::RoundStatus::Completed) {
    result.outcome = RoundState::Completed;
    result.new_model = task.global_model();
    result.strategy_state = task.strategy().export_state();
  } else {
    result.outcome = RoundState::Abandoned;
    result.abandon_reason = outcome.reason;
  }
  store->close_round(kTaskId, plan.round_id, result);
}

// The same rounds without a store or a crash: the file each version must have, by hash.
class UninterruptedRun {
 public:
  UninterruptedRun()
      : task_(crash_task_config(), crash_initial_model(),
              tn::federated::make_strategy("fedavgm", crash_task_definition().strategy_params),
              std::make_shared<tn::federated::ManualClock>()) {
    record();
  }
  const std::string& model_hash(uint64_t version) { return at(version).first; }
  const std::string& strategy_hash(uint64_t version) { return at(version).second; }
  const tn::federated::Task& task_at(uint64_t version) {
    at(version);
    return task_;
  }

 private:
  const std::pair<std::string, std::string>& at(uint64_t version) {
    while (hashes_.size() <= version) {
      run_round(task_, nullptr);
      if (task_.model_version() == hashes_.size()) record();
    }
    return hashes_[version];
  }
  void record() {
    hashes_.emplace_back(blake2b_hex(encode_safetensors(task_.global_model())),
                         blake2b_hex(encode_safetensors(task_.strategy().export_state().tensors)));
  }
  tn::federated::Task task_;
  std::vector<std::pair<std::string, std::string>> hashes_;
};

void create_crash_task(const fs::path& directory) {
  StateStore store = StateStore::open(directory);
  for (size_t k = 0; k < kDevices.size(); ++k) store.register_device(kDevices[k], public_key(int(k)), {});
  store.create_task(crash_task_definition(), crash_initial_model());
}

// What a restarted coordinator does: open, resume, carry on.
tn::federated::Task resume(const StateStore& store) {
  return tn::federated::Task::restore(crash_task_config(), store.resume_point(kTaskId).checkpoint(),
                                      std::make_shared<tn::federated::ManualClock>());
}

TEST_F(StateStoreTest, ResumedTaskContinuesBitForBit) {
  create_crash_task(directory_);
  {
    StateStore store = open();
    tn::federated::Task task = resume(store);
    for (int i = 0; i < 4; ++i) run_round(task, &store);  // versions 1, 2, then an abandoned round, 3
    EXPECT_EQ(task.model_version(), 3u);
  }
  StateStore store = open();
  tn::federated::Task task = resume(store);
  EXPECT_EQ(task.model_version(), 3u);
  for (int i = 0; i < 3; ++i) run_round(task, &store);
  UninterruptedRun reference;
  EXPECT_EQ(task.model_version(), 6u);
  EXPECT_EQ(blake2b_hex(encode_safetensors(task.global_model())), reference.model_hash(6));
  EXPECT_EQ(task.strategy().export_state().meta, reference.task_at(6).strategy().export_state().meta);
  for (const ModelVersionRecord& version : store.list_model_versions(kTaskId)) {
    EXPECT_EQ(version.blake2b_256_hex, reference.model_hash(version.version))
        << "version " << version.version;
    EXPECT_EQ(blake2b_hex(encode_safetensors(store.load_strategy_state(kTaskId, version.version).tensors)),
              reference.strategy_hash(version.version));
  }
}

// The child: a coordinator that commits rounds as fast as it can until it is killed.
[[noreturn]] void coordinate_until_killed(const fs::path& directory) {
  try {
    StateStore store = StateStore::open(directory, {OpenOptions::FileCheck::Sizes, {}});
    tn::federated::Task task = resume(store);
    std::mt19937_64 nonces{uint64_t(getpid())};
    for (;;) {
      run_round(task, &store);
      if (::testing::Test::HasFailure()) _exit(2);
      std::string nonce(16, '\0');
      for (char& byte : nonce) byte = char(nonces());
      store.record_nonce(kDevices[0], nonce, 0);
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "coordinator child failed: %s\n", error.what());
  }
  _exit(3);
}

TEST_F(StateStoreTest, SurvivesSigkillAtRandomInstants) {
  create_crash_task(directory_);
  UninterruptedRun reference;
  std::mt19937 random(20261130);
  std::uniform_int_distribution<int> delay_ms(1, 150);
  size_t kills_with_interrupted_round = 0;
  size_t kills_with_files_removed = 0;
  uint64_t previous_latest = 0;
  constexpr int kKills = 30;
  for (int kill = 0; kill < kKills; ++kill) {
    const int delay = delay_ms(random);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) coordinate_until_killed(directory_);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    ASSERT_EQ(::kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "kill " << kill << ": the child ended by itself (status " << status << ") before the SIGKILL";
    const std::string label = "kill " + std::to_string(kill) + " after " + std::to_string(delay) + " ms: ";

    {  // the database as the crash left it, before the store touches it
      RawDatabase raw(directory_);
      ASSERT_EQ(raw.column("PRAGMA integrity_check"), std::vector<std::string>{"ok"}) << label;
      ASSERT_TRUE(raw.column("PRAGMA foreign_key_check").empty()) << label;
    }
    StateStore store = open();
    const OpenReport& report = store.open_report();
    ASSERT_TRUE(report.damaged_files.empty())
        << label << report.damaged_files[0].path << ": " << report.damaged_files[0].problem;
    kills_with_interrupted_round += !report.interrupted_rounds.empty();
    kills_with_files_removed += !report.removed_files.empty();

    // Round numbers 1..n without a gap, none open; completed ones made consecutive versions.
    const std::vector<RoundRecord> rounds = store.list_rounds(kTaskId);
    uint64_t expected_version_out = 1;
    for (size_t i = 0; i < rounds.size(); ++i) {
      ASSERT_EQ(rounds[i].round_number, i + 1) << label;
      ASSERT_NE(rounds[i].state, RoundState::Open) << label;
      if (rounds[i].state == RoundState::Completed) {
        ASSERT_EQ(rounds[i].model_version_out, expected_version_out) << label << "round " << i + 1;
        ++expected_version_out;
      }
    }
    // Every committed version: its file intact, as recorded, and byte for byte the model the
    // uninterrupted run made at that version.
    const std::vector<ModelVersionRecord> versions = store.list_model_versions(kTaskId);
    ASSERT_EQ(versions.size(), expected_version_out) << label;
    for (const ModelVersionRecord& version : versions) {
      const std::string bytes = file_contents(directory_ / version.file_path);
      ASSERT_EQ(bytes.size(), version.byte_size) << label << version.file_path;
      ASSERT_EQ(blake2b_hex(bytes), version.blake2b_256_hex) << label << version.file_path;
      ASSERT_EQ(version.blake2b_256_hex, reference.model_hash(version.version)) << label << version.file_path;
    }
    // Nothing but committed files remains.
    ASSERT_EQ(files_under(directory_ / "models").size(), versions.size()) << label;
    ASSERT_EQ(files_under(directory_ / "strategy_states").size(), versions.size()) << label;

    const ResumePoint point = store.resume_point(kTaskId);
    ASSERT_EQ(point.model_version, versions.back().version) << label;
    ASSERT_GE(point.model_version, previous_latest) << label << "a committed version was lost";
    previous_latest = point.model_version;
    if (!rounds.empty()) {
      ASSERT_EQ(point.last_committed_round->round_number, rounds.back().round_number) << label;
      ASSERT_EQ(point.next_round_number, rounds.back().round_number + 1) << label;
    }
    ASSERT_EQ(blake2b_hex(encode_safetensors(point.strategy_state.tensors)),
              reference.strategy_hash(point.model_version))
        << label;
    ASSERT_EQ(point.strategy_state.meta["rounds"], point.model_version) << label;
  }
  RawDatabase raw(directory_);
  ASSERT_EQ(raw.column("PRAGMA integrity_check"), std::vector<std::string>{"ok"});
  std::printf("%d kills: %lu left a round open, %lu left files to delete; %lu model versions committed\n",
              kKills, (unsigned long)kills_with_interrupted_round, (unsigned long)kills_with_files_removed,
              (unsigned long)previous_latest);
  // The kills must have hit the interesting instants, or the test proved little.
  EXPECT_GT(kills_with_interrupted_round, 0u);
  EXPECT_GT(kills_with_files_removed, 0u);
  EXPECT_GE(previous_latest, 5u);
}

}  // namespace
