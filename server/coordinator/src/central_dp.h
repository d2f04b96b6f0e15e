// Central differential privacy in the coordinator's rounds (issue 20 point 4; docs/privacy.md):
// DP-FedAvg (McMahan, Ramage, Talwar and Zhang 2018) with fixed or adaptive clipping (Andrew,
// Thakkar, McMahan and Ramaswamy 2019), on federated/'s pure functions (differential_privacy.h),
// noise (dp_noise.h) and accountant (privacy_accountant.h).
//
// Each round: every contribution's update (trained model minus the round's model; the example
// count is not used, each device weighs 1) is clipped to L2 norm C, the clipped updates are
// summed in device-id order, the discrete Gaussian noise of standard deviation z_updates * C is
// added and the result handed to the mean-family strategy as the weighted sum of
// devices_per_round contributions equal to the round's model plus that sum / devices_per_round,
// so that the strategy's mean is that model plus the noised mean update.
//
// Sampling: the coordinator selects devices_per_round of whichever eligible devices wait, a
// population it neither fixes nor keeps secret, which is not the Poisson sampling the sampled
// Gaussian's amplification assumes. So every round is charged as the Gaussian mechanism itself
// (sampling rate 1): for a device that took part in every round this is its exact cost, for any
// other an upper bound. DP tasks must select devices_per_round devices every round
// (min_available_devices >= devices_per_round), so that the fixed denominator is the number
// selected.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "federated/contribution.h"
#include "federated/differential_privacy.h"
#include "federated/privacy_accountant.h"
#include "federated/secure_aggregation.h"
#include "torchnative/federated/v1/admin.pb.h"

namespace tn::server {

namespace v1 = ::torchnative::federated::v1;

struct CentralDpParams {
  double noise_multiplier = 0;  // z, what the accountant charges
  double clip_norm = 0;         // fixed C, or the initial one with adaptive clipping
  double delta = 0;
  double epsilon_budget = 0;
  struct Adaptive {
    double target_quantile = 0;
    double learning_rate = 0;
    double count_stddev = 0;  // resolved: never 0 once read
  };
  std::optional<Adaptive> adaptive;

  // The header's central_dp, or nothing when it has none. Refuses (federated::ParameterRefused,
  // naming the field) values out of range, a count noise that leaves the updates no budget, a
  // budget that one round exceeds, and min_available_devices below devices_per_round.
  static std::optional<CentralDpParams> from_header(const v1::CreateTaskHeader& header);
  // The accounted parameters of a DP block (central_dp, or secure_aggregation.distributed_dp for
  // distributed DP, which is charged the same way), without adaptive clipping. Refuses
  // (federated::ParameterRefused, naming "CreateTask: <block>.<field>") values out of range and a
  // budget that one round exceeds.
  static CentralDpParams accounted(const std::string& block, double noise_multiplier, double clip_norm,
                                   double delta, double epsilon_budget);
  static CentralDpParams from_json(const nlohmann::json& stored);
  nlohmann::json to_json() const;

  // The multiplier of the updates' noise: z, or with adaptive clipping what the count's release
  // leaves of it (federated::privacy::updates_noise_multiplier).
  double updates_noise_multiplier() const;
  // What `rounds` rounds spend at delta: epsilon 0 before any round.
  v1::PrivacySpent spent(uint64_t rounds) const;
  // The parameters and what `rounds_planned` rounds would spend, for the TASK_CREATED event.
  std::string planned_words(uint64_t rounds_planned) const;
  // What `rounds_planned` rounds would spend ("the N planned rounds would spend epsilon E", and
  // whether the budget stops the task before them); distributed DP's event says it too.
  std::string planned_spending_words(uint64_t rounds_planned) const;
};

// Refuses (federated::ParameterRefused) central DP for a strategy that does not aggregate a sum:
// the robust ones (median, trimmed mean, Krum) read each update apart, and a clipped, noised sum
// is not what they compute.
void check_strategy_takes_central_dp(const federated::Strategy& strategy);

// Reads contribution elements [first, first + count) into `out` (of one device, in its packed layout).
using ContributionSource = std::function<void(uint64_t first, uint64_t count, double* out)>;

// One task's central DP state: its parameters, the clipping bound, the rounds charged. A
// distributed DP task (secure aggregation) keeps its accounting here too: budget_refusal, spent
// and charge_round, never noised_sum (its devices add the noise).
class CentralDp {
 public:
  // `rounds_completed`: what the task has already spent (a resumed task); `clip_norm`: the bound
  // stored with it (stored_clip_norm), or none for params.clip_norm.
  CentralDp(CentralDpParams params, uint32_t devices_per_round, uint64_t rounds_completed,
            std::optional<double> clip_norm = std::nullopt);

  // Why the next round may not start (its epsilon would pass the budget), or nothing.
  std::optional<std::string> budget_refusal() const;
  v1::PrivacySpent spent() const;
  // "epsilon E of the budget B at delta D after N rounds"
  std::string spent_words() const;
  double clip_norm() const { return clip_norm_; }

  // What one round's clipping found, for round_completed.
  struct Clipped {
    double clip_norm = 0;       // the bound they were clipped to
    std::vector<double> norms;  // the updates' L2 norms, in device-id order
    uint64_t unclipped = 0;     // of them, at most the bound
  };
  // The mean-family strategy's weighted sum over `sources` (device-id order): devices_per_round
  // times the round's model plus the clipped updates' sum and the noise, weight devices_per_round.
  // Reads every contribution once to clip it; the noise is drawn from `seed`'s keystream as the
  // strategy reads. Refuses (federated::ParameterRefused, from l2_norm) an update with a
  // coordinate that is not finite (x - base can overflow where x and base are finite).
  federated::WeightedSumReader noised_sum(const federated::ContributionLayout& layout,
                                          const federated::Model& round_model,
                                          std::vector<ContributionSource> sources,
                                          const federated::secagg::Bytes32& seed, Clipped& clipped) const;
  // The round's aggregate was released: charges it and, with adaptive clipping, moves the bound
  // from the noised count of the round's unclipped updates (noise from `seed`).
  void round_completed(const Clipped& clipped, const federated::secagg::Bytes32& seed);
  // Charges one released round without clipping anything: a distributed DP round's.
  void charge_round();

 private:
  CentralDpParams params_;
  double expected_devices_;
  double clip_norm_;
  uint64_t rounds_charged_;
  federated::privacy::RdpAccountant accountant_;  // the rounds charged
};

// The clipping bound the next round uses, kept in the strategy state's meta (under "central_dp")
// so that it is committed with the model it follows and resumed with it; Strategy::restore_state
// reads only its own keys.
void store_clip_norm(double clip_norm, federated::StrategyState& state);
// The stored bound, or none (a task without central DP, or before its first round). Refuses
// (federated::ParameterRefused) a stored value that is not a positive finite number.
std::optional<double> stored_clip_norm(const federated::StrategyState& state);

// A fresh secret seed for a round's noise, from libsodium's CSPRNG.
federated::secagg::Bytes32 random_noise_seed();

}  // namespace tn::server
