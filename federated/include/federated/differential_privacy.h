// Differential privacy's clipping and calibration, as pure functions (issue 20 point 4): L2 norm
// clipping (for central DP on the server, and on the device before quantising for secure
// aggregation), central DP's noise calibrated to the sampled devices, and adaptive clipping after
// Andrew, Thakkar, McMahan and Ramaswamy, "Differentially Private Learning with Adaptive
// Clipping" (arXiv 1905.03871, 2019; NeurIPS 2021). No randomness here: noise is drawn where a cryptographic
// source is at hand (federated/dp_noise.h) and passed in. docs/privacy.md states the mechanisms and their
// sources.
#pragma once

#include <cstdint>
#include <span>

namespace tn::federated::privacy {

// The L2 norm of `values`, computed scaled by the largest magnitude so that finite values whose
// squares overflow still give a finite norm. Refuses (ParameterRefused, naming the coordinate) a
// NaN or an infinity.
double l2_norm(std::span<const double> values);

// Scales `values` by min(1, bound / norm), so that their L2 norm is at most `bound` to within a few
// ulps of rounding (McMahan et al. 2018's flat clipping), and returns the norm before clipping. Refuses a
// bound that is not positive and finite, and what l2_norm refuses, leaving `values` as they were.
double clip_l2(std::span<double> values, double bound);

// Central DP (DP-FedAvg, McMahan, Ramage, Talwar and Zhang 2018): the server sums the updates of
// the sampled devices, each clipped to L2 norm clip_norm with weight at most 1, adds Gaussian noise
// of standard deviation noise_multiplier * clip_norm to the sum, and divides by the expected number
// of sampled devices (q N, fixed, so that the denominator reveals nothing). The standard deviation
// of the noise on that mean: noise_multiplier * clip_norm / expected_devices. The accountant
// (privacy_accountant.h) takes noise_multiplier and q. Refuses (ParameterRefused, by name)
// arguments that are not positive and finite.
double central_mean_noise_stddev(double noise_multiplier, double clip_norm, double expected_devices);

// Adaptive clipping (Andrew et al.): the clip norm C follows the target quantile
// gamma of the updates' norms by the geometric step C <- C exp(-eta (b - gamma)), where b is the
// fraction of updates whose norm was at most C, estimated privately: sum of (1[norm <= C] - 1/2)
// plus N(0, count_stddev^2), divided by the expected number of devices, plus 1/2 (the centring
// halves the count's sensitivity), clamped to [0, 1].
struct AdaptiveClipping {
  double clip_norm = 0;        // C, positive
  double target_quantile = 0;  // gamma in [0, 1]; 0.5 is the paper's usual choice
  double learning_rate = 0;    // eta, positive; the paper uses 0.2
  double count_stddev = 0;     // sigma_b, positive; TFF's default is expected devices / 20
};

// The next clip norm from this round's count of updates with norm <= C and the draw of
// N(0, count_stddev^2) (which the caller samples: dp_noise.h's central_gaussian_noise). Refuses
// (ParameterRefused, by name) state or arguments out of range.
double next_clip_norm(const AdaptiveClipping& state, uint64_t unclipped, double count_noise,
                      double expected_devices);

// The noise multiplier the updates' sum needs so that, with the clipped count released at
// count_stddev, the pair is as private as one Gaussian mechanism at `noise_multiplier`: the two
// releases compose as one Gaussian, z^-2 = z_updates^-2 + (2 sigma_b)^-2 (Andrew et al.; TFF and
// TF Privacy compute it so). Refuses noise_multiplier >= 2 count_stddev,
// which leaves the updates no budget, and non-positive or non-finite arguments.
double updates_noise_multiplier(double noise_multiplier, double count_stddev);

}  // namespace tn::federated::privacy
