// What every store shares: how keys are named in errors and what a timeout means.
#pragma once

#include <string>
#include <vector>

#include "distributed/store.h"

namespace tn::dist {

// 'a', 'b' — the keys an error is about.
std::string quote_keys(const std::vector<std::string>& keys);

// A zero timeout (c10d's kNoTimeout) and any beyond a century mean no limit; capping them
// also keeps the clocks' nanosecond arithmetic from overflowing.
bool unlimited_timeout(Milliseconds timeout);

}  // namespace tn::dist
