// The coordinator's persistent state: devices, tasks, rounds, model versions, strategy states and
// used request nonces, in SQLite, with models and strategy states as safetensors files beside it.
//
// Layout of a state directory:
//   state.sqlite3 (+ -wal, -shm)                    the database (WAL mode, synchronous=FULL)
//   LOCK                                            flock'ed by the one StateStore using it
//   models/<task>/<version>.safetensors             model version <version> of <task>
//   strategy_states/<task>/<version>.safetensors    the strategy's tensors that go with it
//
// Crash safety (kill -9 or power loss at any instant): a file is written under a temporary name,
// fsynced, renamed into place and its directory fsynced BEFORE the transaction that references it
// commits, so a committed row always names a complete, durable file; files are never rewritten
// once referenced. A round's result, its new model version and the strategy state are committed
// in one transaction, so after a restart the state is that of the last committed round exactly.
// open() deletes what an interrupted write left behind (files no committed row references),
// reports referenced files that are missing or whose size or hash differs, and marks rounds
// that were still open as abandoned (interrupted). resume_point() then gives what the
// coordinator needs to carry on: tn::federated::Task::restore(config, point.checkpoint(), clock).
//
// Not thread-safe: one coordinator thread owns a StateStore (the LOCK keeps other processes out).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "federated/model.h"
#include "federated/round.h"
#include "federated/strategy.h"
#include "server/state_errors.h"

namespace tn::server {

enum class TaskState { Running, Stopped, Failed, Completed };
enum class RoundState { Open, Completed, Abandoned };
// As stored: "running", "stopped", "failed", "completed"; "open", "completed", "abandoned".
const char* task_state_name(TaskState state);
const char* round_state_name(RoundState state);

struct Device {
  federated::DeviceId id;
  std::string public_key;  // Ed25519, 32 bytes
  nlohmann::json metadata;
  int64_t registered_at_ms = 0;  // Unix time in milliseconds, as every timestamp here
  int64_t last_seen_ms = 0;
};

struct TaskDefinition {
  // 1 to 128 of [A-Za-z0-9._-], not "." or "..": it names the task's directories.
  std::string id;
  // A name federated::make_strategy knows, and its parameters (checked by making it).
  std::string strategy;
  nlohmann::json strategy_params = nlohmann::json::object();
  // Selection and round parameters (devices per round, timeout, min updates, ...), stored as
  // given for the coordinator to rebuild its federated::TaskConfig from.
  nlohmann::json round_params = nlohmann::json::object();
  uint64_t rounds_planned = 0;
};

struct TaskRecord {
  TaskDefinition definition;
  TaskState state = TaskState::Running;
  std::string state_reason;  // why the task stopped or failed; empty while running
  int64_t created_at_ms = 0;
};

struct ModelVersionRecord {
  std::string task_id;
  uint64_t version = 0;         // 0 is the initial model; round by round completed rounds add 1
  std::string blake2b_256_hex;  // of the whole file
  uint64_t byte_size = 0;
  std::string file_path;  // relative to the state directory
  int64_t created_at_ms = 0;
};

struct RoundStart {
  // Must be the task's next round number: 1 + the highest so far (1 for the first round). Round
  // numbers are attempts, as federated::RoundPlan::round_id: an abandoned round is not retried
  // under its own number.
  uint64_t round_number = 0;
  uint64_t model_version_in = 0;              // must be the task's latest model version
  std::vector<federated::DeviceId> selected;  // registered devices, each once
  int64_t deadline_ms = 0;
};

struct RoundRecord {
  std::string task_id;
  uint64_t round_number = 0;
  RoundState state = RoundState::Open;
  int64_t started_at_ms = 0;
  int64_t deadline_ms = 0;
  std::optional<int64_t> closed_at_ms;
  uint64_t model_version_in = 0;
  std::optional<uint64_t> model_version_out;  // completed rounds only
  std::vector<federated::DeviceId> selected;  // sorted, as all three lists
  std::vector<federated::DeviceId> contributors;
  std::vector<federated::DeviceId> missing;
  std::string abandon_reason;
  // Abandoned because the coordinator stopped while the round was open (found open by open()).
  bool interrupted = false;
};

// How the task ends together with a round (its last planned round, or the abandonment that
// exceeded the retries): any state but Running.
struct TaskEnd {
  TaskState state = TaskState::Completed;
  std::string reason;
};

struct RoundResult {
  RoundState outcome = RoundState::Completed;  // Completed or Abandoned
  // Together exactly the selected devices, each in one of them.
  std::vector<federated::DeviceId> contributors;
  std::vector<federated::DeviceId> missing;
  std::string abandon_reason;  // for Abandoned
  // Completed only, and then required: the new global model (version in + 1) and the
  // strategy's export_state() after aggregating.
  std::optional<federated::Model> new_model;
  std::optional<federated::StrategyState> strategy_state;
  std::optional<TaskEnd> task_end;
};

// Where a task carries on after a restart.
struct ResumePoint {
  TaskRecord task;
  uint64_t model_version = 0;  // the latest, that the next round trains
  federated::Model model;
  federated::StrategyState strategy_state;
  std::optional<RoundRecord> last_committed_round;  // the highest-numbered closed round
  uint64_t next_round_number = 1;
  // Abandoned (not interrupted) rounds since the latest model version was made.
  uint64_t abandoned_in_a_row = 0;

  // For federated::Task::restore: {"task", "model_version", "next_round_id", "abandoned_in_a_row",
  // "failure"} with the model and strategy state. Rounds interrupted by a restart do not count
  // as abandoned, as a round open at a federated checkpoint does not.
  federated::TaskCheckpoint checkpoint() const;
};

// An event of the coordinator's, as AdminService.StreamEvents gives it (admin.proto's Event), kept
// so that a follower can replay from a sequence number across restarts.
struct StoredEvent {
  uint64_t sequence = 0;  // given by the caller, above every stored one
  int64_t time_unix_ms = 0;
  std::string kind;  // admin.proto's EventKind name, "EVENT_KIND_ROUND_COMPLETED", ...
  std::string task_id;
  uint64_t round_id = 0;
  std::string device_id;
  std::string message;
};

struct FileProblem {
  std::string path;  // the file's full path
  std::string problem;
};

// What open() found and did.
struct OpenReport {
  std::vector<std::string> removed_files;  // unreferenced files deleted, full paths
  std::vector<FileProblem> damaged_files;  // referenced files missing or not as recorded
  std::vector<std::pair<std::string, uint64_t>> interrupted_rounds;  // (task, round number)
};

struct OpenOptions {
  // Hashes: open() reads and hashes every referenced file, finding any corruption at startup.
  // Sizes: only their existence and sizes are checked (for stores too large to read at every
  // start); every load still verifies the hash, so corruption is found when a file is used.
  enum class FileCheck { Sizes, Hashes };
  FileCheck file_check = FileCheck::Hashes;
  // The clock behind every timestamp the store records; Unix milliseconds.
  std::function<int64_t()> now_unix_ms;  // empty: the system clock
  // open() forgets all but this many of the latest events (about 2 + 2 x devices a round), so
  // the table stays bounded; sequences still go on from the latest.
  uint64_t events_kept = 1'000'000;
};

class StateStore {
 public:
  // Opens (creating it and its parents if missing) the state directory: locks it, migrates the
  // database to this build's schema, marks open rounds abandoned (interrupted) in one
  // transaction, deletes unreferenced files and checks referenced ones (see open_report()).
  static StateStore open(const std::filesystem::path& state_directory, OpenOptions options = {});
  StateStore(StateStore&&) noexcept;
  StateStore& operator=(StateStore&&) noexcept;
  ~StateStore();

  const OpenReport& open_report() const;
  const std::filesystem::path& directory() const;
  // The schema version the database is at.
  int64_t schema_version() const;

  // Refuses (Conflict) an id or public key already registered, naming the device holding it.
  Device register_device(const federated::DeviceId& id, std::string_view public_key,
                         const nlohmann::json& metadata);
  std::optional<Device> device(std::string_view id) const;
  std::optional<Device> find_device_by_key(std::string_view public_key) const;
  // Moves each device's last_seen forward to the time given (Unix ms; never back), in one
  // transaction; unknown devices are skipped. Returns how many rows changed.
  uint64_t record_last_seen(const std::map<federated::DeviceId, int64_t>& seen_unix_ms);
  std::vector<Device> list_devices() const;  // by id

  // Stores the task with `initial_model` as version 0 and the strategy's initial state.
  // Refuses (Conflict) an existing id, (InvalidArgument) a bad id, model or strategy.
  TaskRecord create_task(const TaskDefinition& definition, const federated::Model& initial_model);
  std::optional<TaskRecord> task(std::string_view id) const;
  // From Running to any other state; Conflict when the task is not running or a round is open
  // (close it with RoundResult::task_end instead).
  void set_task_state(std::string_view id, TaskState state, std::string_view reason);
  std::vector<TaskRecord> list_tasks() const;  // in creation order

  // Refuses (Conflict) when the task is not running, a round is open, the round number is not
  // the next one or the model version not the latest; (NotFound) an unregistered device.
  RoundRecord begin_round(std::string_view task_id, const RoundStart& start);
  // Closes the open round `round_number` in ONE transaction: the round's state and device
  // outcomes, for a completed round the new model version and strategy state (files written
  // durably first), and the task's end if given. Nothing is changed when it throws.
  RoundRecord close_round(std::string_view task_id, uint64_t round_number, const RoundResult& result);
  std::optional<RoundRecord> round(std::string_view task_id, uint64_t round_number) const;
  std::optional<RoundRecord> last_committed_round(std::string_view task_id) const;
  std::vector<RoundRecord> list_rounds(std::string_view task_id) const;  // by number

  std::vector<ModelVersionRecord> list_model_versions(std::string_view task_id) const;  // by version
  uint64_t latest_model_version(std::string_view task_id) const;
  // Reads the file, verifies its size and hash against the database and decodes it strictly;
  // refuses (CorruptFile naming it) anything else. NotFound for an unknown version.
  federated::Model load_model(std::string_view task_id, uint64_t version) const;
  federated::StrategyState load_strategy_state(std::string_view task_id, uint64_t version) const;

  ResumePoint resume_point(std::string_view task_id) const;

  // Remembers (key_id, nonce) as used at timestamp_ms; false when it was already used. key_id is
  // whoever signed (a device id, an administrator key id, empty for Register), so it is not
  // tied to the devices table.
  bool record_nonce(std::string_view key_id, std::string_view nonce, int64_t timestamp_ms);
  // record_nonce for each use in one transaction (one sync to disk); whether each was fresh, in
  // order (a nonce used twice in the batch is fresh the first time only). Checks every use
  // (nonce_problem) before it writes anything.
  struct NonceUse {
    std::string key_id;
    std::string nonce;
    int64_t timestamp_ms = 0;
  };
  std::vector<bool> record_nonces(const std::vector<NonceUse>& uses);
  // Why record_nonce would refuse this key id and nonce (their sizes), if it would.
  static std::optional<std::string> nonce_problem(std::string_view key_id, std::string_view nonce);
  // Forgets nonces with timestamp_ms < older_than_ms (once outside the freshness window a
  // replay is refused by its timestamp); returns how many.
  uint64_t prune_nonces(int64_t older_than_ms);

  // Stores events in one transaction; Conflict when a sequence is not above every stored one.
  void append_events(const std::vector<StoredEvent>& events);
  // Stored events (the latest OpenOptions::events_kept of them) whose sequence is above `after` (of `task_id`
  // only, unless empty), by sequence, at most `limit` of them.
  std::vector<StoredEvent> events_after(uint64_t after, std::string_view task_id, size_t limit) const;
  // The highest stored sequence (0 before any event).
  uint64_t latest_event_sequence() const;

  // Hashes every referenced file now; the problems found (empty when all are intact).
  std::vector<FileProblem> verify_files() const;

 private:
  struct Impl;
  explicit StateStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tn::server
