// Differential privacy's clipping and calibration, as pure functions (issue 20 point 4): L2 norm
// clipping (for central DP on the server, and on the device before quantising for secure
// aggregation). No randomness here: noise is drawn where a cryptographic source is at hand
// (federated/dp_noise.h) and passed in. docs/privacy.md states the mechanisms and their sources.
#pragma once

#include <span>

namespace tn::federated::privacy {

// The L2 norm of `values`, computed scaled by the largest magnitude so that finite values whose
// squares overflow still give a finite norm. Refuses (ParameterRefused, naming the coordinate) a
// NaN or an infinity.
double l2_norm(std::span<const double> values);

// Scales `values` by min(1, bound / norm), so that their L2 norm is at most `bound` (McMahan et al.
// 2018's flat clipping), and returns the norm before clipping. Refuses a bound that is not
// positive and finite, and what l2_norm refuses, leaving `values` as they were.
double clip_l2(std::span<double> values, double bound);

}  // namespace tn::federated::privacy
