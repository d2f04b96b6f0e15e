// Central differential privacy in the coordinator's rounds (central_dp.h): the noised sum a
// mean-family strategy reads is the clipped updates' sum plus noise of the calibrated variance,
// the epsilon reported is the accountant's for the rounds charged, the task stops at its budget,
// and bad configurations are refused by name.
//
// Expected values are computed here independently: the clipped mean in long double from the
// updates, the noise's standard deviation from its formula, and epsilon from the Gaussian
// mechanism's RDP alpha / (2 z^2) per round and Mironov's conversion over the orders, written out.
// The statistical checks use fixed seeds; their tolerance is 5 standard deviations of the
// estimator, so that a correct implementation fails one with probability below 6e-7 over the
// choice of seed (two-sided normal tail).
#include "central_dp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "federated/errors.h"
#include "federated/strategy.h"
#include "metrics.h"
#include "round_params.h"
#include "test_support.h"

namespace tn::server {
namespace {

using federated::ContributionLayout;
using federated::Model;
using federated::secagg::Bytes32;
using tn::test::message_of;

Model double_model(const std::vector<std::vector<double>>& tensors) {
  Model model;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& values = tensors[i];
    model.tensors.push_back(federated::copy_tensor(
        "t" + std::to_string(i), ScalarType::Double, {int64_t(values.size())},
        {reinterpret_cast<const std::byte*>(values.data()), values.size() * sizeof(double)}));
  }
  return model;
}

Bytes32 seed_of(uint8_t value) {
  Bytes32 seed{};
  seed.fill(value);
  return seed;
}

// Each device's packed contribution [n x ..., n], read back as the hub's sources read it.
std::vector<ContributionSource> sources_of(const ContributionLayout& layout,
                                           const std::vector<Model>& trained,
                                           const std::vector<int64_t>& examples) {
  std::vector<ContributionSource> sources;
  for (size_t i = 0; i < trained.size(); ++i) {
    auto packed = std::make_shared<std::vector<double>>(layout.elements());
    layout.pack(trained[i], examples[i], federated::UpdateLimits{}, *packed);
    sources.push_back([packed](uint64_t first, uint64_t count, double* out) {
      std::memcpy(out, packed->data() + first, count * sizeof(double));
    });
  }
  return sources;
}

// Every element the strategy would read, tensor after tensor, and the total weight.
std::vector<double> read_all(const federated::WeightedSumReader& reader, const Model& global,
                             double* weight) {
  std::vector<double> all;
  for (const federated::NamedTensor& tensor : global.tensors) {
    std::vector<double> values(size_t(tensor.numel()));
    reader.read(tensor, 0, values);
    all.insert(all.end(), values.begin(), values.end());
  }
  *weight = reader.total_weight;
  return all;
}

CentralDpParams fixed_clipping(double z, double clip_norm) {
  CentralDpParams params;
  params.noise_multiplier = z;
  params.clip_norm = clip_norm;
  params.delta = 1e-5;
  params.epsilon_budget = 1e9;
  return params;
}

// epsilon of `rounds` rounds of the Gaussian mechanism at multiplier z, by Mironov's conversion
// minimised over TF Privacy's usual orders (1.1 to 10.9 by 0.1, 12 to 63, 128, 256, 512).
double gaussian_epsilon(double z, uint64_t rounds, double delta) {
  std::vector<double> orders;
  for (int tenth = 11; tenth <= 109; ++tenth) orders.push_back(tenth / 10.0);
  for (int order = 12; order <= 63; ++order) orders.push_back(order);
  for (double order : {128.0, 256.0, 512.0}) orders.push_back(order);
  double best = INFINITY;
  for (double alpha : orders)
    best = std::min(best, double(rounds) * alpha / (2 * z * z) + std::log(1 / delta) / (alpha - 1));
  return best;
}

TEST(CentralDp, NoisedSumIsTheClippedUpdatesSumPlusTheNoise) {
  const Model global = double_model({{0.5, -1.0, 2.0}, {0.25, 0.0, -0.75, 1.5, 3.0}});
  const ContributionLayout layout(global.spec());
  const std::vector<std::vector<double>> flat_updates = {
      {0.1, 0.0, -0.2, 0.0, 0.05, 0.0, 0.0, 0.1},         // norm 0.25: inside the bound
      {3.0, -4.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0},          // norm 5: clipped to 1
      {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -0.48, 0.64},        // norm 0.8: inside
      {10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0}};  // clipped
  const std::vector<int64_t> examples = {3, 1, 7, 100};   // ignored: every device weighs 1
  std::vector<double> g = {0.5, -1.0, 2.0, 0.25, 0.0, -0.75, 1.5, 3.0};
  std::vector<Model> trained, untrained;
  for (const auto& update : flat_updates) {
    std::vector<double> x(g.size());
    for (size_t k = 0; k < g.size(); ++k) x[k] = g[k] + update[k];
    trained.push_back(double_model({{x.begin(), x.begin() + 3}, {x.begin() + 3, x.end()}}));
    untrained.push_back(global);
  }
  const uint32_t devices_per_round = 5;  // one of the five selected did not contribute
  const CentralDp dp(fixed_clipping(0.8, 1.0), devices_per_round, 0);

  // The noise alone: the same seed over updates that are all zero.
  CentralDp::Clipped none;
  double weight = 0;
  const std::vector<double> zero_sum =
      read_all(dp.noised_sum(layout, global, sources_of(layout, untrained, examples), seed_of(7), none),
               global, &weight);
  EXPECT_EQ(weight, devices_per_round);
  EXPECT_EQ(none.unclipped, 4u);

  CentralDp::Clipped clipped;
  const std::vector<double> sum =
      read_all(dp.noised_sum(layout, global, sources_of(layout, trained, examples), seed_of(7), clipped),
               global, &weight);
  EXPECT_EQ(weight, devices_per_round);
  ASSERT_EQ(clipped.norms.size(), 4u);
  std::vector<long double> clipped_sum(g.size(), 0);
  for (size_t i = 0; i < flat_updates.size(); ++i) {
    long double squares = 0;
    for (double value : flat_updates[i]) squares += (long double)value * value;
    const long double norm = std::sqrt(squares);
    EXPECT_NEAR(clipped.norms[i], double(norm), 1e-12 * double(norm)) << "device " << i;
    const long double scale = std::min<long double>(1, 1.0L / norm);
    for (size_t k = 0; k < g.size(); ++k) clipped_sum[k] += scale * flat_updates[i][k];
  }
  EXPECT_EQ(clipped.unclipped, 2u);  // norms 0.25 and 0.8
  double noise_size = 0;
  for (size_t k = 0; k < g.size(); ++k) {
    const double noise = zero_sum[k] - devices_per_round * g[k];
    noise_size += std::abs(noise);
    const double expected = double(devices_per_round * (long double)g[k] + clipped_sum[k] + noise);
    EXPECT_NEAR(sum[k], expected, 1e-12 * (std::abs(expected) + 10)) << "element " << k;
  }
  EXPECT_GT(noise_size, 0);  // the noise is there (stddev 0.8 a coordinate)

  // What fedavg makes of it: the round's model plus the noised sum over devices_per_round.
  const auto fedavg = federated::make_strategy("fedavg", nlohmann::json::object());
  const Model next = fedavg->aggregate_from_weighted_sum(
      global, dp.noised_sum(layout, global, sources_of(layout, trained, examples), seed_of(7), clipped));
  const double* first = reinterpret_cast<const double*>(next.tensors[0].data.get());
  EXPECT_NEAR(first[0], sum[0] / devices_per_round, 1e-15);
}

// The noise over `coordinates` coordinates of updates that are all zero, as the mean the strategy
// forms sees it: (sum - m g) / m.
std::vector<double> mean_noise(const CentralDp& dp, uint32_t m, size_t coordinates, uint8_t seed) {
  const Model global = double_model({std::vector<double>(coordinates, 0.25)});
  const ContributionLayout layout(global.spec());
  CentralDp::Clipped clipped;
  double weight = 0;
  std::vector<double> sum =
      read_all(dp.noised_sum(layout, global, sources_of(layout, {global, global, global}, {1, 2, 3}),
                             seed_of(seed), clipped),
               global, &weight);
  for (double& value : sum) value = (value - m * 0.25) / m;
  return sum;
}

// Mean and variance of the noise against their calibration: 0 and (z_updates C / m)^2, each within
// 5 standard deviations of its estimator (the variance of the mean of squares of N(0, s^2) is
// 2 s^4 / n).
void expect_calibrated(const std::vector<double>& noise, double stddev) {
  const double n = double(noise.size());
  long double sum = 0, squares = 0;
  for (double value : noise) {
    sum += value;
    squares += (long double)value * value;
  }
  EXPECT_NEAR(double(sum / n), 0.0, 5 * stddev / std::sqrt(n));
  const double variance = double(squares / n);
  std::printf("noise on the mean over %zu coordinates: mean %.4g, stddev %.6g, calibrated %.6g\n",
              noise.size(), double(sum / n), std::sqrt(variance), stddev);
  EXPECT_NEAR(variance, stddev * stddev, 5 * std::sqrt(2 / n) * stddev * stddev)
      << "measured stddev " << std::sqrt(variance) << ", calibrated " << stddev;
}

TEST(CentralDp, NoiseVarianceMatchesTheCalibration) {
  const uint32_t m = 4;
  const double z = 1.3, clip_norm = 0.2;
  const CentralDp dp(fixed_clipping(z, clip_norm), m, 0);
  const std::vector<double> a = mean_noise(dp, m, 40'000, 1), b = mean_noise(dp, m, 40'000, 2);
  expect_calibrated(a, z * clip_norm / m);  // 5 sd: 3.5 % of the variance
  expect_calibrated(b, z * clip_norm / m);
  // Rounds draw independent noise: the two seeds' draws are uncorrelated (within 5 sd of 0).
  long double product = 0;
  for (size_t k = 0; k < a.size(); ++k) product += (long double)a[k] * b[k];
  const double correlation = double(product / a.size()) / std::pow(z * clip_norm / m, 2);
  EXPECT_NEAR(correlation, 0.0, 5 / std::sqrt(double(a.size())));
}

TEST(CentralDp, AdaptiveClippingNoisesTheUpdatesWithWhatTheCountLeaves) {
  // z 2 with count_stddev 2.5: the updates take (2^-2 - 5^-2)^-1/2 = 2.18218 (9 % more than z,
  // 19 % more variance: far outside the tolerance).
  CentralDpParams params = fixed_clipping(2.0, 0.5);
  params.adaptive = CentralDpParams::Adaptive{0.5, 0.2, 2.5};
  const uint32_t m = 4;
  const CentralDp dp(params, m, 0);
  const double updates_z = 1 / std::sqrt(1 / 4.0 - 1 / 25.0);
  expect_calibrated(mean_noise(dp, m, 40'000, 3), updates_z * 0.5 / m);
}

TEST(CentralDp, AdaptiveClippingRaisesTheBoundWhenEveryUpdateIsClipped) {
  CentralDpParams params = fixed_clipping(1.0, 0.01);
  const uint32_t m = 20;
  params.adaptive = CentralDpParams::Adaptive{0.5, 0.2, m / 20.0};  // count noise 1: 0.05 on the fraction
  CentralDp dp(params, m, 0);
  CentralDp::Clipped clipped;
  clipped.norms.assign(m, 1.0);  // all above 0.01
  clipped.unclipped = 0;
  dp.round_completed(clipped, seed_of(4));
  // The released fraction is 0 + N(0, 0.05^2), clamped to [0, 1]: within 5 sd it is below 0.25,
  // so the bound grows by exp(0.2 (0.5 - b)) between exp(0.05) and exp(0.1).
  EXPECT_GE(dp.clip_norm(), 0.01 * std::exp(0.05));
  EXPECT_LE(dp.clip_norm(), 0.01 * std::exp(0.1) * (1 + 1e-12));
  EXPECT_EQ(dp.spent().rounds_charged(), 1u);
}

// The adaptive bound is stored in the strategy state committed with the model and read back at a
// restart; the strategy's own restore ignores it.
TEST(CentralDp, TheAdaptiveBoundIsStoredWithTheStrategyStateAndResumed) {
  const auto fedadam = federated::make_strategy("fedadam", nlohmann::json::object());
  federated::StrategyState state = fedadam->export_state();
  EXPECT_FALSE(stored_clip_norm(state));
  store_clip_norm(0.375, state);
  EXPECT_EQ(stored_clip_norm(state), 0.375);
  federated::restore_strategy(state);  // does not throw
  CentralDpParams params = fixed_clipping(1.0, 2.0);
  params.adaptive = CentralDpParams::Adaptive{0.5, 0.2, 1.0};
  EXPECT_EQ(CentralDp(params, 20, 3, stored_clip_norm(state)).clip_norm(), 0.375);
  EXPECT_EQ(CentralDp(params, 20, 0).clip_norm(), 2.0);
  state.meta["central_dp"] = {{"clip_norm", -1}};
  const std::string why = message_of<federated::ParameterRefused>([&] { stored_clip_norm(state); });
  EXPECT_NE(why.find("has no positive clip_norm"), std::string::npos) << why;
}

TEST(CentralDp, EpsilonIsTheAccountantsForTheRoundsCharged) {
  CentralDpParams params = fixed_clipping(3.0, 1.0);
  CentralDp dp(params, 10, 2);  // resumed after two completed rounds
  EXPECT_EQ(CentralDpParams(params).spent(0).epsilon(), 0.0);
  const double two = gaussian_epsilon(3.0, 2, 1e-5);
  EXPECT_NEAR(dp.spent().epsilon(), two, 1e-12 * two);
  for (int round = 0; round < 5; ++round) dp.round_completed({}, seed_of(5));
  const double seven = gaussian_epsilon(3.0, 7, 1e-5);
  EXPECT_NEAR(dp.spent().epsilon(), seven, 1e-12 * seven);
  EXPECT_EQ(dp.spent().rounds_charged(), 7u);
  EXPECT_NEAR(params.spent(7).epsilon(), seven, 1e-12 * seven);  // what the admin API reports
}

TEST(CentralDp, TheTaskStopsBeforeTheRoundThatWouldPassTheBudget) {
  CentralDpParams params = fixed_clipping(4.0, 1.0);
  // Halfway between the epsilons of 11 and 12 rounds: 11 rounds fit.
  params.epsilon_budget = (gaussian_epsilon(4.0, 11, 1e-5) + gaussian_epsilon(4.0, 12, 1e-5)) / 2;
  CentralDp dp(params, 10, 0);
  uint64_t rounds = 0;
  while (!dp.budget_refusal() && rounds < 100) {
    dp.round_completed({}, seed_of(6));
    ++rounds;
  }
  EXPECT_EQ(rounds, 11u);
  EXPECT_LE(dp.spent().epsilon(), params.epsilon_budget);
  const std::string why = dp.budget_refusal().value_or("");
  EXPECT_NE(why.find("privacy budget: round 12 would take epsilon"), std::string::npos) << why;
}

TEST(CentralDp, MetricsGiveTheEpsilonToTheDouble) {
  Metrics metrics;
  const double epsilon = CentralDpParams{3.0, 1.0, 1e-5, 100, std::nullopt}.spent(4).epsilon();
  metrics.set_task_epsilon("task-1", epsilon);
  const std::string text = metrics.render(0);
  EXPECT_NE(text.find("# TYPE torchnative_task_privacy_epsilon gauge\n"), std::string::npos) << text;
  const std::string series = "torchnative_task_privacy_epsilon{task=\"task-1\"} ";
  const size_t at = text.find(series);
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_EQ(std::stod(text.substr(at + series.size())), epsilon);
  EXPECT_NEAR(epsilon, gaussian_epsilon(3.0, 4, 1e-5), 1e-12 * epsilon);
}

v1::CreateTaskHeader dp_header() {
  v1::CreateTaskHeader header;
  header.set_strategy("fedavg");
  header.set_rounds(10);
  header.mutable_selection()->set_devices_per_round(20);
  header.set_min_available_devices(20);
  header.set_min_updates(10);
  header.set_round_timeout_ms(1000);
  v1::CentralDp& dp = *header.mutable_central_dp();
  dp.set_noise_multiplier(2.0);
  dp.set_clip_norm(1.0);
  dp.set_delta(1e-5);
  dp.set_epsilon_budget(50);
  return header;
}

std::string central_dp_refusal(const std::function<void(v1::CreateTaskHeader&)>& change) {
  v1::CreateTaskHeader header = dp_header();
  change(header);
  return message_of<federated::ParameterRefused>([&] { RoundParams::from_header(header, "t"); });
}

TEST(CentralDp, BadConfigurationsAreRefusedByName) {
  const struct {
    std::function<void(v1::CreateTaskHeader&)> change;
    std::string named;
  } cases[] = {
      {[](auto& h) { h.mutable_central_dp()->set_noise_multiplier(0); }, "central_dp.noise_multiplier 0"},
      {[](auto& h) { h.mutable_central_dp()->set_noise_multiplier(NAN); }, "central_dp.noise_multiplier nan"},
      {[](auto& h) { h.mutable_central_dp()->set_clip_norm(-1); }, "central_dp.clip_norm -1"},
      {[](auto& h) { h.mutable_central_dp()->set_delta(0); }, "central_dp.delta 0 must be in (0, 1)"},
      {[](auto& h) { h.mutable_central_dp()->set_delta(1); }, "central_dp.delta 1 must be in (0, 1)"},
      {[](auto& h) { h.mutable_central_dp()->set_epsilon_budget(INFINITY); },
       "central_dp.epsilon_budget inf"},
      {[](auto& h) { h.mutable_central_dp()->set_epsilon_budget(1); }, "is below one round's epsilon"},
      {[](auto& h) { h.set_min_available_devices(19); }, "min_available_devices (19) at least"},
      {[](auto& h) { h.mutable_central_dp()->mutable_adaptive_clipping()->set_target_quantile(1.5); },
       "adaptive_clipping.target_quantile 1.5"},
      {[](auto& h) {
         h.mutable_central_dp()->mutable_adaptive_clipping()->set_target_quantile(0.5);
         h.mutable_central_dp()->mutable_adaptive_clipping()->set_learning_rate(0);
       },
       "adaptive_clipping.learning_rate 0"},
      {[](auto& h) {
         auto& adaptive = *h.mutable_central_dp()->mutable_adaptive_clipping();
         adaptive.set_target_quantile(0.5);
         adaptive.set_learning_rate(0.2);
         adaptive.set_count_stddev(-1);
       },
       "adaptive_clipping.count_stddev -1"},
      {[](auto& h) {  // the default count_stddev, 20 / 20 = 1, leaves z 2 nothing
         auto& adaptive = *h.mutable_central_dp()->mutable_adaptive_clipping();
         adaptive.set_target_quantile(0.5);
         adaptive.set_learning_rate(0.2);
       },
       "adaptive_clipping.count_stddev 1 with noise_multiplier 2"},
  };
  for (const auto& each : cases) {
    const std::string why = central_dp_refusal(each.change);
    EXPECT_NE(why.find(each.named), std::string::npos) << why;
  }
  for (const char* robust : {"fedmedian", "trimmed_mean", "krum", "multi_krum"}) {
    const nlohmann::json params =
        std::string(robust) == "multi_krum" ? nlohmann::json{{"m", 2}} : nlohmann::json::object();
    const std::string why = message_of<federated::ParameterRefused>(
        [&] { check_strategy_takes_central_dp(*federated::make_strategy(robust, params)); });
    EXPECT_NE(why.find("central_dp with strategy '" + std::string(robust) + "'"), std::string::npos) << why;
  }
  check_strategy_takes_central_dp(*federated::make_strategy("fedadam", nlohmann::json::object()));
}

TEST(CentralDp, TheParametersAreStoredWithTheTaskAndReadBack) {
  v1::CreateTaskHeader header = dp_header();
  auto& adaptive = *header.mutable_central_dp()->mutable_adaptive_clipping();
  adaptive.set_target_quantile(0.7);
  adaptive.set_learning_rate(0.2);
  adaptive.set_count_stddev(5);
  const RoundParams params = RoundParams::from_header(header, "t");
  const RoundParams back = RoundParams::from_json(params.to_json(), "t");
  ASSERT_TRUE(back.central_dp && back.central_dp->adaptive);
  EXPECT_EQ(back.central_dp->noise_multiplier, 2.0);
  EXPECT_EQ(back.central_dp->delta, 1e-5);
  EXPECT_EQ(back.central_dp->adaptive->target_quantile, 0.7);
  EXPECT_EQ(back.central_dp->adaptive->count_stddev, 5.0);
  header.clear_central_dp();
  EXPECT_FALSE(RoundParams::from_json(RoundParams::from_header(header, "t").to_json(), "t").central_dp);
}

}  // namespace
}  // namespace tn::server
