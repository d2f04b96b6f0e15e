#include "schema.h"

#include <iterator>
#include <string>

#include "server/state_errors.h"

namespace tn::server::detail {

namespace {

// Migration n is kMigrations[n - 1]. Append only: a released migration is never edited, since
// databases that already applied it would not see the change.
constexpr const char* kMigrations[] = {
    // 1: the initial schema. STRICT tables refuse values of the wrong type; timestamps are Unix
    // milliseconds; hashes are BLAKE2b-256 of the whole file, in hex.
    R"sql(
CREATE TABLE schema_migrations (
  version INTEGER PRIMARY KEY,
  applied_at_ms INTEGER NOT NULL
) STRICT;

CREATE TABLE devices (
  id TEXT PRIMARY KEY,
  public_key BLOB NOT NULL UNIQUE CHECK (length(public_key) = 32),
  metadata_json TEXT NOT NULL CHECK (json_valid(metadata_json)),
  registered_at_ms INTEGER NOT NULL,
  last_seen_ms INTEGER NOT NULL
) STRICT;

CREATE TABLE tasks (
  id TEXT PRIMARY KEY,
  strategy TEXT NOT NULL,
  strategy_params_json TEXT NOT NULL CHECK (json_valid(strategy_params_json)),
  round_params_json TEXT NOT NULL CHECK (json_valid(round_params_json)),
  rounds_planned INTEGER NOT NULL CHECK (rounds_planned >= 0),
  state TEXT NOT NULL CHECK (state IN ('running', 'stopped', 'failed', 'completed')),
  state_reason TEXT NOT NULL,
  created_at_ms INTEGER NOT NULL
) STRICT;

CREATE TABLE model_versions (
  task_id TEXT NOT NULL REFERENCES tasks (id),
  version INTEGER NOT NULL CHECK (version >= 0),
  blake2b_256 TEXT NOT NULL CHECK (length(blake2b_256) = 64),
  byte_size INTEGER NOT NULL CHECK (byte_size >= 8),
  file_path TEXT NOT NULL UNIQUE,
  created_at_ms INTEGER NOT NULL,
  PRIMARY KEY (task_id, version)
) STRICT;

CREATE TABLE rounds (
  task_id TEXT NOT NULL REFERENCES tasks (id),
  round_number INTEGER NOT NULL CHECK (round_number >= 1),
  state TEXT NOT NULL CHECK (state IN ('open', 'completed', 'abandoned')),
  started_at_ms INTEGER NOT NULL,
  deadline_ms INTEGER NOT NULL,
  closed_at_ms INTEGER,
  model_version_in INTEGER NOT NULL,
  model_version_out INTEGER,
  abandon_reason TEXT NOT NULL,
  interrupted INTEGER NOT NULL CHECK (interrupted IN (0, 1)),
  PRIMARY KEY (task_id, round_number),
  FOREIGN KEY (task_id, model_version_in) REFERENCES model_versions (task_id, version),
  FOREIGN KEY (task_id, model_version_out) REFERENCES model_versions (task_id, version),
  CHECK ((state = 'open') = (closed_at_ms IS NULL)),
  CHECK ((state = 'completed') = (model_version_out IS NOT NULL)),
  CHECK (model_version_out IS NULL OR model_version_out = model_version_in + 1)
) STRICT;

-- At most one open round per task, whatever the code above it does.
CREATE UNIQUE INDEX rounds_one_open_per_task ON rounds (task_id) WHERE state = 'open';

-- Selected devices of a round and what became of each: 'selected' while the round is open (and
-- for a round interrupted by a restart, whose outcome is unknown), then 'contributed' or
-- 'missing'. One row per device makes contributors and missing an exact partition of the
-- selection by construction.
CREATE TABLE round_devices (
  task_id TEXT NOT NULL,
  round_number INTEGER NOT NULL,
  device_id TEXT NOT NULL REFERENCES devices (id),
  outcome TEXT NOT NULL CHECK (outcome IN ('selected', 'contributed', 'missing')),
  PRIMARY KEY (task_id, round_number, device_id),
  FOREIGN KEY (task_id, round_number) REFERENCES rounds (task_id, round_number)
) STRICT, WITHOUT ROWID;

-- The strategy's state that goes with each model version: its meta here, its tensors in the
-- file. round_number is the round that made it, NULL for the initial state.
CREATE TABLE strategy_states (
  task_id TEXT NOT NULL,
  model_version INTEGER NOT NULL,
  round_number INTEGER,
  meta_json TEXT NOT NULL CHECK (json_valid(meta_json)),
  blake2b_256 TEXT NOT NULL CHECK (length(blake2b_256) = 64),
  byte_size INTEGER NOT NULL CHECK (byte_size >= 8),
  file_path TEXT NOT NULL UNIQUE,
  created_at_ms INTEGER NOT NULL,
  PRIMARY KEY (task_id, model_version),
  FOREIGN KEY (task_id, model_version) REFERENCES model_versions (task_id, version),
  FOREIGN KEY (task_id, round_number) REFERENCES rounds (task_id, round_number)
) STRICT;

-- Request nonces already seen, per signer, for replay protection.
CREATE TABLE used_nonces (
  key_id TEXT NOT NULL,
  nonce BLOB NOT NULL,
  timestamp_ms INTEGER NOT NULL,
  PRIMARY KEY (key_id, nonce)
) STRICT, WITHOUT ROWID;
CREATE INDEX used_nonces_by_time ON used_nonces (timestamp_ms);
)sql",
    // 2: the coordinator's events (admin.proto's Event), so that their sequence goes on across
    // restarts and a follower can replay from a sequence number. The sequence is the coordinator's
    // own, not SQLite's rowid allocation.
    R"sql(
CREATE TABLE events (
  sequence INTEGER PRIMARY KEY CHECK (sequence >= 1),
  time_unix_ms INTEGER NOT NULL,
  kind TEXT NOT NULL,
  task_id TEXT NOT NULL,
  round_id INTEGER NOT NULL CHECK (round_id >= 0),
  device_id TEXT NOT NULL,
  message TEXT NOT NULL
) STRICT;
-- One task's events in order, for a follower of that task.
CREATE INDEX events_by_task ON events (task_id, sequence);
)sql",
};

constexpr int64_t kLatestVersion = int64_t(std::size(kMigrations));

}  // namespace

int64_t latest_schema_version() { return kLatestVersion; }

int64_t schema_version(Database& database) {
  Statement exists(database,
                   "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'");
  exists.step();
  if (exists.integer(0) == 0) return 0;
  Statement version(database, "SELECT coalesce(max(version), 0) FROM schema_migrations");
  version.step();
  return version.integer(0);
}

void migrate(Database& database, int64_t now_unix_ms) {
  const int64_t current = schema_version(database);
  if (current > kLatestVersion)
    throw StateError("state database " + database.path() + " has schema version " + std::to_string(current) +
                     ", newer than the " + std::to_string(kLatestVersion) + " this build knows");
  for (int64_t version = current + 1; version <= kLatestVersion; ++version) {
    Transaction transaction(database);
    database.execute(kMigrations[version - 1]);
    Statement(database, "INSERT INTO schema_migrations (version, applied_at_ms) VALUES (?, ?)")
        .bind(version, now_unix_ms)
        .run();
    transaction.commit();
  }
}

}  // namespace tn::server::detail
