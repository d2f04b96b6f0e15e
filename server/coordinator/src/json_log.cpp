#include "json_log.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <mutex>

namespace tn::server {

namespace {

std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[64];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900, utc.tm_mon + 1,
                utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, int(millis));
  return text;
}

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::Info:
      return "info";
    case LogLevel::Warning:
      return "warning";
    case LogLevel::Error:
      return "error";
  }
  return "error";
}

}  // namespace

void log_event(LogLevel level, std::string_view event, nlohmann::json fields) {
  // Ordered, so that every line starts with when, how bad and what.
  nlohmann::ordered_json line = {{"time", utc_now()}, {"level", level_name(level)}, {"event", event}};
  if (fields.is_object())
    for (const auto& [key, value] : fields.items()) line[key] = value;
  // Replaces invalid UTF-8 (a device's metadata, a peer's error text) instead of throwing.
  const std::string text = line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  std::cerr << text << '\n' << std::flush;
}

}  // namespace tn::server
