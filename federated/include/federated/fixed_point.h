// Fixed point for secure aggregation (issue 20 point 2): a device's float update becomes words
// modulo 2^bits that SecAgg+ masks and sums (secure_aggregation.h), and the coordinator turns the
// unmasked sum back into the example-weighted mean.
//
// A device clips its update, optionally to an L2 norm bound (the sensitivity differential privacy
// needs) and then always to a per-coordinate range [-range, range] (what a fixed-point word can
// hold: the L2 bound alone would allow one coordinate the whole norm, and a range that large wastes
// the word's resolution on every other coordinate). Clamping coordinates after the L2 clip can only
// lower the norm, so the DP bound still holds. It then weights the update by its example count,
// capped at max_weight, and rounds weight * x / step stochastically to an integer, with
// step = range / levels: the integer is floor(y) + 1 with probability y - floor(y), so that its
// expectation is y (unbiased up to 2^-52 steps, the resolution of the uniform draw and of y's
// fractional part), drawn from the ChaCha20 keystream of a seed the device keeps secret. Integers
// are stored in two's complement modulo 2^bits; the last word holds the weight, so that the sum of
// weights travels masked with the updates and no example count is seen alone.
//
// Headroom: a sum of n contributions holds at most n * max_weight * levels (+ the noise margin
// that distributed DP reserves) in magnitude per coordinate and n * max_weight as weight; both must
// fit 2^bits without wrapping: n * max_weight * levels + noise_margin <= 2^(bits-1) - 1. Parameters
// that break it are refused by name (Parameter, "headroom"), never wrapped silently.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "federated/secure_aggregation.h"

namespace tn::federated::secagg {

struct FixedPointParameters {
  unsigned bits = 32;                // words modulo 2^bits, in [2, 32], as the masks
  std::optional<double> l2_bound{};  // clip the update's L2 norm to this first, if set
  double range = 0;                  // then clamp each coordinate to [-range, range]
  uint32_t levels = 0;               // +-range at weight 1 is +-levels: step = range / levels
  uint32_t max_weight = 1;           // example counts above this weigh max_weight
  uint32_t max_devices = 0;          // contributions a sum may hold
  uint64_t noise_margin = 0;         // magnitude of the sum's distributed-DP noise kept clear
  double step() const { return range / levels; }
};

// Refuses (Parameter, naming it) bits outside [2, 32], a range or L2 bound that is not positive and
// finite, zero levels, max_weight or max_devices, and parameters that break the headroom rule.
void check_fixed_point(const FixedPointParameters& parameters);

// The most levels the headroom rule allows for the other parameters: the finest step. Refuses
// (Parameter, "headroom") when not even one level fits.
uint32_t largest_levels(unsigned bits, uint32_t max_devices, uint32_t max_weight, uint64_t noise_margin);

// update.size() + 1 words below 2^bits: the clipped, weighted, stochastically rounded coordinates,
// then the weight min(examples, max_weight). A zero weight contributes zeros. Refuses a NaN or an
// infinity (Parameter, naming the coordinate) and what check_fixed_point refuses.
std::vector<uint32_t> quantise(std::span<const double> update, uint64_t examples,
                               const FixedPointParameters& parameters, const Bytes32& rounding_seed);

struct Dequantised {
  std::vector<double> weighted_sum;  // sum_i w_i x_i, as the mean-family strategies take it
  uint64_t total_weight = 0;         // sum_i w_i
  std::vector<double> mean;          // weighted_sum / total_weight
};

// The weighted sum and mean from the unmasked sum of `contributions` quantised updates. Refuses,
// by name: contributions outside [1, max_devices]; a sum with no weight word or a word not below
// 2^bits; a total weight of 0 or above contributions * max_weight; a coordinate whose magnitude
// exceeds contributions * max_weight * levels + noise_margin (the sum is not one of that many
// contributions: corrupt, or noise beyond its margin); and what check_fixed_point refuses.
Dequantised dequantise(std::span<const uint32_t> sum, uint32_t contributions,
                       const FixedPointParameters& parameters);

}  // namespace tn::federated::secagg
