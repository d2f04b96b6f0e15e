#include "central_dp.h"

#include <sodium.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "federated/dp_noise.h"
#include "federated/errors.h"

namespace tn::server {

namespace {

namespace privacy = federated::privacy;
using federated::ParameterRefused;
using federated::secagg::Bytes32;

// Noise is drawn in blocks of this many coordinates, each from its own keystream, so that a range
// of the sum can be read without drawing the noise before it.
constexpr uint64_t kNoiseBlock = 4096;
// The noise's grid, in standard deviations: fine enough that its variance is the calibration's
// to within the sampler's rounding (docs/privacy.md), coarse enough for its variance bound (2^20
// squared is its numerator limit 2^40).
constexpr double kNoiseGridsPerStddev = 1024;
// Contributions are clipped reading this many elements at a time.
constexpr uint64_t kClipChunk = uint64_t{1} << 16;

std::string text(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

void require_positive(double value, const std::string& field, const std::string& block = "central_dp") {
  if (!(std::isfinite(value) && value > 0))
    throw ParameterRefused("CreateTask: " + block + "." + field + " " + text(value) +
                           " must be positive and finite");
}

// The seed of noise block `index` (tag 'n') or of the adaptive count's noise (tag 'c'): BLAKE2b
// keyed with the round's secret seed, so that the streams are independent and the seed is never
// used twice.
Bytes32 derived_seed(const Bytes32& seed, char tag, uint64_t index) {
  unsigned char message[9] = {static_cast<unsigned char>(tag)};
  for (int byte = 0; byte < 8; ++byte) message[1 + byte] = static_cast<unsigned char>(index >> (8 * byte));
  Bytes32 out;
  crypto_generichash(out.data(), out.size(), message, sizeof message, seed.data(), seed.size());
  return out;
}

// The noise of coordinate k, drawn a block at a time; the strategy reads in ascending order, so
// one cached block is drawn once.
class NoiseBlocks {
 public:
  NoiseBlocks(const Bytes32& seed, double stddev) : seed_(seed), stddev_(stddev) {}
  double at(uint64_t k) {
    const uint64_t block = k / kNoiseBlock;
    if (block != cached_) {
      values_ = federated::secagg::central_gaussian_noise(
          kNoiseBlock, stddev_, stddev_ / kNoiseGridsPerStddev, derived_seed(seed_, 'n', block));
      cached_ = block;
    }
    return values_[k % kNoiseBlock];
  }

 private:
  Bytes32 seed_;
  double stddev_;
  uint64_t cached_ = UINT64_MAX;
  std::vector<double> values_;
};

void check_adaptive(const v1::AdaptiveClipping& adaptive) {
  if (!(adaptive.target_quantile() >= 0 && adaptive.target_quantile() <= 1))
    throw ParameterRefused("CreateTask: central_dp.adaptive_clipping.target_quantile " +
                           text(adaptive.target_quantile()) + " must be in [0, 1]");
  require_positive(adaptive.learning_rate(), "adaptive_clipping.learning_rate");
  if (adaptive.count_stddev() != 0)
    require_positive(adaptive.count_stddev(), "adaptive_clipping.count_stddev");
}

}  // namespace

std::optional<CentralDpParams> CentralDpParams::from_header(const v1::CreateTaskHeader& header) {
  if (!header.has_central_dp()) return std::nullopt;
  const v1::CentralDp& dp = header.central_dp();
  CentralDpParams params =
      accounted("central_dp", dp.noise_multiplier(), dp.clip_norm(), dp.delta(), dp.epsilon_budget());
  const uint32_t devices = header.selection().devices_per_round();
  if (header.min_available_devices() < devices)
    throw ParameterRefused(
        "CreateTask: central_dp needs min_available_devices (" +
        std::to_string(header.min_available_devices()) + ") at least selection.devices_per_round (" +
        std::to_string(devices) +
        "): the noised sum is divided by devices_per_round, so every round must select that many");
  if (dp.has_adaptive_clipping()) {
    const v1::AdaptiveClipping& adaptive = dp.adaptive_clipping();
    check_adaptive(adaptive);
    // TFF's default: a twentieth of the expected devices.
    const double count_stddev = adaptive.count_stddev() != 0 ? adaptive.count_stddev() : devices / 20.0;
    params.adaptive = Adaptive{adaptive.target_quantile(), adaptive.learning_rate(), count_stddev};
    try {
      params.updates_noise_multiplier();
    } catch (const ParameterRefused& error) {
      throw ParameterRefused("CreateTask: central_dp.adaptive_clipping.count_stddev " + text(count_stddev) +
                             " with noise_multiplier " + text(params.noise_multiplier) + ": " + error.what());
    }
  }
  return params;
}

CentralDpParams CentralDpParams::accounted(const std::string& block, double noise_multiplier,
                                           double clip_norm, double delta, double epsilon_budget) {
  require_positive(noise_multiplier, "noise_multiplier", block);
  require_positive(clip_norm, "clip_norm", block);
  if (!(delta > 0 && delta < 1))
    throw ParameterRefused("CreateTask: " + block + ".delta " + text(delta) + " must be in (0, 1)");
  require_positive(epsilon_budget, "epsilon_budget", block);
  CentralDpParams params;
  params.noise_multiplier = noise_multiplier;
  params.clip_norm = clip_norm;
  params.delta = delta;
  params.epsilon_budget = epsilon_budget;
  const double one_round = params.spent(1).epsilon();
  if (one_round > epsilon_budget)
    throw ParameterRefused("CreateTask: " + block + ".epsilon_budget " + text(epsilon_budget) +
                           " is below one round's epsilon " + text(one_round) + " at delta " + text(delta) +
                           " (noise_multiplier " + text(noise_multiplier) +
                           ", every round charged without sampling): no round could run");
  return params;
}

CentralDpParams CentralDpParams::from_json(const nlohmann::json& stored) {
  CentralDpParams params;
  params.noise_multiplier = stored.at("noise_multiplier").get<double>();
  params.clip_norm = stored.at("clip_norm").get<double>();
  params.delta = stored.at("delta").get<double>();
  params.epsilon_budget = stored.at("epsilon_budget").get<double>();
  if (const nlohmann::json& adaptive = stored.at("adaptive_clipping"); !adaptive.is_null())
    params.adaptive =
        Adaptive{adaptive.at("target_quantile").get<double>(), adaptive.at("learning_rate").get<double>(),
                 adaptive.at("count_stddev").get<double>()};
  return params;
}

nlohmann::json CentralDpParams::to_json() const {
  nlohmann::json adaptive_json;  // null: fixed clipping
  if (adaptive)
    adaptive_json = {{"target_quantile", adaptive->target_quantile},
                     {"learning_rate", adaptive->learning_rate},
                     {"count_stddev", adaptive->count_stddev}};
  return {{"noise_multiplier", noise_multiplier},
          {"clip_norm", clip_norm},
          {"delta", delta},
          {"epsilon_budget", epsilon_budget},
          {"adaptive_clipping", adaptive_json}};
}

double CentralDpParams::updates_noise_multiplier() const {
  return adaptive ? privacy::updates_noise_multiplier(noise_multiplier, adaptive->count_stddev)
                  : noise_multiplier;
}

namespace {

// Every round is charged as the Gaussian mechanism at the task's multiplier, unsampled (sampling
// rate 1: central_dp.h says why).
void charge(privacy::RdpAccountant& accountant, const CentralDpParams& params, uint64_t rounds) {
  if (rounds > 0) accountant.add_rounds(1.0, params.noise_multiplier, rounds);
}

v1::PrivacySpent report(const privacy::RdpAccountant& accountant, const CentralDpParams& params,
                        uint64_t rounds) {
  v1::PrivacySpent out;
  out.set_delta(params.delta);
  out.set_epsilon_budget(params.epsilon_budget);
  out.set_rounds_charged(rounds);
  if (rounds == 0) return out;  // nothing released: epsilon 0, not the conversion's slack
  const privacy::PrivacySpent spent = accountant.spent(params.delta);
  out.set_epsilon(spent.epsilon);
  out.set_order(spent.order);
  return out;
}

}  // namespace

v1::PrivacySpent CentralDpParams::spent(uint64_t rounds) const {
  privacy::RdpAccountant accountant;
  charge(accountant, *this, rounds);
  return report(accountant, *this, rounds);
}

std::string CentralDpParams::planned_words(uint64_t rounds_planned) const {
  return "central DP: noise_multiplier " + text(noise_multiplier) + ", " +
         (adaptive ? "adaptive clipping from " : "clip_norm ") + text(clip_norm) + ", epsilon_budget " +
         text(epsilon_budget) + " at delta " + text(delta) + "; " + planned_spending_words(rounds_planned);
}

std::string CentralDpParams::planned_spending_words(uint64_t rounds_planned) const {
  const v1::PrivacySpent planned = spent(rounds_planned);
  return "the " + std::to_string(rounds_planned) + " planned rounds would spend epsilon " +
         text(planned.epsilon()) +
         (planned.epsilon() > epsilon_budget ? ", so the task stops at its budget before them" : "");
}

void check_strategy_takes_central_dp(const federated::Strategy& strategy) {
  if (federated::contribution_kind_for(strategy) == federated::ContributionKind::WeightedSum) return;
  throw ParameterRefused("CreateTask: central_dp with strategy '" + strategy.name() +
                         "': it aggregates each update apart, and a clipped, noised sum is not what it "
                         "computes; central DP takes the strategies that aggregate a sum (fedavg, fedprox, "
                         "fedavgm, fedadagrad, fedadam, fedyogi)");
}

CentralDp::CentralDp(CentralDpParams params, uint32_t devices_per_round, uint64_t rounds_completed,
                     std::optional<double> clip_norm)
    : params_(params),
      expected_devices_(devices_per_round),
      clip_norm_(clip_norm.value_or(params.clip_norm)),
      rounds_charged_(rounds_completed) {
  charge(accountant_, params_, rounds_completed);
}

v1::PrivacySpent CentralDp::spent() const { return report(accountant_, params_, rounds_charged_); }

std::optional<std::string> CentralDp::budget_refusal() const {
  privacy::RdpAccountant after = accountant_;
  charge(after, params_, 1);
  const v1::PrivacySpent next = report(after, params_, rounds_charged_ + 1);
  if (next.epsilon() <= params_.epsilon_budget) return std::nullopt;
  return "the privacy budget: round " + std::to_string(rounds_charged_ + 1) + " would take epsilon from " +
         text(spent().epsilon()) + " to " + text(next.epsilon()) + " at delta " + text(params_.delta) +
         ", past the budget " + text(params_.epsilon_budget);
}

std::string CentralDp::spent_words() const {
  const v1::PrivacySpent now = spent();
  return "epsilon " + text(now.epsilon()) + " of the budget " + text(now.epsilon_budget()) + " at delta " +
         text(now.delta()) + " after " + std::to_string(now.rounds_charged()) + " rounds";
}

federated::WeightedSumReader CentralDp::noised_sum(const federated::ContributionLayout& layout,
                                                   const federated::Model& round_model,
                                                   std::vector<ContributionSource> sources,
                                                   const Bytes32& seed, Clipped& clipped) const {
  const uint64_t weight_at = layout.elements() - 1;  // the example count's element
  auto base = std::make_shared<std::vector<double>>(layout.elements());
  layout.pack(round_model, 1, federated::UpdateLimits{}, *base);  // the round's model, weight 1
  // Each update is x - base with x = (n x) / n; its norm is read in chunks, each chunk's norm
  // combined by hypot, so that no square overflows.
  auto examples = std::make_shared<std::vector<double>>();
  auto scales = std::make_shared<std::vector<double>>();
  std::vector<double> chunk;
  clipped.clip_norm = clip_norm_;
  for (const ContributionSource& source : sources) {
    double n = 0;
    source(weight_at, 1, &n);
    double norm = 0;
    for (uint64_t first = 0; first < weight_at; first += kClipChunk) {
      chunk.resize(std::min(kClipChunk, weight_at - first));
      source(first, chunk.size(), chunk.data());
      for (size_t j = 0; j < chunk.size(); ++j) chunk[j] = chunk[j] / n - (*base)[first + j];
      norm = std::hypot(norm, privacy::l2_norm(chunk));
    }
    examples->push_back(n);
    clipped.norms.push_back(norm);
    clipped.unclipped += norm <= clip_norm_;
    scales->push_back(norm > clip_norm_ ? clip_norm_ / norm : 1.0);
  }
  auto noise = std::make_shared<NoiseBlocks>(seed, params_.updates_noise_multiplier() * clip_norm_);
  const double m = expected_devices_;
  return layout.weighted_sum_reader([=, sources = std::move(sources)](size_t first, std::span<double> out) {
    std::fill(out.begin(), out.end(), 0.0);
    std::vector<double> values(out.size());
    for (size_t i = 0; i < sources.size(); ++i) {  // device-id order
      sources[i](first, values.size(), values.data());
      for (size_t j = 0; j < out.size(); ++j)
        out[j] += (*scales)[i] * (values[j] / (*examples)[i] - (*base)[first + j]);
    }
    for (size_t j = 0; j < out.size(); ++j) {
      const uint64_t k = first + j;
      out[j] = k == weight_at ? m : m * (*base)[k] + (out[j] + noise->at(k));
    }
  });
}

void CentralDp::charge_round() {
  charge(accountant_, params_, 1);
  ++rounds_charged_;
}

void CentralDp::round_completed(const Clipped& clipped, const Bytes32& seed) {
  charge_round();
  if (!params_.adaptive) return;
  const CentralDpParams::Adaptive& adaptive = *params_.adaptive;
  const double count_noise = federated::secagg::central_gaussian_noise(
      1, adaptive.count_stddev, adaptive.count_stddev / kNoiseGridsPerStddev, derived_seed(seed, 'c', 0))[0];
  clip_norm_ = privacy::next_clip_norm(
      {clip_norm_, adaptive.target_quantile, adaptive.learning_rate, adaptive.count_stddev},
      clipped.unclipped, count_noise, expected_devices_);
}

void store_clip_norm(double clip_norm, federated::StrategyState& state) {
  state.meta["central_dp"] = {{"clip_norm", clip_norm}};
}

std::optional<double> stored_clip_norm(const federated::StrategyState& state) {
  const auto found = state.meta.find("central_dp");
  if (found == state.meta.end()) return std::nullopt;
  const nlohmann::json& stored = found->value("clip_norm", nlohmann::json());
  if (!stored.is_number() || !(stored.get<double>() > 0) || !std::isfinite(stored.get<double>()))
    throw ParameterRefused("the stored central DP state " + found->dump() + " has no positive clip_norm");
  return stored.get<double>();
}

Bytes32 random_noise_seed() {
  if (sodium_init() < 0) throw std::runtime_error("libsodium could not be initialised");
  Bytes32 seed;
  randombytes_buf(seed.data(), seed.size());
  return seed;
}

}  // namespace tn::server
