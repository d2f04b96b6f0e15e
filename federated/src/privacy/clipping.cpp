// L2 norm clipping and the calibration of noise to clipping (differential_privacy.h).
#include <algorithm>
#include <cmath>
#include <string>

#include "federated/differential_privacy.h"
#include "federated/errors.h"

namespace tn::federated::privacy {

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

}  // namespace tn::federated::privacy
