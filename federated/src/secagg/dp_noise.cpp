// The discrete Gaussian sampler of Canonne, Kamath and Steinke 2020 on the masks' keystream, device
// noise shares and their calibration, and central DP's discretised Gaussian (dp_noise.h).
#include "federated/dp_noise.h"

#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "secagg_internal.h"

namespace tn::federated::secagg {
namespace {

using u128 = unsigned __int128;

constexpr uint64_t kLargestNumerator = uint64_t{1} << 40;
constexpr unsigned kDenominatorBits = 20;

[[noreturn]] void refuse_noise(const std::string& message) {
  throw SecAggRefused(SecAggRefused::Reason::Parameter, "dp noise: " + message);
}

void check_variance(NoiseVariance v) {
  if (v.numerator == 0 || v.numerator > kLargestNumerator || v.denominator == 0 ||
      v.denominator > (uint64_t{1} << kDenominatorBits))
    refuse_noise("variance " + std::to_string(v.numerator) + "/" + std::to_string(v.denominator) +
                 " needs a numerator in [1, 2^40] and a denominator in [1, 2^20]");
}

// The keystream's uniform draws, widened to the sampler's 128-bit arithmetic.
class Uniform {
 public:
  explicit Uniform(const Bytes32& seed) : stream_(seed) {}

  // Uniform in [0, bound) by rejection of the draws below 2^128 mod bound; bound > 0. Most bounds
  // (t, k in Bernoulli(gamma / k) for small gamma denominators) fit 32 bits: the keystream's own
  // 32-bit rejection sampler spends a quarter of the words and no 128-bit division on them.
  u128 below(u128 bound) {
    if (bound <= std::numeric_limits<uint32_t>::max())
      return stream_.uniform_below(static_cast<uint32_t>(bound));
    const u128 rejected = (0 - bound) % bound;
    for (;;) {
      u128 x = 0;
      for (int i = 0; i < 4; ++i) x = x << 32 | stream_.next_word();
      if (x >= rejected) return x % bound;
    }
  }
  bool bernoulli(u128 numerator, u128 denominator) { return below(denominator) < numerator; }

  // Bernoulli(exp(-n/d)) for n <= d (CKS Algorithm 1, gamma in [0, 1]): K counts successive
  // successes of Bernoulli(gamma/k); P[K odd] = exp(-gamma).
  bool exp_minus_fraction(u128 n, u128 d) {
    for (u128 k = 1;; ++k) {
      // A run of 2^40 successes has probability below 1/(2^40 - 1)!; the bound keeps d * k in range.
      if (k == (u128{1} << 40)) throw Error("dp noise: Bernoulli(exp(-gamma)) ran 2^40 steps");
      if (!bernoulli(n, d * k)) return k % 2 == 1;
    }
  }
  // Bernoulli(exp(-n/d)) for any n/d >= 0: floor(n/d) draws of Bernoulli(exp(-1)), then the rest.
  bool exp_minus(u128 n, u128 d) {
    for (u128 i = n / d; i > 0; --i)
      if (!exp_minus_fraction(1, 1)) return false;
    return exp_minus_fraction(n % d, d);
  }

 private:
  detail::KeyStream stream_;
};

struct Signed {
  u128 magnitude;
  bool negative;
};

// CKS Algorithm 2 with s = 1: the discrete Laplace, P[x] proportional to exp(-|x| / t).
Signed discrete_laplace(Uniform& uniform, uint64_t t) {
  for (;;) {
    u128 u = uniform.below(t);
    if (!uniform.exp_minus(u, t)) continue;
    uint64_t v = 0;
    while (uniform.exp_minus_fraction(1, 1)) ++v;
    u128 x = u + u128{t} * v;
    bool negative = uniform.bernoulli(1, 2);
    if (negative && x == 0) continue;
    return {x, negative};
  }
}

uint64_t floor_sqrt(uint64_t m) {
  auto root = static_cast<uint64_t>(std::sqrt(static_cast<double>(m)));
  while (root * root > m) --root;
  while ((root + 1) * (root + 1) <= m) ++root;
  return root;
}

// CKS Algorithm 3: a discrete Laplace candidate x of scale t = floor(sigma) + 1 is kept with
// probability exp(-(|x| - sigma^2/t)^2 / (2 sigma^2)). With sigma^2 = a/b that exponent is
// c^2 / (2 a b t^2), c = |x| b t - a, exactly.
int64_t discrete_gaussian(Uniform& uniform, NoiseVariance v) {
  const uint64_t t = floor_sqrt(v.numerator / v.denominator) + 1;
  const u128 a = v.numerator, bt = u128{v.denominator} * t;
  // 2 a b t^2 <= max(8 a^2, 2 a b) <= 2^83: t <= 2 sigma when sigma >= 1, else t = 1.
  const u128 exponent_denominator = 2 * a * bt * t;
  for (;;) {
    Signed x = discrete_laplace(uniform, t);
    u128 scaled = x.magnitude * bt;  // |x| < 2^85, b t < 2^41
    u128 c = scaled >= a ? scaled - a : a - scaled;
    // c >= 2^62 means an exponent above 2^124 / 2^83: such an x is accepted with probability
    // below exp(-2^41); it is rejected outright, and every accepted |x| fits int64.
    if (c >= (u128{1} << 62)) continue;
    if (uniform.exp_minus(c * c, exponent_denominator)) {
      auto magnitude = static_cast<int64_t>(x.magnitude);
      return x.negative ? -magnitude : magnitude;
    }
  }
}

}  // namespace

NoiseVariance NoiseVariance::at_least(double variance) {
  detail::check_positive_finite("dp noise", variance, "variance");
  for (int k = kDenominatorBits; k >= 0; --k) {
    double scaled = std::ceil(std::ldexp(variance, k));
    if (scaled <= static_cast<double>(kLargestNumerator))
      return {static_cast<uint64_t>(scaled), uint64_t{1} << k};
  }
  refuse_noise("variance " + std::to_string(variance) + " is above 2^40");
}

std::vector<int64_t> sample_discrete_gaussian(NoiseVariance variance, size_t count, const Bytes32& seed) {
  check_variance(variance);
  Uniform uniform(seed);
  std::vector<int64_t> draws;
  draws.reserve(count);
  for (size_t i = 0; i < count; ++i) draws.push_back(discrete_gaussian(uniform, variance));
  return draws;
}

void add_noise_share(std::span<uint32_t> words, unsigned bits, NoiseVariance variance, const Bytes32& seed) {
  detail::check_bits(bits);
  std::vector<int64_t> noise = sample_discrete_gaussian(variance, words.size(), seed);
  const uint32_t mask = detail::word_mask(bits);
  // Two's complement: adding a negative draw's low 32 bits subtracts it modulo 2^bits.
  for (size_t i = 0; i < words.size(); ++i)
    words[i] = (words[i] + static_cast<uint32_t>(static_cast<uint64_t>(noise[i]))) & mask;
}

DistributedNoise plan_distributed_noise(const FixedPointParameters& p, size_t dimension,
                                        double noise_multiplier, uint32_t min_devices) {
  check_fixed_point(p);
  if (!p.l2_bound)
    refuse_noise("distributed DP needs an l2_bound: without it no contribution has a bounded norm");
  detail::check_positive_finite("dp noise", noise_multiplier, "noise_multiplier");
  if (min_devices == 0 || min_devices > p.max_devices)
    refuse_noise("min_devices " + std::to_string(min_devices) + " is outside [1, max_devices " +
                 std::to_string(p.max_devices) + "]");
  DistributedNoise plan;
  plan.sensitivity = p.max_weight * *p.l2_bound / p.step() + std::sqrt(static_cast<double>(dimension));
  plan.target_stddev = noise_multiplier * plan.sensitivity;
  plan.per_device = NoiseVariance::at_least(plan.target_stddev * plan.target_stddev / min_devices);
  plan.noise_margin =
      static_cast<uint64_t>(std::ceil(14 * std::sqrt(p.max_devices * plan.per_device.value())));
  return plan;
}

std::vector<double> central_gaussian_noise(size_t count, double stddev, double granularity,
                                           const Bytes32& seed) {
  detail::check_positive_finite("dp noise", stddev, "stddev");
  detail::check_positive_finite("dp noise", granularity, "granularity");
  double ratio = stddev / granularity;
  std::vector<int64_t> draws = sample_discrete_gaussian(NoiseVariance::at_least(ratio * ratio), count, seed);
  std::vector<double> noise;
  noise.reserve(count);
  for (int64_t draw : draws) noise.push_back(static_cast<double>(draw) * granularity);
  return noise;
}

}  // namespace tn::federated::secagg
