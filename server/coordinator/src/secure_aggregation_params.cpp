#include "secure_aggregation_params.h"

#include <cmath>
#include <sstream>
#include <string_view>

#include "federated/contribution.h"
#include "federated/dp_noise.h"
#include "federated/errors.h"

namespace tn::server {

namespace {

using federated::ParameterRefused;
using federated::secagg::SecAggRefused;

constexpr const char* kLabel = "CreateTask: secure_aggregation";

void require_positive_finite(double value, const char* field) {
  if (std::isfinite(value) && value > 0) return;
  std::ostringstream why;
  why << kLabel << '.' << field << ' ' << value << " must be positive and finite";
  throw ParameterRefused(why.str());
}

// The task's rounds select exactly devices_per_round devices, the n the graph and the headroom are
// derived for.
void check_selection(const v1::CreateTaskHeader& header) {
  if (header.has_central_dp())
    throw ParameterRefused(std::string(kLabel) +
                           " with central_dp: central DP clips each update on the coordinator, which "
                           "secure aggregation keeps from it (for DP noised on the devices, give "
                           "secure_aggregation.distributed_dp)");
  const uint32_t devices = header.selection().devices_per_round();
  if (header.min_available_devices() < devices)
    throw ParameterRefused(std::string(kLabel) + " needs min_available_devices (" +
                           std::to_string(header.min_available_devices()) +
                           ") at least selection.devices_per_round (" + std::to_string(devices) +
                           "): the neighbour graph and the fixed point's headroom are derived for that "
                           "many devices, so every round must select them");
}

federated::secagg::ThreatModel threat_of(const v1::SecureAggregation& block) {
  federated::secagg::ThreatModel threat;
  threat.corrupt_fraction = block.corrupt_fraction();
  threat.dropout_fraction = block.dropout_fraction();
  if (block.security_bits() != 0) threat.security_bits = block.security_bits();
  if (block.correctness_bits() != 0) threat.correctness_bits = block.correctness_bits();
  threat.active_coordinator = block.active_coordinator();
  return threat;
}

federated::secagg::FixedPointParameters fixed_point_of(const v1::SecureAggregation& block, uint32_t devices) {
  require_positive_finite(block.clip_range(), "clip_range");
  if (block.l2_bound() != 0) require_positive_finite(block.l2_bound(), "l2_bound");
  if (block.max_weight() == 0)
    throw ParameterRefused(std::string(kLabel) + ".max_weight must be at least 1 (the example count's cap)");
  federated::secagg::FixedPointParameters p;
  p.bits = block.bits() != 0 ? block.bits() : 32;
  if (block.l2_bound() != 0) p.l2_bound = block.l2_bound();
  p.range = block.clip_range();
  p.max_weight = block.max_weight();
  p.max_devices = devices;
  p.levels = block.levels() != 0 ? block.levels()
                                 : federated::secagg::largest_levels(p.bits, devices, p.max_weight, 0);
  federated::secagg::check_fixed_point(p);
  return p;
}

// The accounted parameters; the fixed point's L2 bound is their clip_norm.
std::optional<CentralDpParams> distributed_dp_of(const v1::SecureAggregation& block) {
  if (!block.has_distributed_dp()) return std::nullopt;
  const v1::DistributedDp& dp = block.distributed_dp();
  const std::string label = std::string(kLabel) + ".distributed_dp";
  CentralDpParams params =
      CentralDpParams::accounted("secure_aggregation.distributed_dp", dp.noise_multiplier(), dp.clip_norm(),
                                 dp.delta(), dp.epsilon_budget());
  if (block.l2_bound() != 0 && block.l2_bound() != dp.clip_norm())
    throw ParameterRefused(label + ".clip_norm " + std::to_string(dp.clip_norm()) + " and l2_bound " +
                           std::to_string(block.l2_bound()) +
                           " differ: the clip_norm is the L2 bound the devices clip to (leave l2_bound 0)");
  if (block.levels() == 0)
    throw ParameterRefused(label +
                           " needs secure_aggregation.levels: the noise's margin in the headroom "
                           "depends on the step, so the most levels that fit are not defined");
  if (block.max_weight() != 1)
    throw ParameterRefused(label + " needs max_weight 1, not " + std::to_string(block.max_weight()) +
                           ": the weight word is not noised, and at 1 it is the number of contributions, "
                           "which the coordinator knows");
  return params;
}

}  // namespace

std::optional<SecureAggregationParams> SecureAggregationParams::from_header(
    const v1::CreateTaskHeader& header) {
  if (!header.has_secure_aggregation()) return std::nullopt;
  check_selection(header);
  const v1::SecureAggregation& block = header.secure_aggregation();
  SecureAggregationParams params;
  params.threat = threat_of(block);
  params.distributed_dp = distributed_dp_of(block);
  const uint32_t devices = header.selection().devices_per_round();
  try {
    v1::SecureAggregation bounded = block;
    if (params.distributed_dp) bounded.set_l2_bound(params.distributed_dp->clip_norm);
    params.fixed_point = fixed_point_of(bounded, devices);
    const federated::secagg::GraphParameters graph = params.graph();
    if (header.min_updates() < graph.threshold)
      throw ParameterRefused(std::string(kLabel) + " needs min_updates (" +
                             std::to_string(header.min_updates()) + ") at least the threshold " +
                             std::to_string(graph.threshold) + " derived for " + std::to_string(devices) +
                             " devices: a sum over fewer survivors would hide too few devices, and the "
                             "dropped ones' secrets need that many surviving neighbours");
  } catch (const SecAggRefused& error) {  // the graph's or the fixed point's refusal, by name
    std::string_view why = error.what();
    if (why.starts_with("secure aggregation: "))
      why.remove_prefix(std::string_view("secure aggregation: ").size());
    throw ParameterRefused(std::string(kLabel) + ": " + std::string(why));
  }
  return params;
}

void SecureAggregationParams::plan_noise(size_t dimension, uint32_t min_updates) {
  if (!distributed_dp) return;
  try {
    const federated::secagg::DistributedNoise plan = federated::secagg::plan_distributed_noise(
        fixed_point, dimension, distributed_dp->noise_multiplier, min_updates);
    fixed_point.noise_margin = plan.noise_margin;
    federated::secagg::check_fixed_point(fixed_point);
    // The devices plan the same shares (client::noised_input: the same fixed point, dimension,
    // multiplier and noise_min_devices = min_updates).
    realised_noise_multiplier = std::sqrt(min_updates * plan.per_device.value()) / plan.sensitivity;
  } catch (const SecAggRefused& error) {
    throw ParameterRefused(std::string(kLabel) + ".distributed_dp for " + std::to_string(dimension) +
                           " coordinates: " + error.what());
  }
}

std::optional<CentralDpParams> SecureAggregationParams::charged_dp() const {
  if (!distributed_dp) return std::nullopt;
  CentralDpParams charged = *distributed_dp;
  charged.noise_multiplier = realised_noise_multiplier;
  return charged;
}

SecureAggregationParams SecureAggregationParams::from_json(const nlohmann::json& stored) {
  SecureAggregationParams params;
  params.threat.corrupt_fraction = stored.at("corrupt_fraction").get<double>();
  params.threat.dropout_fraction = stored.at("dropout_fraction").get<double>();
  params.threat.security_bits = stored.at("security_bits").get<unsigned>();
  params.threat.correctness_bits = stored.at("correctness_bits").get<unsigned>();
  params.threat.active_coordinator = stored.at("active_coordinator").get<bool>();
  federated::secagg::FixedPointParameters& p = params.fixed_point;
  p.bits = stored.at("bits").get<unsigned>();
  p.range = stored.at("clip_range").get<double>();
  if (const nlohmann::json& l2_bound = stored.at("l2_bound"); !l2_bound.is_null())
    p.l2_bound = l2_bound.get<double>();
  p.max_weight = stored.at("max_weight").get<uint32_t>();
  p.levels = stored.at("levels").get<uint32_t>();
  p.max_devices = stored.at("devices").get<uint32_t>();
  // Tasks stored before distributed DP have neither key.
  p.noise_margin = stored.value("noise_margin", uint64_t{0});
  if (const auto dp = stored.find("distributed_dp"); dp != stored.end() && !dp->is_null()) {
    params.distributed_dp = CentralDpParams::from_json(*dp);
    // Tasks stored before their rounds were charged (3577d18 to 6b23c6e) lack it: their configured
    // multiplier, which the realised one is never below, so their charge errs high, by the rounding.
    params.realised_noise_multiplier =
        stored.value("realised_noise_multiplier", params.distributed_dp->noise_multiplier);
  }
  return params;
}

nlohmann::json SecureAggregationParams::to_json() const {
  const federated::secagg::FixedPointParameters& p = fixed_point;
  return {{"corrupt_fraction", threat.corrupt_fraction},
          {"dropout_fraction", threat.dropout_fraction},
          {"security_bits", threat.security_bits},
          {"correctness_bits", threat.correctness_bits},
          {"active_coordinator", threat.active_coordinator},
          {"bits", p.bits},
          {"clip_range", p.range},
          {"l2_bound", p.l2_bound ? nlohmann::json(*p.l2_bound) : nlohmann::json()},
          {"max_weight", p.max_weight},
          {"levels", p.levels},
          {"devices", p.max_devices},
          {"noise_margin", p.noise_margin},
          {"realised_noise_multiplier", realised_noise_multiplier},
          {"distributed_dp", distributed_dp ? distributed_dp->to_json() : nlohmann::json()}};
}

federated::secagg::GraphParameters SecureAggregationParams::graph() const {
  return federated::secagg::derive_graph_parameters(fixed_point.max_devices, threat);
}

std::string SecureAggregationParams::planned_words(uint64_t rounds_planned) const {
  const federated::secagg::GraphParameters g = graph();
  std::ostringstream words;
  words << "secure aggregation: " << g.devices << " devices a round, " << g.degree
        << " neighbours each, threshold " << g.threshold << " (corrupt_fraction " << threat.corrupt_fraction
        << ", dropout_fraction " << threat.dropout_fraction
        << (threat.active_coordinator ? ", active coordinator" : "") << "); sums modulo 2^"
        << fixed_point.bits << " in steps of " << fixed_point.step() << " over [-" << fixed_point.range
        << ", " << fixed_point.range << "], example counts capped at " << fixed_point.max_weight;
  if (distributed_dp)
    words << "; distributed DP: noise_multiplier " << distributed_dp->noise_multiplier << ", clip_norm "
          << distributed_dp->clip_norm << ", epsilon_budget " << distributed_dp->epsilon_budget
          << " at delta " << distributed_dp->delta << ", noise margin " << fixed_point.noise_margin
          << "; each round charged at the multiplier of min_updates shares, " << realised_noise_multiplier
          << "; " << charged_dp()->planned_spending_words(rounds_planned);
  return words.str();
}

void check_strategy_takes_secure_aggregation(const federated::Strategy& strategy) {
  if (federated::contribution_kind_for(strategy) == federated::ContributionKind::WeightedSum) return;
  throw ParameterRefused(std::string(kLabel) + " with strategy '" + strategy.name() +
                         "': it aggregates each update apart, and secure aggregation gives the coordinator "
                         "only their sum; it takes the strategies that aggregate a sum (fedavg, fedprox, "
                         "fedavgm, fedadagrad, fedadam, fedyogi)");
}

}  // namespace tn::server
