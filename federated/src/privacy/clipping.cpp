// L2 norm clipping and the calibration of noise to clipping (differential_privacy.h).
#include <algorithm>
#include <cmath>
#include <string>

#include "federated/differential_privacy.h"
#include "federated/errors.h"

namespace tn::federated::privacy {
namespace {

void check_positive_finite(double value, const char* name) {
  if (!(value > 0 && std::isfinite(value)))
    throw ParameterRefused("privacy: " + std::string(name) + " " + std::to_string(value) +
                           " must be positive and finite");
}

}  // namespace

double l2_norm(std::span<const double> values) {
  double largest = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i]))
      throw ParameterRefused("privacy: coordinate " + std::to_string(i) + " is " + std::to_string(values[i]) +
                             ", not finite");
    largest = std::max(largest, std::abs(values[i]));
  }
  if (largest == 0) return 0;
  // Scaled by the largest magnitude, each square is at most 1 and the sum at most the length.
  double sum = 0;
  for (double value : values) sum += (value / largest) * (value / largest);
  return largest * std::sqrt(sum);
}

double clip_l2(std::span<double> values, double bound) {
  if (!(bound > 0 && std::isfinite(bound)))
    throw ParameterRefused("privacy: clipping bound " + std::to_string(bound) +
                           " must be positive and finite");
  double norm = l2_norm(values);
  if (norm > bound) {
    double scale = bound / norm;
    for (double& value : values) value *= scale;
  }
  return norm;
}

double central_mean_noise_stddev(double noise_multiplier, double clip_norm, double expected_devices) {
  check_positive_finite(noise_multiplier, "noise_multiplier");
  check_positive_finite(clip_norm, "clip_norm");
  check_positive_finite(expected_devices, "expected_devices");
  return noise_multiplier * clip_norm / expected_devices;
}

double next_clip_norm(const AdaptiveClipping& state, uint64_t unclipped, double count_noise,
                      double expected_devices) {
  check_positive_finite(state.clip_norm, "clip_norm");
  check_positive_finite(state.learning_rate, "learning_rate");
  check_positive_finite(state.count_stddev, "count_stddev");
  check_positive_finite(expected_devices, "expected_devices");
  if (!(state.target_quantile >= 0 && state.target_quantile <= 1))
    throw ParameterRefused("privacy: target_quantile " + std::to_string(state.target_quantile) +
                           " is outside [0, 1]");
  if (!std::isfinite(count_noise))
    throw ParameterRefused("privacy: count_noise " + std::to_string(count_noise) + " is not finite");
  // The centred sum: each device's 1[norm <= C] - 1/2; the devices that did not take part add 0.
  double centred = static_cast<double>(unclipped) - expected_devices / 2 + count_noise;
  double fraction = std::clamp(centred / expected_devices + 0.5, 0.0, 1.0);
  return state.clip_norm * std::exp(-state.learning_rate * (fraction - state.target_quantile));
}

double updates_noise_multiplier(double noise_multiplier, double count_stddev) {
  check_positive_finite(noise_multiplier, "noise_multiplier");
  check_positive_finite(count_stddev, "count_stddev");
  if (noise_multiplier >= 2 * count_stddev)
    throw ParameterRefused("privacy: noise_multiplier " + std::to_string(noise_multiplier) +
                           " needs count_stddev above " + std::to_string(noise_multiplier / 2) +
                           ": the clipped count would spend the whole budget");
  double count_multiplier = 2 * count_stddev;
  return 1 / std::sqrt(1 / (noise_multiplier * noise_multiplier) - 1 / (count_multiplier * count_multiplier));
}

}  // namespace tn::federated::privacy
