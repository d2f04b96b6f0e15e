#include "federated/selection.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "federated/errors.h"
#include "numeric.h"

namespace tn::federated {
namespace {

// A uniform draw from [0, bound) by rejection, so every platform draws the same numbers
// (std::uniform_int_distribution is implementation-defined).
uint64_t draw_below(std::mt19937_64& generator, uint64_t bound) {
  uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  uint64_t value;
  do value = generator();
  while (value >= limit);
  return value % bound;
}

}  // namespace

void check_selection_config(const SelectionConfig& config) {
  if (!(config.fraction > 0 && config.fraction <= 1))
    throw ParameterRefused("selection: fraction " + std::to_string(config.fraction) + " is outside (0, 1]");
  if (config.min_devices < 1) throw ParameterRefused("selection: min_devices must be at least 1");
  if (config.max_devices < config.min_devices)
    throw ParameterRefused("selection: max_devices " + std::to_string(config.max_devices) +
                           " is below min_devices " + std::to_string(config.min_devices));
  if (!(config.over_selection >= 1 && std::isfinite(config.over_selection)))
    throw ParameterRefused("selection: over_selection " + std::to_string(config.over_selection) +
                           " must be a finite factor of at least 1");
}

Selection select_devices(std::vector<DeviceId> available, const SelectionConfig& config, uint64_t seed) {
  check_selection_config(config);
  std::sort(available.begin(), available.end());
  auto repeated = std::adjacent_find(available.begin(), available.end());
  if (repeated != available.end())
    throw Refused("selection: device '" + *repeated + "' is listed twice among the available devices");

  Selection selection;
  if (available.size() < config.min_devices) {
    selection.shortfall = std::to_string(available.size()) + " devices available, at least " +
                          std::to_string(config.min_devices) + " are needed";
    return selection;
  }
  selection.target = std::clamp(detail::ceil_of_product(config.fraction, available.size()),
                                config.min_devices, config.max_devices);
  size_t count = std::min(available.size(), detail::ceil_of_product(config.over_selection, selection.target));

  // The first `count` steps of a Fisher-Yates shuffle: a uniform random subset.
  std::mt19937_64 generator(seed);
  for (size_t i = 0; i < count; ++i) {
    size_t pick = i + size_t(draw_below(generator, available.size() - i));
    std::swap(available[i], available[pick]);
  }
  available.resize(count);
  std::sort(available.begin(), available.end());
  selection.devices = std::move(available);
  return selection;
}

}  // namespace tn::federated
