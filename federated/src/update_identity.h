// The cheap first part of validate_update, which a round runs before its own membership checks
// so that a replayed or late update is named as such and no stale update is ever scanned. Private.
#pragma once

#include <cstdint>

#include "federated/validation.h"

namespace tn::federated::detail {

// Refuses an empty device id, another round's update and another model version's.
void check_update_identity(const Update& update, uint64_t round_id, uint64_t model_version);

}  // namespace tn::federated::detail
