// Noise for differential privacy, drawn from a cryptographic source (issue 20 point 4).
//
// The discrete Gaussian N_Z(0, sigma^2) (P[k] proportional to exp(-k^2 / (2 sigma^2)) over the
// integers) sampled exactly by Canonne, Kamath and Steinke, "The Discrete Gaussian for
// Differential Privacy" (NeurIPS 2020), Algorithms 1-3: Bernoulli(exp(-gamma)) for rational gamma,
// the discrete Laplace of scale t = floor(sigma) + 1, and rejection to the Gaussian. All arithmetic
// is on integers (sigma^2 is a rational), so no floating-point rounding shapes the distribution
// (the attack Mironov 2012 describes on floating-point Laplace noise). The uniform draws come from
// the masks' ChaCha20 keystream under a seed the caller keeps secret. One deviation, stated: a
// candidate whose rejection exponent does not fit 128-bit arithmetic is rejected outright; it would
// be accepted with probability below exp(-2^41).
//
// Distributed DP (Kairouz, Liu and Steinke, "The Distributed Discrete Gaussian Mechanism for
// Federated Learning with Secure Aggregation", ICML 2021): each device adds its share of discrete
// Gaussian noise to its quantised update before masking (fixed_point.h, secure_aggregation.h), so
// that the securely aggregated sum carries the target noise and no one, the coordinator included,
// sees an update without it. docs/privacy.md states the parameters and the accounting.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "federated/fixed_point.h"
#include "federated/secure_aggregation.h"

namespace tn::federated::secagg {

// sigma^2 = numerator / denominator, numerator in [1, 2^40], denominator in [1, 2^20]: the bounds
// keep every intermediate of the sampler within 128 bits.
struct NoiseVariance {
  uint64_t numerator = 1;
  uint64_t denominator = 1;
  // The smallest numerator / 2^k (k <= 20, as large as the numerator bound allows) not below
  // `variance`: rounded up, so that the noise is never less than asked. Refuses (Parameter) a
  // variance that is not positive and finite or above 2^40.
  static NoiseVariance at_least(double variance);
  double value() const { return static_cast<double>(numerator) / static_cast<double>(denominator); }
};

// `count` independent draws of N_Z(0, variance) from the keystream of `seed`. Refuses (Parameter)
// a variance outside its bounds.
std::vector<int64_t> sample_discrete_gaussian(NoiseVariance variance, size_t count, const Bytes32& seed);

// Adds one draw of N_Z(0, variance) to each word, modulo 2^bits: a device's noise share, added to
// the coordinates of its quantised update (not to the weight word: pass the first update.size()
// words) before masking. Refuses what check_bits and sample_discrete_gaussian refuse.
void add_noise_share(std::span<uint32_t> words, unsigned bits, NoiseVariance variance, const Bytes32& seed);

// The distributed discrete Gaussian's calibration for a task.
struct DistributedNoise {
  double sensitivity = 0;     // L2 sensitivity of one contribution, in quantised units
  double target_stddev = 0;   // noise_multiplier * sensitivity: the sum's noise with min_devices
  NoiseVariance per_device;   // each device's share: target variance / min_devices, rounded up
  uint64_t noise_margin = 0;  // 14 standard deviations of max_devices shares, for the headroom rule
};

// Calibrates device shares so that the sum of at least `min_devices` of them has standard
// deviation noise_multiplier * sensitivity. The sensitivity of one contribution in quantised units
// is max_weight * l2_bound / step + sqrt(dimension): the clipped, weighted update has L2 norm at
// most max_weight * l2_bound / step, and stochastic rounding moves each coordinate by less than 1.
// Noise beyond 14 standard deviations has probability below 2 exp(-98) per coordinate. Refuses
// (Parameter, by name) parameters without an L2 bound, a noise multiplier that is not positive and
// finite, min_devices outside [1, max_devices], and what check_fixed_point and
// NoiseVariance::at_least refuse (the margin itself is not checked against the headroom: set it in
// the parameters and check them).
DistributedNoise plan_distributed_noise(const FixedPointParameters& parameters, size_t dimension,
                                        double noise_multiplier, uint32_t min_devices);

// Central DP's noise: `count` draws of granularity * N_Z(0, (stddev / granularity)^2), the
// discrete Gaussian on a grid of `granularity`, standing for N(0, stddev^2) without floating-point
// sampling (Canonne et al. 2020 recommend it so). Refuses a stddev or granularity that is not
// positive and finite, and a ratio whose variance NoiseVariance cannot hold.
std::vector<double> central_gaussian_noise(size_t count, double stddev, double granularity,
                                           const Bytes32& seed);

}  // namespace tn::federated::secagg
