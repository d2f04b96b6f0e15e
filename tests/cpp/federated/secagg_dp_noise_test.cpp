// Noise for differential privacy: the discrete Gaussian sampler against the distribution's
// analytical mean, variance and probabilities; device shares whose securely aggregated sum
// carries the calibrated noise and survive SecAgg+'s masks bit for bit; central DP's grid noise;
// the calibration's refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <utility>
#include <vector>

#include "federated/dp_noise.h"
#include "secagg_test_util.h"

namespace tn::federated::secagg {
namespace {

using Reason = SecAggRefused::Reason;

// N_Z(0, v): P[k] = exp(-k^2 / 2v) / Z, summed over |k| <= 40 sigma + 10 (the rest is below e^-800).
struct Analytical {
  double variance = 0, fourth_moment = 0;
  std::vector<double> probability;  // of 0, 1, 2, 3
};

Analytical analytical(double v) {
  const long reach = static_cast<long>(40 * std::sqrt(v)) + 10;
  double z = 0, second = 0, fourth = 0;
  for (long k = -reach; k <= reach; ++k) {
    double kk = static_cast<double>(k), p = std::exp(-kk * kk / (2 * v));
    z += p;
    second += kk * kk * p;
    fourth += kk * kk * kk * kk * p;
  }
  Analytical a{second / z, fourth / z, {}};
  for (int k = 0; k < 4; ++k) a.probability.push_back(std::exp(-k * k / (2 * v)) / z);
  return a;
}

// 100,000 draws each (fixed seeds). With the mean known to be 0, the mean of x^2 estimates the
// variance with standard deviation sqrt((mu4 - var^2) / N); the mean, sqrt(var / N); the frequency
// of k, sqrt(p (1 - p) / N). Each is asserted within 5 of its standard deviations (a fixed seed
// makes the test deterministic; a correct sampler fails one of the 24 checks with probability
// about 1.4e-5). sigma^2 = 1/4 takes the t = 1 path, 10.5 a non-integer rational, 10^6 a scale of
// 1001.
TEST(SecAggDpNoise, DiscreteGaussianMatchesItsAnalyticalMoments) {
  constexpr size_t kDraws = 100000;
  const double n = kDraws;
  for (NoiseVariance v :
       {NoiseVariance{1, 4}, NoiseVariance{2, 1}, NoiseVariance{21, 2}, NoiseVariance{1000000, 1}}) {
    std::vector<int64_t> draws =
        sample_discrete_gaussian(v, kDraws, Bytes32{static_cast<uint8_t>(v.numerator)});
    Analytical a = analytical(v.value());
    double sum = 0, squares = 0;
    std::vector<double> count(4, 0);
    for (int64_t x : draws) {
      sum += static_cast<double>(x);
      squares += static_cast<double>(x) * static_cast<double>(x);
      if (std::abs(x) < 4) count[std::abs(x)] += 1;
    }
    EXPECT_NEAR(sum / n, 0, 5 * std::sqrt(a.variance / n)) << v.value();
    double variance_sd = std::sqrt((a.fourth_moment - a.variance * a.variance) / n);
    EXPECT_NEAR(squares / n, a.variance, 5 * variance_sd) << v.value();
    for (int k = 0; k < 4; ++k) {
      double p = a.probability[k] * (k == 0 ? 1 : 2);  // |x| = k
      EXPECT_NEAR(count[k] / n, p, 5 * std::sqrt(p * (1 - p) / n) + 1e-12) << v.value() << " |x| = " << k;
    }
    std::cout << "sigma^2 " << v.value() << ": mean " << sum / n << ", variance " << squares / n
              << " (analytical " << a.variance << ", tolerance " << 5 * variance_sd << "), P[0] "
              << count[0] / n << " (" << a.probability[0] << ")\n";
  }
}

// Ten devices quantise a zero update, add their shares and are summed modulo 2^32 as SecAgg+ sums
// them; the dequantised sum is pure noise, whose measured variance over 20,000 coordinates must be
// the calibrated 10 x per-device variance >= (z sensitivity)^2: the variance estimate's standard
// deviation is about var sqrt(2 / 20000) = 1%, the tolerance 5%.
TEST(SecAggDpNoise, TheSumOfDeviceSharesCarriesTheCalibratedNoise) {
  constexpr uint32_t kDevices = 10;
  constexpr size_t kLength = 20000;
  FixedPointParameters p{
      .bits = 32, .l2_bound = 1.0, .range = 1, .levels = 1u << 16, .max_weight = 1, .max_devices = kDevices};
  DistributedNoise plan = plan_distributed_noise(p, kLength, 1.0, kDevices);
  EXPECT_DOUBLE_EQ(plan.sensitivity, 65536 + std::sqrt(20000.0));
  double realised = std::sqrt(kDevices * plan.per_device.value()) / plan.sensitivity;
  EXPECT_GE(realised, 1.0);
  EXPECT_LE(realised, 1 + 1e-6);
  p.noise_margin = plan.noise_margin;
  check_fixed_point(p);
  std::vector<uint32_t> sum(kLength + 1, 0);
  for (uint32_t d = 0; d < kDevices; ++d) {
    std::vector<uint32_t> words = quantise(std::vector<double>(kLength, 0.0), 1, p, Bytes32{});
    add_noise_share(std::span(words).first(kLength), p.bits, plan.per_device,
                    Bytes32{static_cast<uint8_t>(d + 1)});
    add_modular(sum, words, p.bits);
  }
  Dequantised result = dequantise(sum, kDevices, p);
  ASSERT_EQ(result.total_weight, kDevices);  // the weight word carries no noise
  double mean = 0, squares = 0, expected = kDevices * plan.per_device.value();
  for (double x : result.weighted_sum) {
    mean += x / p.step();
    squares += (x / p.step()) * (x / p.step());
  }
  mean /= kLength;
  squares /= kLength;
  EXPECT_NEAR(mean, 0, 5 * std::sqrt(expected / kLength));
  EXPECT_NEAR(squares / expected, 1, 0.05);
  std::cout << "sum of " << kDevices << " shares: variance " << squares << " against " << expected
            << " (target (z sensitivity)^2 = " << plan.target_stddev * plan.target_stddev << "), margin "
            << plan.noise_margin << "\n";
}

// Four devices quantise, add their noise shares and mask with SecAgg+'s pairwise and self masks at
// 24 bits; once the coordinator removes the self masks the sum equals, bit for bit, the sum of what
// the devices report they masked, and dequantises within the rounding bound plus the noise.
TEST(SecAggDpNoise, NoisedQuantisedUpdatesSurviveMaskingBitForBit) {
  constexpr uint32_t kDevices = 4;
  constexpr size_t kLength = 500;
  FixedPointParameters p{
      .bits = 24, .l2_bound = 4.0, .range = 1, .levels = 1000, .max_weight = 1, .max_devices = kDevices};
  DistributedNoise plan = plan_distributed_noise(p, kLength, 0.5, kDevices);
  p.noise_margin = plan.noise_margin;
  check_fixed_point(p);
  std::vector<Bytes32> self(kDevices);
  std::map<std::pair<DeviceIndex, DeviceIndex>, Bytes32> pair_seed;
  for (DeviceIndex a = 0; a < kDevices; ++a) {
    self[a] = random_secret();
    for (DeviceIndex b = a + 1; b < kDevices; ++b) pair_seed[{a, b}] = random_secret();
  }
  std::vector<uint32_t> masked_sum(kLength + 1, 0), reported_sum(kLength + 1, 0);
  for (DeviceIndex me = 0; me < kDevices; ++me) {
    std::vector<uint32_t> words = quantise(std::vector<double>(kLength, 0.25 * me), 1, p, random_secret());
    add_noise_share(std::span(words).first(kLength), p.bits, plan.per_device, random_secret());
    std::map<DeviceIndex, Bytes32> seeds;
    for (DeviceIndex peer = 0; peer < kDevices; ++peer)
      if (peer != me) seeds[peer] = pair_seed[{std::min(me, peer), std::max(me, peer)}];
    add_modular(masked_sum, mask_input(words, p.bits, self[me], me, seeds), p.bits);
    add_modular(reported_sum, words, p.bits);
  }
  for (const Bytes32& seed : self) {
    std::vector<uint32_t> mask = expand_mask(seed, kLength + 1, p.bits);
    for (size_t i = 0; i <= kLength; ++i) masked_sum[i] = (masked_sum[i] - mask[i]) & 0xffffff;
  }
  ASSERT_EQ(masked_sum, reported_sum);
  // Mean 0.375. Rounding moves it by less than n step / W = 0.001; the noise's sd on the mean is
  // z sensitivity step / W = 0.5 x 4022.4 x 0.001 / 4 = 0.50, and 14 sd bound it: a loose check
  // that the noised sum decodes.
  Dequantised result = dequantise(masked_sum, kDevices, p);
  for (double x : result.mean) ASSERT_NEAR(x, 0.375, 0.001 + 14 * plan.target_stddev * p.step() / kDevices);
}

TEST(SecAggDpNoise, CentralNoiseIsTheDiscreteGaussianOnAGrid) {
  std::vector<double> noise = central_gaussian_noise(50000, 0.25, 0x1p-12, Bytes32{9});
  double squares = 0;
  for (double x : noise) {
    EXPECT_EQ(std::remainder(x, 0x1p-12), 0.0);  // the grid, exactly (a power of two)
    squares += x * x;
  }
  // sd of the variance estimate: 0.0625 sqrt(2 / 50000) = 4e-4.
  EXPECT_NEAR(squares / 50000, 0.0625, 5 * 0.0625 * std::sqrt(2.0 / 50000));
}

TEST(SecAggDpNoise, VariancesRoundUpWithinTheSamplersBounds) {
  NoiseVariance v = NoiseVariance::at_least(0.1);
  EXPECT_EQ(v.denominator, 1u << 20);
  EXPECT_GE(v.value(), 0.1);
  EXPECT_LT(v.value(), 0.1 + 1.0 / (1 << 20));
  NoiseVariance large = NoiseVariance::at_least(1e11);  // needs a smaller denominator
  EXPECT_LE(large.numerator, uint64_t{1} << 40);
  EXPECT_GE(large.value(), 1e11);
  for (double bad : {0.0, -1.0, std::nan(""), 2e12})
    EXPECT_EQ(refusal_of([&] { NoiseVariance::at_least(bad); }).reason, Reason::Parameter) << bad;
  for (NoiseVariance bad :
       {NoiseVariance{0, 1}, NoiseVariance{1, 0}, NoiseVariance{(uint64_t{1} << 40) + 1, 1},
        NoiseVariance{1, (uint64_t{1} << 20) + 1}}) {
    Refusal refusal = refusal_of([&] { sample_discrete_gaussian(bad, 1, Bytes32{}); });
    EXPECT_NE(refusal.message.find("numerator in [1, 2^40]"), std::string::npos) << refusal.message;
  }
}

TEST(SecAggDpNoise, CalibrationRefusesByName) {
  FixedPointParameters p{
      .bits = 32, .l2_bound = std::nullopt, .range = 1, .levels = 100, .max_weight = 1, .max_devices = 10};
  EXPECT_NE(refusal_of([&] { plan_distributed_noise(p, 10, 1.0, 5); }).message.find("l2_bound"),
            std::string::npos);
  p.l2_bound = 1.0;
  for (double z : {0.0, -1.0, std::nan("")})
    EXPECT_NE(refusal_of([&] { plan_distributed_noise(p, 10, z, 5); }).message.find("noise_multiplier"),
              std::string::npos);
  for (uint32_t m : {0u, 11u})
    EXPECT_NE(refusal_of([&] { plan_distributed_noise(p, 10, 1.0, m); }).message.find("min_devices"),
              std::string::npos);
  // The finest step for 10 devices leaves the noise 7 of 2^31 - 1: a margin of 14 standard deviations
  // (sigma about 2^17.7 here) does not fit and the parameters are refused.
  p.l2_bound = 0x1p-10;
  p.levels = largest_levels(32, 10, 1, 0);
  p.noise_margin = plan_distributed_noise(p, 1000, 1.0, 1).noise_margin;
  EXPECT_NE(refusal_of([&] { check_fixed_point(p); }).message.find("headroom"), std::string::npos);
}

}  // namespace
}  // namespace tn::federated::secagg
