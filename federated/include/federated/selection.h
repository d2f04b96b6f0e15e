// Choosing which checked-in devices train in a round.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "federated/model.h"

namespace tn::federated {

struct SelectionConfig {
  double fraction = 1.0;  // of the available devices, in (0, 1]
  size_t min_devices = 1;
  size_t max_devices = SIZE_MAX;
  // Selected = ceil(target * over_selection), so that stragglers do not leave the round short
  // (Bonawitz et al. 2019 select 130% of the target). At least 1.
  double over_selection = 1.0;
};

// Refuses (ParameterRefused) a fraction outside (0, 1], min_devices 0, max below min, and an
// over-selection below 1 or not finite.
void check_selection_config(const SelectionConfig& config);

struct Selection {
  std::vector<DeviceId> devices;  // sorted; empty when too few were available
  size_t target = 0;              // updates the round wants: clamp(ceil(fraction * available), min, max)
  std::string shortfall;          // why nothing was selected; empty when devices were selected
  bool ok() const { return shortfall.empty(); }
};

// Chooses min(available, ceil(target * over_selection)) of `available` uniformly at random.
// The same (available set, config, seed) gives the same selection on every platform and for any
// order of `available` (it is sorted first; the generator is mt19937_64 with our own
// Fisher-Yates and bounded draws, not the library-defined std distributions). A device listed
// twice is refused. With fewer than min_devices available, nothing is selected and `shortfall`
// says so: a round with too few devices would be thrown away anyway.
Selection select_devices(std::vector<DeviceId> available, const SelectionConfig& config, uint64_t seed);

}  // namespace tn::federated
