// The neighbour graph of SecAgg+ and the derivation of its degree and threshold
// (secure_aggregation.h).
//
// Where the formula comes from. Bell et al. (CCS 2020) prove SecAgg+ (their Algorithm 2, the
// semi-honest protocol, and its semi-malicious variant) secure and correct when the random
// k-regular graph G and the Shamir threshold t satisfy, except with probability 2^-sigma
// (security) and 2^-eta (correctness):
//   1. the graph stays connected once corrupt and dropped devices are removed;
//   2. no device has t or more corrupt neighbours (else they could reconstruct its secrets);
//   3. every device keeps at least t surviving neighbours (else its secrets cannot be recovered);
//   4. against an active (semi-malicious) coordinator, which can ask different neighbours for
//      different shares, 2t - k exceeds a device's corrupt neighbours.
// They instantiate G as a Harary graph over a random order of the devices and tabulate the
// resulting (k, t) for sigma = 40, eta = 20 and several n, corrupt and dropout fractions (the
// paper's concrete-parameter table for SecAgg+). The bounds below are how the authors' own
// implementation (Google's federated compute platform, fcp/secagg/server/graph_parameter_finder)
// evaluates those conditions, rewritten here:
//   1. a Harary graph of even degree k only disconnects if two disjoint runs of k/2 consecutive
//      devices in the order are all bad; with B = corrupt + dropped devices the union bound over
//      the n(n-k-1)/2 pairs of runs is P <= n(n-k-1)/2 * B!/(B-k)! * (n-k)!/n!, which must stay
//      below 2^-(sigma+1) (sigma split evenly between conditions 1 and 2);
//   2. a device's corrupt neighbours are hypergeometric (k draws from n with floor(gamma n)
//      corrupt); t is the smallest with P[corrupt neighbours >= t] < 2^-(sigma+1) / n (union
//      bound over devices), at least 2 so that no single neighbour holds a secret;
//   4. with an active coordinator t rises to floor((t - 1 + k) / 2) + 1;
//   3. surviving neighbours are hypergeometric (k draws from n with ceil((1-delta) n) survivors);
//      the degree is accepted when P[surviving neighbours < t] < 2^-eta / n.
// The smallest even k that passes is taken; if none below n - 1 does, the complete graph (the
// original SecAgg of Bonawitz et al. 2017) with its threshold by 2-4. Conditioning on the device
// itself being honest or surviving would draw from n - 1 devices, not n; like the authors'
// implementation we draw from n, which the test's comparison with their published values needs.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <string>

#include "secagg_internal.h"

namespace tn::federated::secagg {
namespace {

using Reason = SecAggRefused::Reason;

// Rounding slack for gamma n and delta n: 0.33 * 100 must count 33 devices, not 32.
constexpr double kSlack = 1e-9;
constexpr double kLn2 = 0.69314718055994530942;

// lgamma_r, not std::lgamma: glibc's lgamma writes the global signgam, a race between threads.
double log_factorial(double x) {
  int sign = 0;
  return ::lgamma_r(x + 1, &sign);
}

// Draws `draws` of `population` of which `marked` are marked: log P[exactly x marked].
struct Hypergeometric {
  double population, marked, draws;

  double log_pmf(double x) const {
    return log_factorial(marked) - log_factorial(x) - log_factorial(marked - x) +
           log_factorial(population - marked) - log_factorial(draws - x) -
           log_factorial(population - marked - draws + x) - log_factorial(population) + log_factorial(draws) +
           log_factorial(population - draws);
  }
  double lowest() const { return std::max(0.0, draws - (population - marked)); }
  double highest() const { return std::min(marked, draws); }

  // The smallest t with P[X >= t] < bound, summing the upper tail from its far end.
  uint32_t smallest_upper_tail_below(double bound) const {
    double tail = 0;
    for (double x = highest(); x >= lowest(); --x) {
      tail += std::exp(log_pmf(x));
      if (tail >= bound) return static_cast<uint32_t>(x) + 1;
    }
    return static_cast<uint32_t>(lowest());
  }

  // P[X < t], summing the lower tail from its far end.
  double lower_tail(uint32_t t) const {
    double tail = 0;
    for (double x = lowest(); x < t; ++x) tail += std::exp(log_pmf(x));
    return tail;
  }
};

struct Counts {
  double devices, corrupt, surviving;
};

Counts counts_of(uint32_t devices, const ThreatModel& threat) {
  double n = devices;
  return {n, std::floor(threat.corrupt_fraction * n + kSlack),
          std::ceil((1 - threat.dropout_fraction) * n - kSlack)};
}

// Condition 1: the log of the union bound on a random Harary graph of degree k disconnecting.
double log_disconnection_bound(const Counts& counts, double k) {
  double n = counts.devices, bad = counts.corrupt + (n - counts.surviving);
  if (k > bad) return -INFINITY;
  return std::log(n) + std::log(n - k - 1) - kLn2 + log_factorial(bad) - log_factorial(bad - k) +
         log_factorial(n - k) - log_factorial(n);
}

// Conditions 2-4 for degree k: the threshold, or nothing if none is both secure and correct.
std::optional<uint32_t> threshold_for(const Counts& counts, uint32_t k, const ThreatModel& threat) {
  double per_device_security = std::exp2(-(threat.security_bits + 1.0)) / counts.devices;
  double per_device_correctness = std::exp2(-static_cast<double>(threat.correctness_bits)) / counts.devices;
  Hypergeometric corrupt{counts.devices, counts.corrupt, static_cast<double>(k)};
  uint32_t t = corrupt.smallest_upper_tail_below(per_device_security);
  if (threat.active_coordinator) t = (t - 1 + k) / 2 + 1;
  t = std::max<uint32_t>(t, 2);
  Hypergeometric surviving{counts.devices, counts.surviving, static_cast<double>(k)};
  if (t > k || surviving.lower_tail(t) >= per_device_correctness) return std::nullopt;
  return t;
}

void check_threat(uint32_t devices, const ThreatModel& threat) {
  auto fraction_ok = [](double f) { return f >= 0 && f < 1; };
  if (devices < 3)
    throw SecAggRefused(Reason::Parameter, "secure aggregation: " + std::to_string(devices) +
                                               " devices; at least 3 are needed for a sum to hide anyone");
  if (!fraction_ok(threat.corrupt_fraction) || !fraction_ok(threat.dropout_fraction))
    throw SecAggRefused(Reason::Parameter,
                        "secure aggregation: corrupt_fraction " + std::to_string(threat.corrupt_fraction) +
                            " and dropout_fraction " + std::to_string(threat.dropout_fraction) +
                            " must be in [0, 1)");
  if (threat.security_bits < 1 || threat.security_bits > 128 || threat.correctness_bits < 1 ||
      threat.correctness_bits > 128)
    throw SecAggRefused(Reason::Parameter,
                        "secure aggregation: security_bits and correctness_bits must be in [1, 128]");
}

void check_graph(uint32_t devices, uint32_t degree) {
  bool complete = devices >= 2 && degree == devices - 1;
  bool harary = devices >= 2 && degree >= 2 && degree % 2 == 0 && degree < devices - 1;
  if (!complete && !harary)
    throw SecAggRefused(Reason::Parameter, "secure aggregation: no random Harary graph of degree " +
                                               std::to_string(degree) + " on " + std::to_string(devices) +
                                               " devices (an even degree below n - 1, or n - 1)");
}

}  // namespace

GraphParameters derive_graph_parameters(uint32_t devices, const ThreatModel& threat) {
  check_threat(devices, threat);
  Counts counts = counts_of(devices, threat);
  double connectivity_bound = -(threat.security_bits + 1.0) * kLn2;
  for (uint32_t k = 2; k < devices - 1; k += 2) {
    if (log_disconnection_bound(counts, k) >= connectivity_bound) continue;
    if (std::optional<uint32_t> t = threshold_for(counts, k, threat)) return {devices, k, *t};
  }
  // The complete graph stays connected whoever is removed: only conditions 2-4 remain.
  if (std::optional<uint32_t> t = threshold_for(counts, devices - 1, threat))
    return {devices, devices - 1, *t};
  throw SecAggRefused(Reason::Parameter, "secure aggregation: no degree on " + std::to_string(devices) +
                                             " devices meets corrupt_fraction " +
                                             std::to_string(threat.corrupt_fraction) + ", dropout_fraction " +
                                             std::to_string(threat.dropout_fraction) + ", security_bits " +
                                             std::to_string(threat.security_bits) + " and correctness_bits " +
                                             std::to_string(threat.correctness_bits));
}

NeighbourGraph NeighbourGraph::random_harary(uint32_t devices, uint32_t degree, const Bytes32& seed) {
  check_graph(devices, degree);
  // Fisher-Yates with unbiased draws: order[p] is the device at ring position p.
  std::vector<DeviceIndex> order(devices);
  std::iota(order.begin(), order.end(), 0);
  detail::KeyStream stream(seed);
  for (uint32_t i = devices - 1; i > 0; --i) std::swap(order[i], order[stream.uniform_below(i + 1)]);
  NeighbourGraph graph;
  graph.neighbours_.resize(devices);
  uint32_t reach = degree == devices - 1 ? devices - 1 : degree / 2;
  for (uint32_t p = 0; p < devices; ++p) {
    std::vector<DeviceIndex>& list = graph.neighbours_[order[p]];
    for (uint32_t j = 1; j <= reach; ++j) {
      list.push_back(order[(p + j) % devices]);
      if (reach < devices - 1) list.push_back(order[(p + devices - j) % devices]);
    }
    std::sort(list.begin(), list.end());
  }
  return graph;
}

const std::vector<DeviceIndex>& NeighbourGraph::neighbours(DeviceIndex device) const {
  if (device >= neighbours_.size())
    throw SecAggRefused(Reason::Parameter, "secure aggregation: device " + std::to_string(device) +
                                               " is not among " + std::to_string(neighbours_.size()));
  return neighbours_.at(device);
}

}  // namespace tn::federated::secagg
