// The privacy accountant against mpmath at 50 digits, against TF Privacy's published MNIST figure,
// and its special cases, composition and refusals.
#include "federated/privacy_accountant.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iomanip>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "federated/errors.h"

namespace tn::federated::privacy {
namespace {

struct RdpReference {
  double sampling_rate, noise_multiplier, order, rdp;
};
struct EpsilonReference {
  double sampling_rate, noise_multiplier;
  uint64_t steps;
  double delta, epsilon, order;
};
#include "privacy_reference.inc"

// Tolerance. Integer orders: log A is a log-sum-exp of at most 257 positive terms, each good to a few
// ulps, so the RDP is good to ~1e-13 relative; 1e-11 leaves room. Fractional orders: past alpha both
// series alternate with shrinking terms and stop once each term is below e^-30, so each omitted tail
// is below e^-30 and log A (A >= 1) is off by at most 2 e^-30 = 1.9e-13, i.e. the RDP by
// 1.9e-13 / (alpha - 1). Measured worst (printed): 9.3e-13 absolute at alpha 1.1 (bound 1.9e-12),
// 1.3e-12 relative at integer orders.
double rdp_tolerance(const RdpReference& ref) {
  return 1e-11 * ref.rdp + 2 * std::exp(-30.0) / (ref.order - 1);
}

TEST(PrivacyAccountant, RdpMatchesMpmathAtIntegerAndFractionalOrders) {
  double worst_fractional_absolute = 0, worst_integer_relative = 0;
  for (const RdpReference& ref : kRdpReferences) {
    double rdp = sampled_gaussian_rdp(ref.sampling_rate, ref.noise_multiplier, ref.order);
    EXPECT_NEAR(rdp, ref.rdp, rdp_tolerance(ref))
        << "q " << ref.sampling_rate << " sigma " << ref.noise_multiplier << " order " << ref.order;
    double error = std::abs(rdp - ref.rdp);
    if (ref.order == std::floor(ref.order))
      worst_integer_relative = std::max(worst_integer_relative, error / ref.rdp);
    else
      worst_fractional_absolute = std::max(worst_fractional_absolute, error);
  }
  std::cout << "against mpmath: worst relative RDP error at integer orders " << worst_integer_relative
            << ", worst absolute at fractional orders " << worst_fractional_absolute << "\n";
}

std::vector<double> mnist_orders() { return {std::begin(kMnistOrders), std::end(kMnistOrders)}; }

PrivacySpent mnist_spent(const EpsilonReference& setting) {
  std::vector<double> rdp =
      sampled_gaussian_rdp(setting.sampling_rate, setting.noise_multiplier, setting.steps, mnist_orders());
  return epsilon_from_rdp(mnist_orders(), rdp, setting.delta);
}

// The best order is 9, an integer: epsilon = 14063 RDP + log(1e5) / 8 = 1.48 + 1.44, and the RDP's
// relative error (1e-11 at most) is ~1.5e-11 of epsilon; 1e-10 leaves room.
TEST(PrivacyAccountant, MnistEpsilonMatchesMpmath) {
  PrivacySpent spent = mnist_spent(kMnistEpsilon);
  std::cout << std::setprecision(17) << "MNIST setting: epsilon " << spent.epsilon << " at order "
            << spent.order << ", mpmath " << kMnistEpsilon.epsilon << "\n";
  EXPECT_NEAR(spent.epsilon, kMnistEpsilon.epsilon, 1e-10);
  EXPECT_EQ(spent.order, kMnistEpsilon.order);
}

// TF Privacy's compute_dp_sgd_privacy.py (2019, tensorflow/privacy,
// privacy/analysis/compute_dp_sgd_privacy.py, module docstring): "--N=60000 --batch_size=256
// --noise_multiplier=1.12 --epochs=60 --delta=1e-5 ... satisfies (2.92, 1e-5)-DP", with the orders
// of kMnistOrders, steps = ceil(epochs * N / batch_size) = 14063 and the classic conversion. It
// prints epsilon with 3 significant digits, so 2.92 means [2.915, 2.925).
TEST(PrivacyAccountant, MnistEpsilonMatchesTfPrivacysPublishedFigure) {
  EpsilonReference published{256.0 / 60000, 1.12, 14063, 1e-5, 2.92, 0};
  EXPECT_NEAR(mnist_spent(published).epsilon, 2.92, 0.005);
}

TEST(PrivacyAccountant, NoSamplingSpendsNothingAndFullSamplingIsThePlainGaussian) {
  for (double order : {1.5, 2.0, 7.3, 64.0}) {
    EXPECT_EQ(sampled_gaussian_rdp(0, 1.1, order), 0);
    EXPECT_DOUBLE_EQ(sampled_gaussian_rdp(1, 1.1, order), order / (2 * 1.1 * 1.1));
  }
}

// Near q = 1 the series must approach the plain Gaussian's alpha / (2 sigma^2) from below.
TEST(PrivacyAccountant, RdpApproachesThePlainGaussianAsTheRateApproachesOne) {
  for (double order : {2.0, 2.5, 10.0}) {
    double rdp = sampled_gaussian_rdp(1 - 1e-9, 2.0, order), plain = order / 8;
    EXPECT_LE(rdp, plain);
    EXPECT_NEAR(rdp, plain, 1e-6 * plain) << order;
  }
}

TEST(PrivacyAccountant, RoundsComposeAdditively) {
  std::vector<double> orders = {1.5, 8.0, 32.0};
  std::vector<double> once = sampled_gaussian_rdp(0.02, 1.3, 1, orders);
  std::vector<double> many = sampled_gaussian_rdp(0.02, 1.3, 500, orders);
  RdpAccountant accountant(orders);
  accountant.add_rounds(0.02, 1.3, 200);
  accountant.add_rounds(0.02, 1.3, 300);
  accountant.add_rounds(0.5, 3.0);  // a round of another rate and noise adds its own RDP
  for (size_t i = 0; i < orders.size(); ++i) {
    EXPECT_DOUBLE_EQ(many[i], 500 * once[i]);
    EXPECT_DOUBLE_EQ(accountant.rdp()[i], many[i] + sampled_gaussian_rdp(0.5, 3.0, orders[i]));
  }
}

// Orders 2 and 10 with RDP 0.1 and 1, delta = e^-9: epsilon 0.1 + 9 = 9.1 or 1 + 1 = 2.
TEST(PrivacyAccountant, EpsilonIsTheBestOrdersClassicBound) {
  PrivacySpent spent = epsilon_from_rdp({2, 10}, {0.1, 1.0}, std::exp(-9.0));
  EXPECT_DOUBLE_EQ(spent.epsilon, 2.0);
  EXPECT_EQ(spent.order, 10);
  double infinity = std::numeric_limits<double>::infinity();
  EXPECT_EQ(epsilon_from_rdp({2}, {infinity}, 1e-5).epsilon, infinity);
}

void expect_refused(const std::function<void()>& call, const std::string& named) {
  try {
    call();
    ADD_FAILURE() << "not refused: " << named;
  } catch (const ParameterRefused& refused) {
    EXPECT_NE(std::string(refused.what()).find(named), std::string::npos) << refused.what();
  }
}

TEST(PrivacyAccountant, RefusesInvalidParametersByName) {
  double nan = std::nan("");
  for (double q : {-0.1, 1.5, nan}) expect_refused([&] { sampled_gaussian_rdp(q, 1, 2); }, "sampling_rate");
  for (double sigma : {0.0, -1.0, nan, std::numeric_limits<double>::infinity()})
    expect_refused([&] { sampled_gaussian_rdp(0.1, sigma, 2); }, "noise_multiplier");
  for (double order : {1.0, 0.5, -3.0, nan, 1e5 + 1, 1e12, std::numeric_limits<double>::infinity()})
    expect_refused([&] { sampled_gaussian_rdp(0.1, 1, order); }, "order");
  for (double delta : {0.0, 1.0, -1e-5, nan})
    expect_refused([&] { epsilon_from_rdp({2}, {1}, delta); }, "delta");
  expect_refused([] { epsilon_from_rdp({}, {}, 1e-5); }, "no orders");
  expect_refused([] { epsilon_from_rdp({2, 3}, {1}, 1e-5); }, "2 orders but 1 RDP values");
  expect_refused([] { epsilon_from_rdp({1}, {1}, 1e-5); }, "order");
  expect_refused([] { epsilon_from_rdp({2}, {-1}, 1e-5); }, "RDP");
  expect_refused([] { RdpAccountant accountant({0.9}); }, "order");
}

TEST(PrivacyAccountant, ARefusedRoundLeavesTheTotalAsItWas) {
  RdpAccountant accountant({2.0, 3.0});
  accountant.add_rounds(0.1, 1.0);
  std::vector<double> before = accountant.rdp();
  expect_refused([&] { accountant.add_rounds(0.1, 0); }, "noise_multiplier");
  EXPECT_EQ(accountant.rdp(), before);
}

}  // namespace
}  // namespace tn::federated::privacy
