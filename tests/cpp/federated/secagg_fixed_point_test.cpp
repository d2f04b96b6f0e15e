// Fixed point for secure aggregation: the dequantised sum of quantised updates is their weighted
// mean within the bound stochastic rounding gives; the rounding is unbiased; the headroom rule is
// enforced; and the edges (non-finite values, empty updates, zero and capped weights).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "federated/fixed_point.h"
#include "secagg_test_util.h"

namespace tn::federated::secagg {
namespace {

using Reason = SecAggRefused::Reason;

Bytes32 seed_of(uint32_t value) {
  Bytes32 seed{};
  for (int i = 0; i < 4; ++i) seed[i] = static_cast<uint8_t>(value >> (8 * i));
  return seed;
}

FixedPointParameters parameters(unsigned bits, uint32_t devices, uint32_t max_weight) {
  FixedPointParameters p{.bits = bits, .range = 0.5, .max_weight = max_weight, .max_devices = devices};
  p.levels = largest_levels(bits, devices, max_weight, 0);
  return p;
}

// What the device rounds: its update clipped to the L2 bound and then to the range, in double.
std::vector<double> clipped_reference(std::vector<double> x, const FixedPointParameters& p) {
  double norm = 0;
  for (double v : x) norm += v * v;
  norm = std::sqrt(norm);
  for (double& v : x) {
    if (p.l2_bound && norm > *p.l2_bound) v *= *p.l2_bound / norm;
    v = std::clamp(v, -p.range, p.range);
  }
  return x;
}

// n devices' updates (some coordinates beyond the range, some norms beyond the L2 bound), examples
// 0..2 * max_weight (some capped, one zero), summed modulo 2^bits as the unmasked sum would be.
// Bound: device i rounds y_i = w_i x_i / step to q_i with |q_i - y_i| < 1, so
// |sum_i q_i step - sum_i w_i x_i| < n step and the mean is off by less than n step / W, W = sum w_i.
// Double rounding adds a few ulps of the values (|mean| <= range): 1e-12 * range covers it.
void check_mean_within_rounding_bound(unsigned bits) {
  constexpr uint32_t kDevices = 20, kMaxWeight = 50;
  constexpr size_t kLength = 2000;
  FixedPointParameters p = parameters(bits, kDevices, kMaxWeight);
  p.l2_bound = 10.0;
  std::mt19937 random(bits);
  std::normal_distribution<double> coordinate(0, 0.3);
  std::uniform_int_distribution<uint64_t> examples(1, 2 * kMaxWeight);
  std::vector<uint32_t> sum(kLength + 1, 0);
  std::vector<double> weighted(kLength, 0);
  uint64_t total_weight = 0;
  for (uint32_t device = 0; device < kDevices; ++device) {
    std::vector<double> x(kLength);
    for (double& v : x) v = coordinate(random) * (device % 4 == 0 ? 3 : 1);  // every 4th beyond the L2 bound
    uint64_t count = device == 7 ? 0 : examples(random);
    add_modular(sum, quantise(x, count, p, seed_of(device)), bits);
    uint64_t w = std::min<uint64_t>(count, kMaxWeight);
    total_weight += w;
    std::vector<double> c = clipped_reference(x, p);
    for (size_t i = 0; i < kLength; ++i) weighted[i] += static_cast<double>(w) * c[i];
  }
  Dequantised result = dequantise(sum, kDevices, p);
  ASSERT_EQ(result.total_weight, total_weight);
  ASSERT_EQ(result.mean.size(), kLength);
  const double bound = kDevices * p.step() / static_cast<double>(total_weight) + 1e-12 * p.range;
  double worst = 0;
  for (size_t i = 0; i < kLength; ++i) {
    double error = std::abs(result.mean[i] - weighted[i] / static_cast<double>(total_weight));
    worst = std::max(worst, error);
    ASSERT_LE(error, bound) << "coordinate " << i << " at " << bits << " bits";
  }
  std::cout << bits << " bits: " << p.levels << " levels, step " << p.step() << ", worst mean error " << worst
            << " against the bound " << bound << "\n";
}

TEST(SecAggFixedPoint, DequantisedSumIsTheWeightedMeanWithinTheRoundingBound) {
  check_mean_within_rounding_bound(32);
  check_mean_within_rounding_bound(20);
}

// y = k + f with f in {0.3, 0.5, 0.9} and y negative too, rounded with 4,000 seeds x 25
// coordinates = 100,000 draws each: a draw is k + Bernoulli(f), whose standard deviation
// sqrt(f (1 - f)) <= 0.5, so the mean of 100,000 is within 5 x 0.5 / sqrt(1e5) = 0.0079 of y except
// with probability 6e-7 (the seeds are fixed, so the test is deterministic). Rounding to nearest
// would be off by 0.3, 0.5 or 0.1.
TEST(SecAggFixedPoint, StochasticRoundingIsUnbiasedOverSeeds) {
  FixedPointParameters p{.bits = 32, .range = 100, .levels = 100, .max_weight = 1, .max_devices = 1};
  constexpr int kSeeds = 4000, kCoordinates = 25;
  const double tolerance = 5 * 0.5 / std::sqrt(double{kSeeds} * kCoordinates);
  for (double y : {3.3, 0.5, -7.9, -0.3}) {
    std::vector<double> update(kCoordinates, y * p.step());
    double sum = 0;
    for (uint32_t seed = 0; seed < kSeeds; ++seed)
      for (size_t i = 0; i < kCoordinates; ++i)
        sum += static_cast<double>(static_cast<int32_t>(quantise(update, 1, p, seed_of(seed))[i]));
    double mean = sum / (kSeeds * kCoordinates);
    EXPECT_NEAR(mean, y, tolerance) << "y " << y;
    std::cout << "y " << y << ": mean of 100,000 roundings " << mean << "\n";
  }
}

// At the limit n * max_weight * levels = 2^(bits-1) - 1, n contributions all at +range or all at
// -range at full weight decode exactly; one more level is refused by name, as is a sum claimed to
// hold more contributions than max_devices.
TEST(SecAggFixedPoint, HeadroomIsEnforcedAndTheLimitDoesNotWrap) {
  constexpr unsigned kBits = 12;
  constexpr uint32_t kDevices = 5, kMaxWeight = 3;
  FixedPointParameters p = parameters(kBits, kDevices, kMaxWeight);
  ASSERT_EQ(p.levels, 2047u / 15);  // 136: 5 x 3 x 136 = 2040 <= 2047
  for (double sign : {1.0, -1.0}) {
    std::vector<uint32_t> sum(3, 0);
    for (uint32_t d = 0; d < kDevices; ++d)
      add_modular(sum, quantise(std::vector<double>{sign * 9, sign * p.range}, 1000, p, seed_of(d)), kBits);
    Dequantised result = dequantise(sum, kDevices, p);
    EXPECT_EQ(result.total_weight, kDevices * kMaxWeight);
    EXPECT_DOUBLE_EQ(result.mean[0], sign * p.range);
    EXPECT_DOUBLE_EQ(result.mean[1], sign * p.range);
  }
  FixedPointParameters over = p;
  ++over.levels;  // 5 x 3 x 137 = 2055 > 2047
  Refusal refusal = refusal_of([&] { check_fixed_point(over); });
  EXPECT_EQ(refusal.reason, Reason::Parameter);
  EXPECT_NE(refusal.message.find("headroom: 5 devices x max_weight 3 x 137 levels + noise margin 0 exceeds "
                                 "2^11 - 1: the sum would wrap"),
            std::string::npos)
      << refusal.message;
  EXPECT_NE(
      refusal_of([&] { quantise(std::vector<double>{0.1}, 1, over, Bytes32{}); }).message.find("headroom"),
      std::string::npos);
  over = p;
  over.noise_margin = 8;  // 2040 + 8 > 2047
  EXPECT_NE(refusal_of([&] { check_fixed_point(over); }).message.find("headroom"), std::string::npos);
  EXPECT_NE(refusal_of([&] { largest_levels(kBits, 2048, 1, 0); }).message.find("headroom"),
            std::string::npos);
  std::vector<uint32_t> sum(2, 0);
  EXPECT_NE(refusal_of([&] { dequantise(sum, kDevices + 1, p); }).message.find("6 contributions"),
            std::string::npos);
}

TEST(SecAggFixedPoint, RefusesNonFiniteCoordinatesByName) {
  FixedPointParameters p = parameters(32, 10, 1);
  double inf = std::numeric_limits<double>::infinity();
  for (double bad : {std::nan(""), inf, -inf}) {
    Refusal refusal = refusal_of([&] { quantise(std::vector<double>{0.1, 0.2, bad}, 1, p, Bytes32{}); });
    EXPECT_EQ(refusal.reason, Reason::Parameter);
    EXPECT_NE(refusal.message.find("coordinate 2 is"), std::string::npos) << refusal.message;
  }
}

TEST(SecAggFixedPoint, EmptyUpdatesZeroWeightsAndCappedWeights) {
  FixedPointParameters p = parameters(32, 10, 4);
  EXPECT_EQ(quantise(std::vector<double>{}, 3, p, Bytes32{}), (std::vector<uint32_t>{3}));
  Dequantised empty = dequantise(std::vector<uint32_t>{7}, 2, p);
  EXPECT_TRUE(empty.mean.empty());
  EXPECT_EQ(empty.total_weight, 7u);
  // A zero weight contributes zeros; a sum of only such contributions has no mean.
  EXPECT_EQ(quantise(std::vector<double>{0.3, -0.2}, 0, p, Bytes32{}), (std::vector<uint32_t>{0, 0, 0}));
  Refusal refusal = refusal_of([&] { dequantise(std::vector<uint32_t>{0, 0, 0}, 3, p); });
  EXPECT_NE(refusal.message.find("total weight is 0"), std::string::npos) << refusal.message;
  // Examples above max_weight weigh max_weight.
  EXPECT_EQ(quantise(std::vector<double>{}, 1000, p, Bytes32{}), (std::vector<uint32_t>{4}));
}

// What an unmasked sum cannot be: more weight, or a larger coordinate, than its contributions can
// carry; a word not below 2^bits; no weight word. Each names itself.
TEST(SecAggFixedPoint, RefusesSumsThatNoContributionsProduce) {
  FixedPointParameters p = parameters(16, 4, 2);  // 4095 levels: 2 contributions reach 16380
  auto message = [&](std::vector<uint32_t> sum) {
    return refusal_of([&] { dequantise(sum, 2, p); }).message;
  };
  EXPECT_NE(message({0, 5}).find("total weight 5 exceeds 2 contributions x max_weight 2"), std::string::npos);
  EXPECT_NE(message({16381, 1}).find("sum coordinate 0 is 16381, beyond the 16380"), std::string::npos);
  EXPECT_NE(message({65536 - 16381, 1}).find("sum coordinate 0 is -16381"), std::string::npos);
  EXPECT_NE(message({65536, 1}).find("sum word 0 is 65536, not below 2^16"), std::string::npos);
  EXPECT_NE(message({}).find("without its weight word"), std::string::npos);
  EXPECT_EQ(dequantise(std::vector<uint32_t>{65536 - 16380, 1}, 2, p).weighted_sum[0], -16380 * p.step());
}

TEST(SecAggFixedPoint, RefusesParametersByName) {
  auto message = [](FixedPointParameters p) { return refusal_of([&] { check_fixed_point(p); }).message; };
  FixedPointParameters good{.bits = 32, .range = 1, .levels = 1, .max_weight = 1, .max_devices = 1};
  for (unsigned bits : {0u, 1u, 33u}) {
    FixedPointParameters p = good;
    p.bits = bits;
    EXPECT_NE(message(p).find("bits"), std::string::npos);
  }
  for (double range : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    FixedPointParameters p = good;
    p.range = range;
    EXPECT_NE(message(p).find("range"), std::string::npos);
    p = good;
    p.l2_bound = range;
    EXPECT_NE(message(p).find("l2_bound"), std::string::npos);
  }
  FixedPointParameters p = good;
  p.levels = 0;
  EXPECT_NE(message(p).find("levels"), std::string::npos);
  p = good;
  p.max_weight = 0;
  EXPECT_NE(message(p).find("max_weight"), std::string::npos);
  p = good;
  p.max_devices = 0;
  EXPECT_NE(message(p).find("max_devices"), std::string::npos);
}

}  // namespace
}  // namespace tn::federated::secagg
