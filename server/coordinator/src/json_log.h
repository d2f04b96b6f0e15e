// Structured logs: one JSON object per line on stderr,
//   {"time": "2026-12-01T10:00:00.123Z", "level": "info", "event": "round_completed", ...fields}
// so that log collectors parse them without patterns, whatever a message contains.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace tn::server {

enum class LogLevel { Info, Warning, Error };

// Thread-safe: lines from concurrent callers never interleave.
void log_event(LogLevel level, std::string_view event, nlohmann::json fields = nlohmann::json::object());

}  // namespace tn::server
