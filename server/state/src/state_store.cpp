#include "server/state_store.h"

#include <sodium.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <utility>

#include "durable_files.h"
#include "federated/errors.h"
#include "schema.h"
#include "server/safetensors.h"
#include "sqlite.h"

namespace tn::server {

namespace fs = std::filesystem;
using detail::Blob;
using detail::Database;
using detail::Statement;
using detail::Transaction;

namespace {

constexpr const char* kDatabaseFile = "state.sqlite3";
constexpr const char* kModelsDirectory = "models";
constexpr const char* kStrategyStatesDirectory = "strategy_states";
constexpr size_t kPublicKeyBytes = 32;
constexpr size_t kMaxIdBytes = 128;
constexpr size_t kMaxKeyIdBytes = 256;
constexpr size_t kMaxNonceBytes = 1024;
constexpr const char* kInterruptedReason = "interrupted: the coordinator stopped while the round was open";

// Task ids name directories and device ids appear in logs and JSON: both are kept to characters
// that need no quoting anywhere.
void check_identifier(std::string_view kind, std::string_view id) {
  const auto allowed = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  };
  if (id.empty() || id.size() > kMaxIdBytes || id == "." || id == ".." ||
      !std::all_of(id.begin(), id.end(), allowed))
    throw InvalidArgument(std::string(kind) + " id '" + std::string(id) + "' is not 1 to " +
                          std::to_string(kMaxIdBytes) + " of [A-Za-z0-9._-] (and not '.' or '..')");
}

std::string dump_json(const nlohmann::json& value, const std::string& what) {
  try {
    return value.dump();
  } catch (const nlohmann::json::exception& error) {
    throw InvalidArgument(what + " cannot be stored as JSON: " + error.what());
  }
}

nlohmann::json parse_stored_json(const std::string& text, const std::string& what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    throw DatabaseError(what + " holds invalid JSON: " + error.what());
  }
}

TaskState parse_task_state(const std::string& name) {
  for (TaskState state : {TaskState::Running, TaskState::Stopped, TaskState::Failed, TaskState::Completed})
    if (name == task_state_name(state)) return state;
  throw DatabaseError("unknown task state '" + name + "' in the state database");
}

RoundState parse_round_state(const std::string& name) {
  for (RoundState state : {RoundState::Open, RoundState::Completed, RoundState::Abandoned})
    if (name == round_state_name(state)) return state;
  throw DatabaseError("unknown round state '" + name + "' in the state database");
}

std::string round_label(std::string_view task_id, uint64_t round_number) {
  return "round " + std::to_string(round_number) + " of task '" + std::string(task_id) + "'";
}

Device read_device(const Statement& row) {
  return {row.text(0), row.blob(1), parse_stored_json(row.text(2), "device " + row.text(0) + " metadata"),
          row.integer(3), row.integer(4)};
}

constexpr const char* kDeviceColumns = "id, public_key, metadata_json, registered_at_ms, last_seen_ms";

TaskRecord read_task(const Statement& row) {
  TaskRecord task;
  task.definition.id = row.text(0);
  task.definition.strategy = row.text(1);
  task.definition.strategy_params =
      parse_stored_json(row.text(2), "task " + task.definition.id + " strategy params");
  task.definition.round_params =
      parse_stored_json(row.text(3), "task " + task.definition.id + " round params");
  task.definition.rounds_planned = uint64_t(row.integer(4));
  task.state = parse_task_state(row.text(5));
  task.state_reason = row.text(6);
  task.created_at_ms = row.integer(7);
  return task;
}

constexpr const char* kTaskColumns =
    "id, strategy, strategy_params_json, round_params_json, rounds_planned, state, state_reason, "
    "created_at_ms";

ModelVersionRecord read_model_version(const Statement& row) {
  return {row.text(0),   uint64_t(row.integer(1)), row.text(2), uint64_t(row.integer(3)), row.text(4),
          row.integer(5)};
}

constexpr const char* kModelVersionColumns =
    "task_id, version, blake2b_256, byte_size, file_path, created_at_ms";

constexpr const char* kRoundColumns =
    "task_id, round_number, state, started_at_ms, deadline_ms, closed_at_ms, model_version_in, "
    "model_version_out, abandon_reason, interrupted";

// Deletes the files of a write whose transaction never got to commit, so a failed call leaves
// nothing behind. Once COMMIT has been attempted the files stay: if the commit did happen they
// are referenced, and if not, the next open() deletes them.
class UncommittedFiles {
 public:
  UncommittedFiles() = default;
  UncommittedFiles(const UncommittedFiles&) = delete;
  UncommittedFiles& operator=(const UncommittedFiles&) = delete;
  ~UncommittedFiles() {
    std::error_code ignored;  // best effort: whatever stays is an orphan open() removes
    for (const fs::path& path : paths_) fs::remove(path, ignored);
  }
  void add(fs::path path) { paths_.push_back(std::move(path)); }
  void keep() { paths_.clear(); }

 private:
  std::vector<fs::path> paths_;
};

struct StoredFile {
  std::string relative_path;
  std::string blake2b_256_hex;
  uint64_t byte_size = 0;
};

// Contributors and missing must split the selection exactly: every selected device in one of them.
void check_partition(const std::string& label, const std::vector<federated::DeviceId>& selected,
                     const RoundResult& result) {
  const std::set<federated::DeviceId> selection(selected.begin(), selected.end());
  std::set<federated::DeviceId> placed;
  for (const auto& [list, list_name] :
       {std::pair{&result.contributors, "contributors"}, std::pair{&result.missing, "missing"}})
    for (const federated::DeviceId& id : *list) {
      if (!selection.contains(id))
        throw InvalidArgument(label + ": device '" + id + "' among the " + list_name + " was not selected");
      if (!placed.insert(id).second)
        throw InvalidArgument(label + ": device '" + id + "' is listed twice among contributors and missing");
    }
  for (const federated::DeviceId& id : selection)
    if (!placed.contains(id))
      throw InvalidArgument(label + ": selected device '" + id +
                            "' is neither among the contributors nor missing");
}

}  // namespace

const char* task_state_name(TaskState state) {
  switch (state) {
    case TaskState::Running:
      return "running";
    case TaskState::Stopped:
      return "stopped";
    case TaskState::Failed:
      return "failed";
    case TaskState::Completed:
      return "completed";
  }
  throw InvalidArgument("task state code " + std::to_string(int(state)) + " is not a TaskState");
}

const char* round_state_name(RoundState state) {
  switch (state) {
    case RoundState::Open:
      return "open";
    case RoundState::Completed:
      return "completed";
    case RoundState::Abandoned:
      return "abandoned";
  }
  throw InvalidArgument("round state code " + std::to_string(int(state)) + " is not a RoundState");
}

federated::TaskCheckpoint ResumePoint::checkpoint() const {
  nlohmann::json meta = {{"task", task.definition.id},
                         {"model_version", model_version},
                         {"next_round_id", next_round_number},
                         {"abandoned_in_a_row", abandoned_in_a_row},
                         {"failure", task.state == TaskState::Failed ? task.state_reason : std::string()}};
  return {std::move(meta), model, strategy_state};
}

struct StateStore::Impl {
  Impl(fs::path state_directory, OpenOptions open_options)
      : directory(std::move(state_directory)),
        options(std::move(open_options)),
        lock(directory),
        database((directory / kDatabaseFile).string()) {}

  fs::path directory;
  OpenOptions options;
  detail::DirectoryLock lock;  // taken before the database is opened, released after it is closed
  Database database;
  OpenReport report;

  int64_t now() const {
    if (options.now_unix_ms) return options.now_unix_ms();
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  void configure_database() {
    // WAL: a commit appends to the log and never rewrites the database in place, so a kill at any
    // instant leaves the last committed state readable; readers do not block the writer.
    if (database.query_text("PRAGMA journal_mode = WAL") != "wal")
      throw DatabaseError("state database " + database.path() + " cannot use WAL journaling");
    // FULL: the WAL is fsynced at every commit. With NORMAL a commit survives kill -9 (it is in
    // the OS cache) but not a power loss, which could undo a round whose model version devices
    // were already told about. A commit that has returned is what the coordinator announces.
    database.execute("PRAGMA synchronous = FULL");
    database.execute("PRAGMA foreign_keys = ON");
    if (database.query_text("PRAGMA foreign_keys") != "1" || database.query_text("PRAGMA synchronous") != "2")
      throw DatabaseError("state database " + database.path() +
                          ": SQLite did not accept foreign_keys = ON and synchronous = FULL");
  }

  void forget_old_events() {
    // The latest row stays whatever events_kept is, so the numbering goes on from it.
    Statement(database, "DELETE FROM events WHERE sequence <= (SELECT max(sequence) FROM events) - ?")
        .bind(std::max<uint64_t>(options.events_kept, 1))
        .run();
  }

  void abandon_interrupted_rounds() {
    Transaction transaction(database);
    Statement open_rounds(database, "SELECT task_id, round_number FROM rounds WHERE state = 'open'");
    while (open_rounds.step())
      report.interrupted_rounds.emplace_back(open_rounds.text(0), uint64_t(open_rounds.integer(1)));
    Statement(database,
              "UPDATE rounds SET state = 'abandoned', closed_at_ms = ?, interrupted = 1, abandon_reason = ? "
              "WHERE state = 'open'")
        .bind(now(), kInterruptedReason)
        .run();
    transaction.commit();
  }

  struct ReferencedFile {
    std::string relative_path;
    uint64_t byte_size;
    std::string blake2b_256_hex;
  };

  std::vector<ReferencedFile> referenced_files() const {
    Statement rows(database,
                   "SELECT file_path, byte_size, blake2b_256 FROM model_versions UNION ALL "
                   "SELECT file_path, byte_size, blake2b_256 FROM strategy_states ORDER BY file_path");
    std::vector<ReferencedFile> files;
    while (rows.step()) files.push_back({rows.text(0), uint64_t(rows.integer(1)), rows.text(2)});
    return files;
  }

  // Regular files under models/ and strategy_states/ that no committed row names were left by a
  // write the process did not live to commit (or by a failed commit): deleted. A task directory
  // of a task that was never committed goes too once empty.
  void remove_unreferenced_files() {
    std::set<fs::path> referenced;
    for (const ReferencedFile& file : referenced_files()) referenced.insert(directory / file.relative_path);
    std::set<std::string> task_ids;
    Statement tasks(database, "SELECT id FROM tasks");
    while (tasks.step()) task_ids.insert(tasks.text(0));
    for (const char* kind : {kModelsDirectory, kStrategyStatesDirectory}) {
      const fs::path root = directory / kind;
      detail::create_directories_durably(root);
      for (const fs::directory_entry& task_directory : fs::directory_iterator(root)) {
        if (!task_directory.is_directory() || task_directory.is_symlink()) continue;
        std::vector<fs::path> unreferenced;
        bool keeps_files = false;
        for (const fs::directory_entry& file : fs::directory_iterator(task_directory.path())) {
          if (file.is_regular_file() && !file.is_symlink() && !referenced.contains(file.path()))
            unreferenced.push_back(file.path());
          else
            keeps_files = true;
        }
        for (const fs::path& path : unreferenced) {
          fs::remove(path);
          report.removed_files.push_back(path.string());
        }
        if (!keeps_files && !task_ids.contains(task_directory.path().filename().string()))
          fs::remove(task_directory.path());
      }
    }
  }

  // Why the file does not match its row, or nothing when it does.
  std::optional<std::string> file_problem(const ReferencedFile& file, OpenOptions::FileCheck check) const {
    if (check == OpenOptions::FileCheck::Sizes) {
      std::error_code error;
      const uintmax_t size = fs::file_size(directory / file.relative_path, error);
      if (error) return "cannot be examined: " + error.message();
      if (size != file.byte_size)
        return "is " + std::to_string(size) + " bytes, the database recorded " +
               std::to_string(file.byte_size);
      return std::nullopt;
    }
    try {
      (void)read_verified(file.relative_path, file.byte_size, file.blake2b_256_hex);
      return std::nullopt;
    } catch (const CorruptFile& error) {
      return error.problem;
    }
  }

  std::vector<FileProblem> check_files(OpenOptions::FileCheck check) const {
    std::vector<FileProblem> problems;
    for (const ReferencedFile& file : referenced_files())
      if (std::optional<std::string> problem = file_problem(file, check))
        problems.push_back({(directory / file.relative_path).string(), *problem});
    return problems;
  }

  std::shared_ptr<const std::vector<std::byte>> read_verified(const std::string& relative_path,
                                                              uint64_t byte_size,
                                                              const std::string& blake2b_256_hex) const {
    const fs::path path = directory / relative_path;
    std::shared_ptr<const std::vector<std::byte>> bytes = detail::read_file(path, byte_size);
    const std::string actual = detail::blake2b_256_hex(*bytes);
    if (actual != blake2b_256_hex)
      throw CorruptFile(path.string(),
                        "BLAKE2b-256 is " + actual + ", the database recorded " + blake2b_256_hex);
    return bytes;
  }

  // `kind`/<task>/<version>.safetensors, made durable before the caller's transaction commits.
  StoredFile write_tensors(const char* kind, std::string_view task_id, uint64_t version,
                           const federated::Model& tensors, UncommittedFiles& uncommitted) {
    const std::string header = safetensors_header(tensors);  // refuses a bad model before any file exists
    std::vector<std::span<const std::byte>> pieces{std::as_bytes(std::span(header))};
    for (const federated::NamedTensor& tensor : tensors.tensors)
      pieces.emplace_back(tensor.data.get(), tensor.nbytes);
    const fs::path relative_directory = fs::path(kind) / std::string(task_id);
    const std::string name = std::to_string(version) + ".safetensors";
    detail::create_directories_durably(directory / relative_directory);
    uncommitted.add(directory / relative_directory / name);
    const detail::WrittenFile written =
        detail::write_file_durably(directory / relative_directory, name, pieces);
    return {(relative_directory / name).string(), written.blake2b_256_hex, written.byte_size};
  }

  std::optional<TaskRecord> find_task(std::string_view id) const {
    Statement row(database, std::string("SELECT ") + kTaskColumns + " FROM tasks WHERE id = ?");
    row.bind(id);
    if (!row.step()) return std::nullopt;
    return read_task(row);
  }

  TaskRecord require_task(std::string_view id) const {
    std::optional<TaskRecord> task = find_task(id);
    if (!task) throw NotFound("task '" + std::string(id) + "' does not exist");
    return *task;
  }

  std::optional<uint64_t> open_round(std::string_view task_id) const {
    Statement row(database, "SELECT round_number FROM rounds WHERE task_id = ? AND state = 'open'");
    row.bind(task_id);
    if (!row.step()) return std::nullopt;
    return uint64_t(row.integer(0));
  }

  uint64_t next_round_number(std::string_view task_id) const {
    Statement row(database, "SELECT coalesce(max(round_number), 0) + 1 FROM rounds WHERE task_id = ?");
    row.bind(task_id);
    row.step();
    return uint64_t(row.integer(0));
  }

  uint64_t latest_version(std::string_view task_id) const {
    Statement row(database, "SELECT max(version) FROM model_versions WHERE task_id = ?");
    row.bind(task_id);
    row.step();
    const std::optional<int64_t> version = row.optional_integer(0);
    if (!version) {
      require_task(task_id);
      throw DatabaseError("task '" + std::string(task_id) + "' has no model version in the state database");
    }
    return uint64_t(*version);
  }

  RoundRecord read_round(const Statement& row) const {
    RoundRecord round;
    round.task_id = row.text(0);
    round.round_number = uint64_t(row.integer(1));
    round.state = parse_round_state(row.text(2));
    round.started_at_ms = row.integer(3);
    round.deadline_ms = row.integer(4);
    round.closed_at_ms = row.optional_integer(5);
    round.model_version_in = uint64_t(row.integer(6));
    if (std::optional<int64_t> out = row.optional_integer(7)) round.model_version_out = uint64_t(*out);
    round.abandon_reason = row.text(8);
    round.interrupted = row.integer(9) != 0;
    Statement devices(database,
                      "SELECT device_id, outcome FROM round_devices WHERE task_id = ? AND round_number = ? "
                      "ORDER BY device_id");
    devices.bind(round.task_id, round.round_number);
    while (devices.step()) {
      round.selected.push_back(devices.text(0));
      const std::string outcome = devices.text(1);
      if (outcome == "contributed") round.contributors.push_back(devices.text(0));
      if (outcome == "missing") round.missing.push_back(devices.text(0));
    }
    return round;
  }

  template <typename... Values>
  std::vector<RoundRecord> select_rounds(const std::string& condition, const Values&... values) const {
    Statement rows(database, std::string("SELECT ") + kRoundColumns + " FROM rounds WHERE " + condition);
    rows.bind(values...);
    std::vector<RoundRecord> rounds;
    while (rows.step()) rounds.push_back(read_round(rows));
    return rounds;
  }

  std::optional<RoundRecord> find_round(std::string_view task_id, uint64_t round_number) const {
    std::vector<RoundRecord> rounds =
        select_rounds("task_id = ? AND round_number = ?", task_id, round_number);
    if (rounds.empty()) return std::nullopt;
    return rounds.front();
  }

  std::optional<ModelVersionRecord> find_model_version(std::string_view task_id, uint64_t version) const {
    Statement row(database, std::string("SELECT ") + kModelVersionColumns +
                                " FROM model_versions WHERE task_id = ? AND version = ?");
    row.bind(task_id, version);
    if (!row.step()) return std::nullopt;
    return read_model_version(row);
  }
};

StateStore::StateStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
StateStore::StateStore(StateStore&&) noexcept = default;
StateStore& StateStore::operator=(StateStore&&) noexcept = default;
StateStore::~StateStore() = default;

StateStore StateStore::open(const fs::path& state_directory, OpenOptions options) {
  if (sodium_init() < 0) throw StateError("libsodium could not be initialized");
  fs::path directory = fs::absolute(state_directory).lexically_normal();
  if (!directory.has_filename()) directory = directory.parent_path();  // "dir/" names "dir"
  detail::create_directories_durably(directory);
  auto impl = std::make_unique<Impl>(directory, std::move(options));
  impl->configure_database();
  detail::migrate(impl->database, impl->now());
  // A database file created just now must not vanish from its directory with a power loss.
  detail::fsync_directory(directory);
  impl->abandon_interrupted_rounds();
  impl->forget_old_events();
  impl->remove_unreferenced_files();
  impl->report.damaged_files = impl->check_files(impl->options.file_check);
  return StateStore(std::move(impl));
}

const OpenReport& StateStore::open_report() const { return impl_->report; }

const fs::path& StateStore::directory() const { return impl_->directory; }

int64_t StateStore::schema_version() const { return detail::schema_version(impl_->database); }

Device StateStore::register_device(const federated::DeviceId& id, std::string_view public_key,
                                   const nlohmann::json& metadata) {
  check_identifier("device", id);
  if (public_key.size() != kPublicKeyBytes)
    throw InvalidArgument("device '" + id + "': the public key is " + std::to_string(public_key.size()) +
                          " bytes, an Ed25519 public key is " + std::to_string(kPublicKeyBytes));
  const std::string metadata_json = dump_json(metadata, "device '" + id + "' metadata");
  Transaction transaction(impl_->database);
  if (device(id)) throw Conflict("device '" + id + "' is already registered");
  if (std::optional<Device> holder = find_device_by_key(public_key))
    throw Conflict("device '" + id + "': its public key is already registered to device '" + holder->id +
                   "'");
  const int64_t now = impl_->now();
  Statement(impl_->database,
            "INSERT INTO devices (id, public_key, metadata_json, registered_at_ms, last_seen_ms) "
            "VALUES (?, ?, ?, ?, ?)")
      .bind(id, Blob{public_key}, metadata_json, now, now)
      .run();
  transaction.commit();
  return {id, std::string(public_key), metadata, now, now};
}

std::optional<Device> StateStore::device(std::string_view id) const {
  Statement row(impl_->database, std::string("SELECT ") + kDeviceColumns + " FROM devices WHERE id = ?");
  row.bind(id);
  if (!row.step()) return std::nullopt;
  return read_device(row);
}

std::optional<Device> StateStore::find_device_by_key(std::string_view public_key) const {
  Statement row(impl_->database,
                std::string("SELECT ") + kDeviceColumns + " FROM devices WHERE public_key = ?");
  row.bind(Blob{public_key});
  if (!row.step()) return std::nullopt;
  return read_device(row);
}

uint64_t StateStore::record_last_seen(const std::map<federated::DeviceId, int64_t>& seen_unix_ms) {
  uint64_t changed = 0;
  Transaction transaction(impl_->database);
  for (const auto& [id, seen] : seen_unix_ms) {
    Statement(impl_->database, "UPDATE devices SET last_seen_ms = ? WHERE id = ? AND last_seen_ms < ?")
        .bind(seen, id, seen)
        .run();
    changed += uint64_t(impl_->database.changes());
  }
  transaction.commit();
  return changed;
}

std::vector<Device> StateStore::list_devices() const {
  Statement rows(impl_->database, std::string("SELECT ") + kDeviceColumns + " FROM devices ORDER BY id");
  std::vector<Device> devices;
  while (rows.step()) devices.push_back(read_device(rows));
  return devices;
}

TaskRecord StateStore::create_task(const TaskDefinition& definition, const federated::Model& initial_model) {
  check_identifier("task", definition.id);
  const std::string label = "task '" + definition.id + "'";
  federated::StrategyState initial_state;
  try {
    initial_state = federated::make_strategy(definition.strategy, definition.strategy_params)->export_state();
  } catch (const federated::Refused& error) {
    throw InvalidArgument(label + ": " + error.what());
  }
  const std::string strategy_params_json = dump_json(definition.strategy_params, label + " strategy params");
  const std::string round_params_json = dump_json(definition.round_params, label + " round params");
  Impl& state = *impl_;
  Transaction transaction(state.database);
  if (state.find_task(definition.id)) throw Conflict(label + " already exists");
  const int64_t now = state.now();
  UncommittedFiles uncommitted;
  const StoredFile model =
      state.write_tensors(kModelsDirectory, definition.id, 0, initial_model, uncommitted);
  const StoredFile strategy =
      state.write_tensors(kStrategyStatesDirectory, definition.id, 0, initial_state.tensors, uncommitted);
  Statement(state.database,
            std::string("INSERT INTO tasks (") + kTaskColumns + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
      .bind(definition.id, definition.strategy, strategy_params_json, round_params_json,
            definition.rounds_planned, task_state_name(TaskState::Running), "", now)
      .run();
  Statement(state.database, std::string("INSERT INTO model_versions (") + kModelVersionColumns +
                                ") VALUES (?, 0, ?, ?, ?, ?)")
      .bind(definition.id, model.blake2b_256_hex, model.byte_size, model.relative_path, now)
      .run();
  Statement(state.database,
            "INSERT INTO strategy_states (task_id, model_version, round_number, meta_json, blake2b_256, "
            "byte_size, file_path, created_at_ms) VALUES (?, 0, NULL, ?, ?, ?, ?, ?)")
      .bind(definition.id, dump_json(initial_state.meta, label + " strategy state"), strategy.blake2b_256_hex,
            strategy.byte_size, strategy.relative_path, now)
      .run();
  uncommitted.keep();
  transaction.commit();
  return {definition, TaskState::Running, "", now};
}

std::optional<TaskRecord> StateStore::task(std::string_view id) const { return impl_->find_task(id); }

void StateStore::set_task_state(std::string_view id, TaskState state, std::string_view reason) {
  const std::string label = "task '" + std::string(id) + "'";
  if (state == TaskState::Running) throw InvalidArgument(label + ": a task cannot be set back to running");
  Transaction transaction(impl_->database);
  const TaskRecord task = impl_->require_task(id);
  if (task.state != TaskState::Running)
    throw Conflict(label + " is " + task_state_name(task.state) + ", not running");
  if (std::optional<uint64_t> open = impl_->open_round(id))
    throw Conflict(label + ": round " + std::to_string(*open) +
                   " is open; close it with RoundResult::task_end to end the task with it");
  Statement(impl_->database, "UPDATE tasks SET state = ?, state_reason = ? WHERE id = ?")
      .bind(task_state_name(state), reason, id)
      .run();
  transaction.commit();
}

std::vector<TaskRecord> StateStore::list_tasks() const {
  Statement rows(impl_->database,
                 std::string("SELECT ") + kTaskColumns + " FROM tasks ORDER BY created_at_ms, rowid");
  std::vector<TaskRecord> tasks;
  while (rows.step()) tasks.push_back(read_task(rows));
  return tasks;
}

RoundRecord StateStore::begin_round(std::string_view task_id, const RoundStart& start) {
  Impl& state = *impl_;
  const std::string label = round_label(task_id, start.round_number);
  std::vector<federated::DeviceId> selected = start.selected;
  std::sort(selected.begin(), selected.end());
  if (selected.empty()) throw InvalidArgument(label + ": no device selected");
  if (auto repeated = std::adjacent_find(selected.begin(), selected.end()); repeated != selected.end())
    throw InvalidArgument(label + ": device '" + *repeated + "' is selected twice");
  Transaction transaction(state.database);
  const TaskRecord task = state.require_task(task_id);
  if (task.state != TaskState::Running)
    throw Conflict(label + ": the task is " + task_state_name(task.state) + ", not running");
  if (std::optional<uint64_t> open = state.open_round(task_id))
    throw Conflict(label + ": round " + std::to_string(*open) + " is still open");
  if (const uint64_t next = state.next_round_number(task_id); start.round_number != next)
    throw Conflict(label + ": the task's next round number is " + std::to_string(next));
  if (const uint64_t latest = state.latest_version(task_id); start.model_version_in != latest)
    throw Conflict(label + ": it trains model version " + std::to_string(start.model_version_in) +
                   ", the task's latest is " + std::to_string(latest));
  for (const federated::DeviceId& id : selected)
    if (!device(id)) throw NotFound(label + ": selected device '" + id + "' is not registered");
  const int64_t now = state.now();
  Statement(state.database,
            "INSERT INTO rounds (task_id, round_number, state, started_at_ms, deadline_ms, closed_at_ms, "
            "model_version_in, model_version_out, abandon_reason, interrupted) "
            "VALUES (?, ?, 'open', ?, ?, NULL, ?, NULL, '', 0)")
      .bind(task_id, start.round_number, now, start.deadline_ms, start.model_version_in)
      .run();
  Statement insert_device(state.database,
                          "INSERT INTO round_devices (task_id, round_number, device_id, outcome) "
                          "VALUES (?, ?, ?, 'selected')");
  for (const federated::DeviceId& id : selected) {
    insert_device.bind(task_id, start.round_number, id).run();
  }
  transaction.commit();
  return *state.find_round(task_id, start.round_number);
}

RoundRecord StateStore::close_round(std::string_view task_id, uint64_t round_number,
                                    const RoundResult& result) {
  Impl& state = *impl_;
  const std::string label = round_label(task_id, round_number);
  const bool completed = result.outcome == RoundState::Completed;
  if (!completed && result.outcome != RoundState::Abandoned)
    throw InvalidArgument(label + ": a round closes completed or abandoned, not " +
                          round_state_name(result.outcome));
  if (completed && (!result.new_model || !result.strategy_state))
    throw InvalidArgument(label + ": a completed round needs the new model and the strategy state");
  if (completed && result.contributors.empty())
    throw InvalidArgument(label + ": a completed round needs at least one contributor");
  if (completed && !result.abandon_reason.empty())
    throw InvalidArgument(label + ": a completed round has no abandon reason");
  if (!completed && (result.new_model || result.strategy_state))
    throw InvalidArgument(label + ": an abandoned round makes no model version and no strategy state");
  if (result.task_end && result.task_end->state == TaskState::Running)
    throw InvalidArgument(label + ": task_end must leave the task stopped, failed or completed");
  Transaction transaction(state.database);
  const TaskRecord task = state.require_task(task_id);
  const std::optional<RoundRecord> round = state.find_round(task_id, round_number);
  if (!round) throw NotFound(label + " does not exist");
  if (round->state != RoundState::Open)
    throw Conflict(label + " is already " + round_state_name(round->state));
  check_partition(label, round->selected, result);
  std::optional<uint64_t> version_out;
  UncommittedFiles uncommitted;
  const int64_t now = state.now();
  if (completed) {
    const nlohmann::json& meta = result.strategy_state->meta;
    const std::string meta_json = dump_json(meta, label + " strategy state");
    if (!meta.is_object() || !meta.contains("strategy") || meta["strategy"] != task.definition.strategy)
      throw InvalidArgument(label + ": the strategy state " + meta_json +
                            " is not one of the task's strategy '" + task.definition.strategy + "'");
    version_out = round->model_version_in + 1;
    const StoredFile model =
        state.write_tensors(kModelsDirectory, task_id, *version_out, *result.new_model, uncommitted);
    const StoredFile strategy = state.write_tensors(kStrategyStatesDirectory, task_id, *version_out,
                                                    result.strategy_state->tensors, uncommitted);
    Statement(state.database, std::string("INSERT INTO model_versions (") + kModelVersionColumns +
                                  ") VALUES (?, ?, ?, ?, ?, ?)")
        .bind(task_id, *version_out, model.blake2b_256_hex, model.byte_size, model.relative_path, now)
        .run();
    Statement(state.database,
              "INSERT INTO strategy_states (task_id, model_version, round_number, meta_json, blake2b_256, "
              "byte_size, file_path, created_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
        .bind(task_id, *version_out, round_number, meta_json, strategy.blake2b_256_hex, strategy.byte_size,
              strategy.relative_path, now)
        .run();
  }
  Statement(state.database,
            "UPDATE rounds SET state = ?, closed_at_ms = ?, model_version_out = ?, abandon_reason = ? "
            "WHERE task_id = ? AND round_number = ?")
      .bind(round_state_name(result.outcome), now, version_out, result.abandon_reason, task_id, round_number)
      .run();
  Statement mark_device(
      state.database,
      "UPDATE round_devices SET outcome = ? WHERE task_id = ? AND round_number = ? AND device_id = ?");
  for (const federated::DeviceId& id : result.contributors)
    mark_device.bind("contributed", task_id, round_number, id).run();
  for (const federated::DeviceId& id : result.missing)
    mark_device.bind("missing", task_id, round_number, id).run();
  if (result.task_end)
    Statement(state.database, "UPDATE tasks SET state = ?, state_reason = ? WHERE id = ?")
        .bind(task_state_name(result.task_end->state), result.task_end->reason, task_id)
        .run();
  uncommitted.keep();
  transaction.commit();
  return *state.find_round(task_id, round_number);
}

std::optional<RoundRecord> StateStore::round(std::string_view task_id, uint64_t round_number) const {
  return impl_->find_round(task_id, round_number);
}

std::optional<RoundRecord> StateStore::last_committed_round(std::string_view task_id) const {
  impl_->require_task(task_id);
  std::vector<RoundRecord> rounds =
      impl_->select_rounds("task_id = ? AND state <> 'open' ORDER BY round_number DESC LIMIT 1", task_id);
  if (rounds.empty()) return std::nullopt;
  return rounds.front();
}

std::vector<RoundRecord> StateStore::list_rounds(std::string_view task_id) const {
  impl_->require_task(task_id);
  return impl_->select_rounds("task_id = ? ORDER BY round_number", task_id);
}

std::vector<ModelVersionRecord> StateStore::list_model_versions(std::string_view task_id) const {
  impl_->require_task(task_id);
  Statement rows(impl_->database, std::string("SELECT ") + kModelVersionColumns +
                                      " FROM model_versions WHERE task_id = ? ORDER BY version");
  rows.bind(task_id);
  std::vector<ModelVersionRecord> versions;
  while (rows.step()) versions.push_back(read_model_version(rows));
  return versions;
}

uint64_t StateStore::latest_model_version(std::string_view task_id) const {
  return impl_->latest_version(task_id);
}

federated::Model StateStore::load_model(std::string_view task_id, uint64_t version) const {
  const std::optional<ModelVersionRecord> record = impl_->find_model_version(task_id, version);
  if (!record) {
    impl_->require_task(task_id);
    throw NotFound("task '" + std::string(task_id) + "' has no model version " + std::to_string(version));
  }
  auto bytes = impl_->read_verified(record->file_path, record->byte_size, record->blake2b_256_hex);
  return decode_safetensors(std::move(bytes), (impl_->directory / record->file_path).string()).model;
}

federated::StrategyState StateStore::load_strategy_state(std::string_view task_id, uint64_t version) const {
  Statement row(impl_->database,
                "SELECT meta_json, file_path, byte_size, blake2b_256 FROM strategy_states "
                "WHERE task_id = ? AND model_version = ?");
  row.bind(task_id, version);
  if (!row.step()) {
    impl_->require_task(task_id);
    throw NotFound("task '" + std::string(task_id) + "' has no strategy state for model version " +
                   std::to_string(version));
  }
  const std::string path = row.text(1);
  auto bytes = impl_->read_verified(path, uint64_t(row.integer(2)), row.text(3));
  return {parse_stored_json(row.text(0), "the strategy state of " + path),
          decode_safetensors(std::move(bytes), (impl_->directory / path).string()).model};
}

ResumePoint StateStore::resume_point(std::string_view task_id) const {
  ResumePoint point;
  point.task = impl_->require_task(task_id);
  point.model_version = impl_->latest_version(task_id);
  point.model = load_model(task_id, point.model_version);
  point.strategy_state = load_strategy_state(task_id, point.model_version);
  point.last_committed_round = last_committed_round(task_id);
  point.next_round_number = impl_->next_round_number(task_id);
  Statement abandoned(
      impl_->database,
      "SELECT count(*) FROM rounds WHERE task_id = ? AND state = 'abandoned' AND interrupted = 0 "
      "AND model_version_in = ?");
  abandoned.bind(task_id, point.model_version);
  abandoned.step();
  point.abandoned_in_a_row = uint64_t(abandoned.integer(0));
  return point;
}

std::optional<std::string> StateStore::nonce_problem(std::string_view key_id, std::string_view nonce) {
  if (key_id.size() > kMaxKeyIdBytes)
    return "nonce: the key id is " + std::to_string(key_id.size()) + " bytes, over " +
           std::to_string(kMaxKeyIdBytes);
  if (nonce.empty() || nonce.size() > kMaxNonceBytes)
    return "nonce of key '" + std::string(key_id.substr(0, kMaxKeyIdBytes)) +
           "': " + std::to_string(nonce.size()) + " bytes, not 1 to " + std::to_string(kMaxNonceBytes);
  return std::nullopt;
}

bool StateStore::record_nonce(std::string_view key_id, std::string_view nonce, int64_t timestamp_ms) {
  return record_nonces({{std::string(key_id), std::string(nonce), timestamp_ms}}).front();
}

std::vector<bool> StateStore::record_nonces(const std::vector<NonceUse>& uses) {
  for (const NonceUse& use : uses)
    if (auto problem = nonce_problem(use.key_id, use.nonce)) throw InvalidArgument(*problem);
  std::vector<bool> fresh;
  fresh.reserve(uses.size());
  Transaction transaction(impl_->database);
  for (const NonceUse& use : uses) {
    Statement(impl_->database,
              "INSERT OR IGNORE INTO used_nonces (key_id, nonce, timestamp_ms) VALUES (?, ?, ?)")
        .bind(use.key_id, Blob{use.nonce}, use.timestamp_ms)
        .run();
    fresh.push_back(impl_->database.changes() == 1);
  }
  transaction.commit();
  return fresh;
}

uint64_t StateStore::prune_nonces(int64_t older_than_ms) {
  Statement(impl_->database, "DELETE FROM used_nonces WHERE timestamp_ms < ?").bind(older_than_ms).run();
  return uint64_t(impl_->database.changes());
}

void StateStore::append_events(const std::vector<StoredEvent>& events) {
  Transaction transaction(impl_->database);
  uint64_t latest = latest_event_sequence();
  for (const StoredEvent& event : events) {
    if (event.sequence <= latest)
      throw Conflict("event sequence " + std::to_string(event.sequence) + " is not above the stored " +
                     std::to_string(latest));
    Statement(impl_->database,
              "INSERT INTO events (sequence, time_unix_ms, kind, task_id, round_id, device_id, message) "
              "VALUES (?, ?, ?, ?, ?, ?, ?)")
        .bind(event.sequence, event.time_unix_ms, event.kind, event.task_id, event.round_id, event.device_id,
              event.message)
        .run();
    latest = event.sequence;
  }
  transaction.commit();
}

std::vector<StoredEvent> StateStore::events_after(uint64_t after, std::string_view task_id,
                                                  size_t limit) const {
  Statement rows(impl_->database,
                 "SELECT sequence, time_unix_ms, kind, task_id, round_id, device_id, message FROM events "
                 "WHERE sequence > ? AND (? = '' OR task_id = ?) ORDER BY sequence LIMIT ?");
  rows.bind(after, task_id, task_id, uint64_t(limit));
  std::vector<StoredEvent> events;
  while (rows.step())
    events.push_back({uint64_t(rows.integer(0)), rows.integer(1), rows.text(2), rows.text(3),
                      uint64_t(rows.integer(4)), rows.text(5), rows.text(6)});
  return events;
}

uint64_t StateStore::latest_event_sequence() const {
  Statement latest(impl_->database, "SELECT coalesce(max(sequence), 0) FROM events");
  latest.step();
  return uint64_t(latest.integer(0));
}

std::vector<FileProblem> StateStore::verify_files() const {
  return impl_->check_files(OpenOptions::FileCheck::Hashes);
}

}  // namespace tn::server
