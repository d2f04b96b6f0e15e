// A federated coordinator on top of the state store: resuming a federated Task bit for bit, and
// SIGKILL at random instants.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>

#include "federated/errors.h"
#include "server/safetensors.h"
#include "state_store_fixture.h"

namespace {

using namespace tn::server::state_test;

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
