// Fixed point for secure aggregation: clipping, weighting, stochastic rounding to words modulo
// 2^bits, and the weighted mean back from their sum (fixed_point.h).
#include "federated/fixed_point.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "federated/differential_privacy.h"
#include "secagg_internal.h"

namespace tn::federated::secagg {
namespace {

using Reason = SecAggRefused::Reason;

[[noreturn]] void refuse(const std::string& message) {
  throw SecAggRefused(Reason::Parameter, "fixed point: " + message);
}

// The largest magnitude a sum may hold per coordinate: 2^(bits-1) - 1, so that two's complement
// decoding is unambiguous.
uint64_t largest_magnitude(unsigned bits) { return (uint64_t{1} << (bits - 1)) - 1; }

// n * max_weight * levels + noise_margin, exactly (each factor below 2^32, the margin below 2^64).
unsigned __int128 sum_bound(uint32_t devices, uint32_t max_weight, uint32_t levels, uint64_t noise_margin) {
  return static_cast<unsigned __int128>(uint64_t{devices} * max_weight) * levels + noise_margin;
}

std::string headroom_refusal(uint32_t devices, const FixedPointParameters& p) {
  return "headroom: " + std::to_string(devices) + " devices x max_weight " + std::to_string(p.max_weight) +
         " x " + std::to_string(p.levels) + " levels + noise margin " + std::to_string(p.noise_margin) +
         " exceeds 2^" + std::to_string(p.bits - 1) + " - 1: the sum would wrap";
}

// 53 uniform bits from the keystream as a double in [0, 1), exactly.
double uniform_unit(detail::KeyStream& stream) {
  uint64_t word = uint64_t{stream.next_word()} << 32 | stream.next_word();
  return static_cast<double>(word >> 11) * 0x1p-53;
}

// The update clipped as fixed_point.h states: L2 first if asked, then each coordinate to the range.
std::vector<double> clipped(std::span<const double> update, const FixedPointParameters& p) {
  for (size_t i = 0; i < update.size(); ++i)
    if (!std::isfinite(update[i]))
      refuse("coordinate " + std::to_string(i) + " is " + std::to_string(update[i]));
  std::vector<double> values(update.begin(), update.end());
  if (p.l2_bound) privacy::clip_l2(values, *p.l2_bound);
  for (double& value : values) value = std::clamp(value, -p.range, p.range);
  return values;
}

// Two's complement of `value` modulo 2^bits, and back.
uint32_t encode(int64_t value, unsigned bits) {
  return static_cast<uint32_t>(static_cast<uint64_t>(value)) & detail::word_mask(bits);
}
int64_t decode(uint32_t word, unsigned bits) {
  int64_t value = word;
  return value > static_cast<int64_t>(largest_magnitude(bits)) ? value - (int64_t{1} << bits) : value;
}

}  // namespace

void detail::check_positive_finite(const char* part, double value, const char* name) {
  if (!(value > 0 && std::isfinite(value)))
    throw SecAggRefused(Reason::Parameter, std::string(part) + ": " + name + " " + std::to_string(value) +
                                               " must be positive and finite");
}

void check_fixed_point(const FixedPointParameters& p) {
  if (p.bits < 2 || p.bits > 32) refuse("bits " + std::to_string(p.bits) + " is outside [2, 32]");
  detail::check_positive_finite("fixed point", p.range, "range");
  if (p.l2_bound) detail::check_positive_finite("fixed point", *p.l2_bound, "l2_bound");
  if (p.levels == 0) refuse("levels must be at least 1");
  if (p.max_weight == 0) refuse("max_weight must be at least 1");
  if (p.max_devices == 0) refuse("max_devices must be at least 1");
  // The weight word's bound n * max_weight is below the coordinates' bound, so one check covers both.
  if (sum_bound(p.max_devices, p.max_weight, p.levels, p.noise_margin) > largest_magnitude(p.bits))
    refuse(headroom_refusal(p.max_devices, p));
}

uint32_t largest_levels(unsigned bits, uint32_t max_devices, uint32_t max_weight, uint64_t noise_margin) {
  FixedPointParameters p{.bits = bits,
                         .range = 1,
                         .levels = 1,
                         .max_weight = max_weight,
                         .max_devices = max_devices,
                         .noise_margin = noise_margin};
  check_fixed_point(p);  // refuses unless one level fits
  uint64_t levels = (largest_magnitude(bits) - noise_margin) / (uint64_t{max_devices} * max_weight);
  return static_cast<uint32_t>(std::min<uint64_t>(levels, UINT32_MAX));
}

std::vector<uint32_t> quantise(std::span<const double> update, uint64_t examples,
                               const FixedPointParameters& p, const Bytes32& rounding_seed) {
  check_fixed_point(p);
  std::vector<double> values = clipped(update, p);
  const uint32_t weight = static_cast<uint32_t>(std::min<uint64_t>(examples, p.max_weight));
  // y = weight * x / step, rounded once (not weight * round(x / step)): the rounding error of a
  // contribution stays below one step of the sum instead of weight steps.
  const double scale = weight / p.step(), bound = static_cast<double>(weight) * p.levels;
  detail::KeyStream stream(rounding_seed);
  std::vector<uint32_t> words;
  words.reserve(values.size() + 1);
  for (double value : values) {
    // Clamped again because range / step may round to a hair above levels.
    double y = std::clamp(value * scale, -bound, bound), floor = std::floor(y);
    int64_t rounded = static_cast<int64_t>(floor) + (uniform_unit(stream) < y - floor ? 1 : 0);
    words.push_back(encode(rounded, p.bits));
  }
  words.push_back(weight);
  return words;
}

Dequantised dequantise(std::span<const uint32_t> sum, uint32_t contributions, const FixedPointParameters& p) {
  check_fixed_point(p);
  if (contributions == 0 || contributions > p.max_devices)
    refuse(std::to_string(contributions) + " contributions, outside [1, max_devices " +
           std::to_string(p.max_devices) + "]");
  if (sum.empty()) refuse("a sum without its weight word");
  for (size_t i = 0; i < sum.size(); ++i)
    if (sum[i] > detail::word_mask(p.bits))
      refuse("sum word " + std::to_string(i) + " is " + std::to_string(sum[i]) + ", not below 2^" +
             std::to_string(p.bits));
  Dequantised result;
  result.total_weight = sum.back();
  if (result.total_weight == 0) refuse("total weight is 0: no contribution carried weight");
  if (result.total_weight > uint64_t{contributions} * p.max_weight)
    refuse("total weight " + std::to_string(result.total_weight) + " exceeds " +
           std::to_string(contributions) + " contributions x max_weight " + std::to_string(p.max_weight));
  const auto reachable =
      static_cast<int64_t>(sum_bound(contributions, p.max_weight, p.levels, p.noise_margin));
  const double step = p.step(), weight = static_cast<double>(result.total_weight);
  for (size_t i = 0; i + 1 < sum.size(); ++i) {
    int64_t value = decode(sum[i], p.bits);
    if (value > reachable || value < -reachable)
      refuse("sum coordinate " + std::to_string(i) + " is " + std::to_string(value) + ", beyond the " +
             std::to_string(reachable) + " that " + std::to_string(contributions) +
             " contributions can reach");
    result.weighted_sum.push_back(static_cast<double>(value) * step);
    result.mean.push_back(static_cast<double>(value) * step / weight);
  }
  return result;
}

}  // namespace tn::federated::secagg
