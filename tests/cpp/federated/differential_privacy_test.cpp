// Central DP's pure functions: L2 clipping, the noise on the mean, adaptive clipping converging to
// its target quantile, the split of the noise multiplier with the clipped count, and the
// accountant's epsilon for the parameters used.
#include "federated/differential_privacy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <random>
#include <vector>

#include "federated/dp_noise.h"
#include "federated/errors.h"
#include "federated/privacy_accountant.h"

namespace tn::federated::privacy {
namespace {

TEST(DifferentialPrivacy, ClippingScalesToTheBoundAndReturnsTheNorm) {
  std::vector<double> x = {3, 4};
  EXPECT_DOUBLE_EQ(clip_l2(x, 1), 5);
  EXPECT_DOUBLE_EQ(x[0], 0.6);
  EXPECT_DOUBLE_EQ(x[1], 0.8);
  std::vector<double> small = {0.3, -0.4};
  EXPECT_DOUBLE_EQ(clip_l2(small, 1), 0.5);
  EXPECT_EQ(small, (std::vector<double>{0.3, -0.4}));
  // Squares that overflow still give the norm.
  std::vector<double> huge = {1e300, 1e300};
  EXPECT_DOUBLE_EQ(clip_l2(huge, 2), std::sqrt(2.0) * 1e300);
  EXPECT_NEAR(l2_norm(huge), 2, 1e-15);
  std::vector<double> bad = {1, std::nan("")};
  EXPECT_THROW(clip_l2(bad, 1), ParameterRefused);
  EXPECT_EQ(bad[0], 1);
  EXPECT_THROW(clip_l2(small, 0), ParameterRefused);
  EXPECT_DOUBLE_EQ(central_mean_noise_stddev(1.1, 0.5, 100), 0.0055);
  EXPECT_THROW(central_mean_noise_stddev(1.1, 0.5, 0), ParameterRefused);
}

// log-normal norms (log N(0, 1)): the gamma quantile is exp(Phi^-1(gamma)). 100 devices a round,
// sigma_b = 100 / 20 = 5 (TFF's default), eta 0.2, from C = 0.1; the noise on the count is the
// central discrete Gaussian (dp_noise.h). Tolerance, derived: near the quantile log C moves by
// eta (b - gamma), b's standard deviation sqrt(gamma (1 - gamma) / 100 + (5 / 100)^2) <= 0.071, and is
// pulled back at rate eta phi(Phi^-1(gamma)) per round (phi the normal density: 0.08 at the median,
// 0.035 at 0.9), so log C wanders with standard deviation about 0.014 / sqrt(1 - (1 - 0.035)^2) =
// 0.054 at worst; its mean over the last 500 rounds is within 0.1 of log of the quantile.
TEST(DifferentialPrivacy, AdaptiveClippingConvergesToTheTargetQuantile) {
  constexpr int kRounds = 1000, kDevices = 100;
  for (auto [quantile, phi_inverse] : {std::pair{0.5, 0.0}, std::pair{0.9, 1.2815515655446004}}) {
    AdaptiveClipping state{
        .clip_norm = 0.1, .target_quantile = quantile, .learning_rate = 0.2, .count_stddev = 5};
    std::mt19937 random(11);
    std::lognormal_distribution<double> norm(0, 1);
    std::vector<double> count_noise = secagg::central_gaussian_noise(
        kRounds, state.count_stddev, state.count_stddev / 1024, secagg::Bytes32{3});
    double log_sum = 0;
    for (int round = 0; round < kRounds; ++round) {
      uint64_t unclipped = 0;
      for (int d = 0; d < kDevices; ++d) unclipped += norm(random) <= state.clip_norm ? 1 : 0;
      state.clip_norm = next_clip_norm(state, unclipped, count_noise[round], kDevices);
      if (round >= kRounds / 2) log_sum += std::log(state.clip_norm);
    }
    double mean_log = log_sum / (kRounds / 2);
    EXPECT_NEAR(mean_log, phi_inverse, 0.1) << "quantile " << quantile;
    std::cout << "target quantile " << quantile << ": clip norm " << std::exp(mean_log)
              << " (geometric mean of the "
              << "last 500 rounds), true quantile " << std::exp(phi_inverse) << "\n";
  }
}

TEST(DifferentialPrivacy, AdaptiveClippingRefusesByName) {
  AdaptiveClipping good{.clip_norm = 1, .target_quantile = 0.5, .learning_rate = 0.2, .count_stddev = 5};
  auto refused = [](AdaptiveClipping s, const char* named) {
    try {
      next_clip_norm(s, 1, 0, 10);
      ADD_FAILURE() << "not refused: " << named;
    } catch (const ParameterRefused& e) {
      EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
    }
  };
  AdaptiveClipping s = good;
  s.target_quantile = 1.5;
  refused(s, "target_quantile");
  s = good;
  s.learning_rate = 0;
  refused(s, "learning_rate");
  s = good;
  s.clip_norm = std::numeric_limits<double>::infinity();
  refused(s, "clip_norm");
  EXPECT_THROW(next_clip_norm(good, 1, std::nan(""), 10), ParameterRefused);
  // A noised count beyond every device clamps the fraction to 1: the step is exp(-0.2 x 0.5).
  EXPECT_DOUBLE_EQ(next_clip_norm(good, 10, 1000, 10), std::exp(-0.1));
}

// z^-2 = z_updates^-2 + (2 sigma_b)^-2. z = 2, sigma_b = 2.5: (1/4 - 1/25)^-1/2 = 0.21^-1/2 = 2.1821789...
TEST(DifferentialPrivacy, TheClippedCountTakesItsShareOfTheNoise) {
  EXPECT_NEAR(updates_noise_multiplier(2, 2.5), 1 / std::sqrt(0.21), 1e-14);
  EXPECT_NEAR(updates_noise_multiplier(2, 2.5), 2.1821789, 1e-7);
  EXPECT_THROW(updates_noise_multiplier(2, 1), ParameterRefused);
  EXPECT_THROW(updates_noise_multiplier(0, 1), ParameterRefused);
}

// The parameters the accountant is asked about for a central-DP task: 60,000 devices, 256 sampled
// per round in expectation (q = 256 / 60000), z = 1.12, 14,063 rounds, delta 1e-5. The mechanism
// (Poisson sampling, clipped sum, Gaussian noise z C) is the one of TF Privacy's published MNIST
// figure "(2.92, 1e-5)-DP" (privacy_accountant_test.cpp), so the accountant must give 2.92. With
// adaptive clipping at sigma_b = 256 / 20 = 12.8 the updates need z 1.1204..., and the pair spends
// the same 2.92.
TEST(DifferentialPrivacy, TheAccountantGivesThePublishedEpsilonForTheseParameters) {
  const double q = 256.0 / 60000, z = 1.12;
  std::vector<double> orders = {1.25, 1.5, 1.75, 2., 2.25, 2.5, 3., 3.5, 4., 4.5};
  for (int order = 5; order <= 63; ++order) orders.push_back(order);
  for (double order : {128, 256, 512}) orders.push_back(order);
  PrivacySpent spent = epsilon_from_rdp(orders, sampled_gaussian_rdp(q, z, 14063, orders), 1e-5);
  EXPECT_NEAR(spent.epsilon, 2.92, 0.005);
  double z_updates = updates_noise_multiplier(z, 256.0 / 20);
  EXPECT_NEAR(z_updates, 1 / std::sqrt(1 / (z * z) - 1 / (25.6 * 25.6)), 1e-14);
  std::cout << "central DP, q " << q << ", z " << z << ", 14063 rounds: epsilon " << spent.epsilon
            << " at order " << spent.order << "; with adaptive clipping the updates take z " << z_updates
            << "\n";
}

}  // namespace
}  // namespace tn::federated::privacy
