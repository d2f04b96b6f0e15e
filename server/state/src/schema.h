// The state database's schema, as numbered migrations.
#pragma once

#include <cstdint>

#include "sqlite.h"

namespace tn::server::detail {

// The highest migration number this build knows.
int64_t latest_schema_version();

// The highest migration applied to `database`; 0 for a new, empty database.
int64_t schema_version(Database& database);

// Applies every migration above the database's version, each in its own transaction together
// with its row in schema_migrations, so a crash between two leaves a consistent, numbered
// schema. Refuses (StateError) a database from a newer build.
void migrate(Database& database, int64_t now_unix_ms);

}  // namespace tn::server::detail
