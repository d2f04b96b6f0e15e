// Checks an update must pass before it counts towards a round.
#pragma once

#include <cstddef>
#include <cstdint>

#include "federated/errors.h"
#include "federated/model.h"

namespace tn::federated {

// What a device sends back after training: its full model (not a delta) trained on
// `model_version` during round `round_id`, and how many examples it trained on.
struct Update {
  DeviceId device_id;
  uint64_t round_id = 0;
  uint64_t model_version = 0;
  int64_t num_examples = 0;
  Model model;
};

struct UpdateLimits {
  size_t max_update_bytes = size_t{4} << 30;
  // Example counts weight the average, so one device claiming a huge count would dominate it.
  int64_t max_examples = int64_t{1} << 31;
};

// Throws UpdateRefused naming the device and what is wrong, checking in this order: round id,
// model version, example count, total bytes (before anything is read), tensor names (repeated,
// missing, unexpected), dtype, shape and byte count of each tensor, then every element of the
// aggregated tensors for NaN or infinity (naming the tensor and the first bad index).
// Membership and duplicates within a round are the Round's to check.
void validate_update(const Update& update, const ModelSpec& spec, uint64_t round_id, uint64_t model_version,
                     const UpdateLimits& limits);

}  // namespace tn::federated
