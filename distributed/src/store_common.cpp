#include "store_common.h"

#include <chrono>

namespace tn::dist {

std::string quote_keys(const std::vector<std::string>& keys) {
  std::string quoted;
  for (const auto& key : keys) {
    if (!quoted.empty()) quoted += ", ";
    quoted += "'" + key + "'";
  }
  return quoted;
}

bool unlimited_timeout(Milliseconds timeout) {
  constexpr Milliseconds kLongestTimeout = std::chrono::hours(24 * 365 * 100);
  return timeout == Milliseconds::zero() || timeout > kLongestTimeout;
}

}  // namespace tn::dist
