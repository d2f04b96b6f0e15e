// A task's secure_aggregation block (secure_aggregation_params.h): validated by name, its
// defaults resolved, stored with the task's round parameters and read back, and refused with the
// strategies that read each update apart and with central DP.
//
// The expected graph parameters are the ones docs/secure_aggregation.md tabulates (10 devices,
// corrupt_fraction 5%: k 4, t 2 at dropout 10%; k 8, t 5 at 33% against an active coordinator),
// which the federated tests check against the values Bell et al.'s implementation publishes; the
// levels are worked out here from the headroom rule.
#include "secure_aggregation_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "federated/errors.h"
#include "federated/strategy.h"
#include "round_params.h"
#include "test_support.h"

namespace tn::server {
namespace {

using tn::test::message_of;

v1::CreateTaskHeader secure_header() {
  v1::CreateTaskHeader header;
  header.set_strategy("fedavg");
  header.set_rounds(10);
  header.mutable_selection()->set_devices_per_round(10);
  header.set_min_available_devices(10);
  header.set_min_updates(5);
  header.set_round_timeout_ms(1000);
  v1::SecureAggregation& secure = *header.mutable_secure_aggregation();
  secure.set_corrupt_fraction(0.05);
  secure.set_dropout_fraction(0.1);
  secure.set_clip_range(0.5);
  secure.set_max_weight(100);
  return header;
}

std::string secure_params_refusal(const std::function<void(v1::CreateTaskHeader&)>& change) {
  v1::CreateTaskHeader header = secure_header();
  change(header);
  return message_of<federated::ParameterRefused>([&] { RoundParams::from_header(header, "t"); });
}

TEST(SecureAggregationParams, DefaultsAreResolvedAndTheGraphDerivedForTheDevicesARound) {
  const RoundParams params = RoundParams::from_header(secure_header(), "t");
  ASSERT_TRUE(params.secure_aggregation);
  const SecureAggregationParams& secure = *params.secure_aggregation;
  EXPECT_EQ(secure.threat.security_bits, 40u);
  EXPECT_EQ(secure.threat.correctness_bits, 20u);
  EXPECT_EQ(secure.fixed_point.bits, 32u);
  EXPECT_FALSE(secure.fixed_point.l2_bound);
  EXPECT_EQ(secure.fixed_point.max_devices, 10u);
  // The finest step that fits: 10 devices x weight 100 x levels <= 2^31 - 1.
  EXPECT_EQ(secure.fixed_point.levels, 2'147'483u);
  const federated::secagg::GraphParameters graph = secure.graph();
  EXPECT_EQ(graph.degree, 4u);
  EXPECT_EQ(graph.threshold, 2u);
  EXPECT_NE(secure.planned_words(10).find("10 devices a round, 4 neighbours each, threshold 2"),
            std::string::npos)
      << secure.planned_words(10);
}

TEST(SecureAggregationParams, AnActiveCoordinatorRaisesTheThresholdMinUpdatesMustReach) {
  const auto active = [](v1::CreateTaskHeader& h) {
    h.mutable_secure_aggregation()->set_dropout_fraction(0.33);
    h.mutable_secure_aggregation()->set_active_coordinator(true);
  };
  const std::string why = secure_params_refusal([&](auto& h) {
    active(h);
    h.set_min_updates(4);
  });
  EXPECT_NE(why.find("min_updates (4) at least the threshold 5 derived for 10 devices"), std::string::npos)
      << why;
  v1::CreateTaskHeader header = secure_header();
  active(header);
  const RoundParams params = RoundParams::from_header(header, "t");
  EXPECT_EQ(params.secure_aggregation->graph().degree, 8u);
  EXPECT_EQ(params.secure_aggregation->graph().threshold, 5u);
}

TEST(SecureAggregationParams, BadConfigurationsAreRefusedByName) {
  const struct {
    std::function<void(v1::CreateTaskHeader&)> change;
    std::string named;
  } cases[] = {
      {[](auto& h) {
         auto& dp = *h.mutable_central_dp();
         dp.set_noise_multiplier(2);
         dp.set_clip_norm(1);
         dp.set_delta(1e-5);
         dp.set_epsilon_budget(50);
       },
       "CreateTask: secure_aggregation with central_dp: central DP clips each update on the coordinator, "
       "which secure aggregation keeps from it (for DP noised on the devices, give "
       "secure_aggregation.distributed_dp)"},
      {[](auto& h) { h.set_min_available_devices(9); },
       "secure_aggregation needs min_available_devices (9) at least selection.devices_per_round (10)"},
      {[](auto& h) {
         h.mutable_selection()->set_devices_per_round(2);
         h.set_min_available_devices(2);
         h.set_min_updates(2);
       },
       "CreateTask: secure_aggregation: 2 devices; at least 3"},
      {[](auto& h) { h.set_min_updates(1); }, "min_updates (1) at least the threshold 2"},
      {[](auto& h) { h.mutable_secure_aggregation()->set_corrupt_fraction(1); },
       "CreateTask: secure_aggregation: corrupt_fraction 1.000000 and dropout_fraction 0.100000 must be in "
       "[0, 1)"},
      {[](auto& h) { h.mutable_secure_aggregation()->set_security_bits(200); },
       "security_bits and correctness_bits must be in [1, 128]"},
      {[](auto& h) { h.mutable_secure_aggregation()->set_clip_range(0); },
       "secure_aggregation.clip_range 0 must be positive and finite"},
      {[](auto& h) { h.mutable_secure_aggregation()->set_clip_range(NAN); },
       "secure_aggregation.clip_range nan"},
      {[](auto& h) { h.mutable_secure_aggregation()->set_l2_bound(-1); }, "secure_aggregation.l2_bound -1"},
      {[](auto& h) { h.mutable_secure_aggregation()->set_max_weight(0); },
       "secure_aggregation.max_weight must be at least 1"},
      {[](auto& h) { h.mutable_secure_aggregation()->set_bits(33); },
       "CreateTask: secure_aggregation: fixed point: bits 33 is outside [2, 32]"},
      {[](auto& h) {  // 10 x 100 x 1 > 2^7 - 1: not one level fits
         h.mutable_secure_aggregation()->set_bits(8);
       },
       "headroom"},
      {[](auto& h) {  // 10 x 100 x 2^22 > 2^31 - 1
         h.mutable_secure_aggregation()->set_levels(1u << 22);
       },
       "headroom"},
  };
  for (const auto& each : cases) {
    const std::string why = secure_params_refusal(each.change);
    EXPECT_NE(why.find(each.named), std::string::npos) << why;
  }
}

TEST(SecureAggregationParams, RobustStrategiesAreRefusedByName) {
  for (const char* robust : {"fedmedian", "trimmed_mean", "krum", "multi_krum"}) {
    const nlohmann::json params =
        std::string(robust) == "multi_krum" ? nlohmann::json{{"m", 2}} : nlohmann::json::object();
    const std::string why = message_of<federated::ParameterRefused>(
        [&] { check_strategy_takes_secure_aggregation(*federated::make_strategy(robust, params)); });
    EXPECT_NE(why.find("secure_aggregation with strategy '" + std::string(robust) + "'"), std::string::npos)
        << why;
  }
  for (const char* mean : {"fedavg", "fedadam", "fedyogi"})
    check_strategy_takes_secure_aggregation(*federated::make_strategy(mean, nlohmann::json::object()));
}

TEST(SecureAggregationParams, TheParametersAreStoredWithTheTaskAndReadBack) {
  v1::CreateTaskHeader header = secure_header();
  v1::SecureAggregation& secure = *header.mutable_secure_aggregation();
  secure.set_bits(24);
  secure.set_l2_bound(3.5);
  secure.set_levels(1000);
  secure.set_security_bits(30);
  secure.set_correctness_bits(16);
  secure.set_active_coordinator(true);
  secure.set_dropout_fraction(0.2);
  const RoundParams params = RoundParams::from_header(header, "t");
  const RoundParams back = RoundParams::from_json(params.to_json(), "t");
  ASSERT_TRUE(back.secure_aggregation);
  EXPECT_EQ(back.secure_aggregation->to_json(), params.secure_aggregation->to_json());
  const federated::secagg::FixedPointParameters& p = back.secure_aggregation->fixed_point;
  EXPECT_EQ(p.bits, 24u);
  EXPECT_EQ(p.l2_bound, 3.5);
  EXPECT_EQ(p.range, 0.5);
  EXPECT_EQ(p.levels, 1000u);
  EXPECT_EQ(p.max_weight, 100u);
  EXPECT_EQ(p.max_devices, 10u);
  EXPECT_EQ(back.secure_aggregation->threat.security_bits, 30u);
  EXPECT_EQ(back.secure_aggregation->threat.correctness_bits, 16u);
  EXPECT_TRUE(back.secure_aggregation->threat.active_coordinator);
  EXPECT_EQ(back.secure_aggregation->threat.dropout_fraction, 0.2);
  header.clear_secure_aggregation();
  EXPECT_FALSE(
      RoundParams::from_json(RoundParams::from_header(header, "t").to_json(), "t").secure_aggregation);
}

// Distributed DP at 24 bits over 10 devices of weight 1, 2^16 levels of a range 0.5: the step is
// 2^-17, so a clip_norm of 1 is 2^17 steps.
v1::CreateTaskHeader distributed_dp_header(double noise_multiplier) {
  v1::CreateTaskHeader header = secure_header();
  v1::SecureAggregation& secure = *header.mutable_secure_aggregation();
  secure.set_bits(24);
  secure.set_levels(1u << 16);
  secure.set_max_weight(1);
  v1::DistributedDp& dp = *secure.mutable_distributed_dp();
  dp.set_noise_multiplier(noise_multiplier);
  dp.set_clip_norm(1);
  dp.set_delta(1e-5);
  dp.set_epsilon_budget(100);
  return header;
}

TEST(SecureAggregationParams, DistributedDpBadConfigurationsAreRefusedByName) {
  const struct {
    std::function<void(v1::SecureAggregation&)> change;
    std::string named;
  } cases[] = {
      {[](auto& s) { s.mutable_distributed_dp()->set_noise_multiplier(0); },
       "CreateTask: secure_aggregation.distributed_dp.noise_multiplier 0 must be positive and finite"},
      {[](auto& s) { s.mutable_distributed_dp()->set_clip_norm(NAN); },
       "CreateTask: secure_aggregation.distributed_dp.clip_norm nan must be positive and finite"},
      {[](auto& s) { s.mutable_distributed_dp()->set_delta(1); },
       "CreateTask: secure_aggregation.distributed_dp.delta 1 must be in (0, 1)"},
      // One Gaussian round at z 1 and delta 1e-5 costs epsilon above 4 (sqrt(2 log 1e5) = 4.8).
      {[](auto& s) { s.mutable_distributed_dp()->set_epsilon_budget(1); },
       "CreateTask: secure_aggregation.distributed_dp.epsilon_budget 1 is below one round's epsilon"},
      {[](auto& s) { s.set_l2_bound(2); },
       "CreateTask: secure_aggregation.distributed_dp.clip_norm 1.000000 and l2_bound 2.000000 differ"},
      {[](auto& s) { s.set_levels(0); },
       "CreateTask: secure_aggregation.distributed_dp needs secure_aggregation.levels"},
      {[](auto& s) { s.set_max_weight(2); },
       "CreateTask: secure_aggregation.distributed_dp needs max_weight 1, not 2"},
  };
  for (const auto& each : cases) {
    v1::CreateTaskHeader header = distributed_dp_header(1);
    each.change(*header.mutable_secure_aggregation());
    const std::string why =
        message_of<federated::ParameterRefused>([&] { RoundParams::from_header(header, "t"); });
    EXPECT_NE(why.find(each.named), std::string::npos) << why;
  }
  // An l2_bound equal to the clip_norm is the same bound.
  v1::CreateTaskHeader same = distributed_dp_header(1);
  same.mutable_secure_aggregation()->set_l2_bound(1);
  EXPECT_EQ(RoundParams::from_header(same, "t").secure_aggregation->fixed_point.l2_bound, 1.0);
}

// The margin against the calibration worked out here: sensitivity C / step + sqrt(d) quantised
// units, the share's variance (z sensitivity)^2 / min_updates rounded up by at most one part in
// 2^20, the margin 14 standard deviations of 10 shares; at z 3 it passes the 2^23 - 1 that 24
// bits hold beside 10 x 2^16 levels.
TEST(SecureAggregationParams, DistributedDpNoiseMarginIsPlannedForTheModelAndItsHeadroomChecked) {
  RoundParams params = RoundParams::from_header(distributed_dp_header(1), "t");
  SecureAggregationParams& secure = *params.secure_aggregation;
  ASSERT_TRUE(secure.distributed_dp);
  EXPECT_EQ(secure.fixed_point.l2_bound, 1.0);
  EXPECT_EQ(secure.fixed_point.noise_margin, 0u);
  secure.plan_noise(1000, params.min_updates);
  const double sensitivity = 131072 + std::sqrt(1000.0);
  const double margin = 14 * std::sqrt(10 * sensitivity * sensitivity / 5);
  EXPECT_GE(static_cast<double>(secure.fixed_point.noise_margin), margin);
  EXPECT_LE(static_cast<double>(secure.fixed_point.noise_margin), margin * (1 + 1e-6) + 1);
  // What the rounds are charged: min_updates (5) shares over the sensitivity, never below z 1 and
  // above it by the variance's rounding up alone (under 2^-8 in a variance of 3.4e9 here).
  EXPECT_GE(secure.realised_noise_multiplier, 1.0);
  EXPECT_LE(secure.realised_noise_multiplier, 1 + 1e-9);
  EXPECT_EQ(params.charged_dp()->noise_multiplier, secure.realised_noise_multiplier);
  EXPECT_EQ(params.charged_dp()->epsilon_budget, 100.0);
  // The TASK_CREATED event states the plan at that multiplier, as central DP's does: 10 Gaussian
  // rounds at z 1 (to 1e-9) spend 10 alpha / 2 + log(1e5) / (alpha - 1), least at order 2.5:
  // 12.5 + 7.67528 = 20.1753, within the budget 100.
  const std::string planned = secure.planned_words(10);
  EXPECT_NE(
      planned.find("; each round charged at the multiplier of min_updates shares, 1; the 10 planned rounds "
                   "would spend epsilon 20.1753"),
      std::string::npos)
      << planned;
  EXPECT_EQ(planned.find("stops at its budget"), std::string::npos) << planned;
  const RoundParams back = RoundParams::from_json(params.to_json(), "t");
  EXPECT_EQ(back.secure_aggregation->fixed_point.noise_margin, secure.fixed_point.noise_margin);
  EXPECT_EQ(back.secure_aggregation->realised_noise_multiplier, secure.realised_noise_multiplier);
  ASSERT_TRUE(back.secure_aggregation->distributed_dp);
  EXPECT_EQ(back.secure_aggregation->distributed_dp->to_json(), secure.distributed_dp->to_json());
  EXPECT_EQ(RoundParams::charged_dp_of(params.to_json())->to_json(), params.charged_dp()->to_json());

  RoundParams loud = RoundParams::from_header(distributed_dp_header(3), "t");
  const std::string why = message_of<federated::ParameterRefused>(
      [&] { loud.secure_aggregation->plan_noise(1000, loud.min_updates); });
  EXPECT_NE(why.find("CreateTask: secure_aggregation.distributed_dp for 1000 coordinates:"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("headroom"), std::string::npos) << why;
}

}  // namespace
}  // namespace tn::server
