// A task's secure aggregation (issue 20 points 1-3; docs/secure_aggregation.md): the
// CreateTaskHeader's secure_aggregation block, validated and stored with the task's round
// parameters. SecAgg+ (Bell, Bonawitz, Gascón, Lepoint and Raykova 2020) on tn_secagg: the
// neighbour graph's degree and threshold derived from the threat model for devices_per_round
// devices, and the fixed point each device quantises its update to.
//
// The task runner runs such a task's rounds with SecAgg+'s stages (secure_exchange.h); its updates
// are never aggregated in the clear.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "central_dp.h"
#include "federated/fixed_point.h"
#include "federated/secure_aggregation.h"
#include "federated/strategy.h"
#include "torchnative/federated/v1/admin.pb.h"

namespace tn::server {

namespace v1 = ::torchnative::federated::v1;

struct SecureAggregationParams {
  federated::secagg::ThreatModel threat;
  // max_devices is devices_per_round: no round selects more; noise_margin 0 (no distributed DP).
  federated::secagg::FixedPointParameters fixed_point;
  // Distributed DP (docs/privacy.md): what the accountant charges (clip_norm is fixed_point's
  // l2_bound; never adaptive), or nothing. With it, fixed_point.noise_margin is set by plan_noise.
  std::optional<CentralDpParams> distributed_dp;
  // Distributed DP's noise as the devices' shares realise it (set by plan_noise): the standard
  // deviation of min_updates shares over one contribution's sensitivity, sqrt(m sigma_dev^2) / Delta.
  // Never below distributed_dp's noise_multiplier (each share's variance is rounded up to the
  // sampler's rational); 0 without distributed DP.
  double realised_noise_multiplier = 0;

  // The header's secure_aggregation, or nothing when it has none; zero bits, security_bits,
  // correctness_bits and levels resolved to their defaults (32, 40, 20, the most that fit).
  // Refuses (federated::ParameterRefused, naming the field): central_dp alongside;
  // min_available_devices below devices_per_round (every round must select the devices the graph
  // and the headroom were derived for); a threat model no graph on devices_per_round meets
  // (fewer than 3 devices among them); min_updates below the derived threshold; a clip_range or
  // l2_bound that is not positive and finite; max_weight 0; and fixed point without headroom.
  // With distributed_dp, also refuses: its values out of range or a budget one round exceeds (as
  // central_dp's, named secure_aggregation.distributed_dp), an l2_bound other than its clip_norm,
  // levels not given and max_weight other than 1.
  static std::optional<SecureAggregationParams> from_header(const v1::CreateTaskHeader& header);
  // Distributed DP's noise for a model of `dimension` coordinates (plan_distributed_noise with the
  // fewest devices a sum may hold, min_updates): sets fixed_point.noise_margin and
  // realised_noise_multiplier. Refuses (federated::ParameterRefused, naming "headroom") a margin
  // the fixed point cannot hold.
  void plan_noise(size_t dimension, uint32_t min_updates);
  // What each completed round is charged (docs/privacy.md, Distributed DP): distributed_dp at the
  // realised multiplier, or nothing without distributed DP.
  std::optional<CentralDpParams> charged_dp() const;
  static SecureAggregationParams from_json(const nlohmann::json& stored);
  nlohmann::json to_json() const;

  // The graph's degree and threshold for a round of devices_per_round devices.
  federated::secagg::GraphParameters graph() const;
  // The parameters, for the TASK_CREATED event; with distributed DP, also what `rounds_planned`
  // rounds would spend at the charged multiplier (after plan_noise).
  std::string planned_words(uint64_t rounds_planned) const;
};

// Refuses (federated::ParameterRefused) secure aggregation for a strategy that does not aggregate
// a sum: the robust ones (median, trimmed mean, Krum) read each update apart, which the masks hide.
void check_strategy_takes_secure_aggregation(const federated::Strategy& strategy);

}  // namespace tn::server
