// Aggregation strategies, in the manner of Flower's: each says what clients are told
// (configure_fit / configure_evaluate), turns the round's results into the next global model
// (aggregate) and combines evaluation results (aggregate_evaluate). No transport here.
//
// Arithmetic: every value is read as double, computed in double (no FMA contraction) and
// rounded once to the tensor's dtype at the end. Contributions are combined in ascending
// device-id order, so the result does not depend on the order in which updates arrived.
//
// Two entry points. aggregate() takes the individual updates. Strategies that only need
// the example-weighted mean (FedAvg, FedProx, FedAvgM, FedAdagrad, FedAdam, FedYogi) also take
// aggregate_from_weighted_sum(): sum_i n_i * x_i and sum_i n_i as a hub reduce (or, decoded,
// secure aggregation) delivers them. Given float64 sums accumulated in ascending device order,
// both entry points give the same bits. Median, trimmed mean and Krum need the individual
// updates and refuse the weighted sum (Unsupported); they take aggregate_from_updates() instead:
// the individual updates' values read a range at a time, as a hub that keeps the contributions
// where they landed delivers them, with the same bits as aggregate().
//
// Integer tensors keep the global model's value (see model.h). aggregate() expects updates that
// passed validate_update; it still refuses (UpdateRefused) any whose tensors do not match the
// global model, so a mismatch can never be read past a buffer's end.
//
// The strategies (x = global model, y = new global model, n_i = examples of update i,
// N = sum_i n_i, avg = sum_i n_i x_i / N, all per coordinate):
//   fedavg        y = avg                                   (McMahan et al. 2017)
//   fedprox       y = avg; clients get "proximal_mu" in their fit config and add
//                 mu/2 |w - x|^2 to their loss (Li et al. 2020); the server side is FedAvg.
//   fedavgm       d = avg - x;  u = beta * u + d;  y = x + eta * u;  u starts at 0
//                 (Hsu et al. 2019; params server_learning_rate = eta, server_momentum = beta)
//   fedadagrad    d = avg - x;  m = beta_1 m + (1 - beta_1) d;  v = v + d^2
//   fedadam       ...                                       v = beta_2 v + (1 - beta_2) d^2
//   fedyogi       ...                                       v = v - (1 - beta_2) d^2 sign(v - d^2)
//                 then y = x + eta * m / (sqrt(v) + tau), with m starting at 0 and v at tau^2,
//                 without bias correction: Algorithm 2 of Reddi et al. 2021 "Adaptive
//                 Federated Optimization", with the weighted mean in place of the unweighted
//                 mean of client deltas (as Flower). sign(0) = 0. eta_l goes to the clients.
//   fedmedian     y = coordinate-wise median of the x_i (unweighted; for an even count the
//                 mean of the two middle values)
//   trimmed_mean  k = floor(beta * n) values cut from each end per coordinate; y = mean of the
//                 remaining n - 2k, summed in ascending order (unweighted)
//   krum          score(i) = sum of the n - f - 2 smallest |x_i - x_j|^2 (j != i, over all
//   multi_krum    aggregated tensors); the m lowest scores are kept (ties: lower device id) and
//                 y = their unweighted mean; krum is m = 1 (Blanchard et al. 2017). Needs
//                 n >= 2f + 3 and m <= n - f.
// The robust strategies ignore example counts: a Byzantine device can claim any count.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "federated/model.h"
#include "federated/validation.h"

namespace tn::federated {

// sum_i n_i * x_i for every aggregated tensor of the model (integer tensors absent), in any
// floating dtype, and total_weight = sum_i n_i.
struct WeightedSum {
  Model sum;
  double total_weight = 0;
};

// The same sums read a piece at a time, for a hub that never holds them all (the data plane's
// float64 sum is twice a float32 model): read(tensor, begin, out) fills `out` with elements
// [begin, begin + out.size()) of the sum for `tensor`, an aggregated tensor of the global
// model. A strategy reads each tensor's elements once, in ascending order, tensor after tensor in
// the model's order. `read` may throw Refused, which refuses the sum.
struct WeightedSumReader {
  std::function<void(const NamedTensor& tensor, int64_t begin, std::span<double> out)> read;
  double total_weight = 0;
};

// The individual updates' values read a range at a time, for a hub that keeps each device's
// contribution where it landed instead of as a whole model: read(i, tensor, begin, out) fills
// `out` with elements [begin, begin + out.size()) of update i's values for `tensor`, an
// aggregated tensor of the global model, exactly as doubles. Updates are numbered 0..count - 1 in
// ascending device-id order. A strategy reads the same range of every update in turn and asks
// for at most `chunk_elements` elements at a time (0: its own default, a few MB of doubles over
// all the updates); neither changes a bit of the result. `read` may throw Refused, which refuses
// the updates. Example counts are not read: the strategies taking this ignore them.
struct UpdatesReader {
  size_t count = 0;
  std::function<void(size_t update, const NamedTensor& tensor, int64_t begin, std::span<double> out)> read;
  int64_t chunk_elements = 0;
};

struct EvaluationResult {
  DeviceId device_id;
  int64_t num_examples = 0;
  double loss = 0;
  std::map<std::string, double> metrics;
};

// Loss and each metric averaged over the devices that reported it, weighted by examples.
struct EvaluationSummary {
  int64_t num_examples = 0;
  double loss = 0;
  std::map<std::string, double> metrics;
  std::vector<DeviceId> contributors;  // sorted
};

// Everything a strategy carries from round to round: `meta` holds {"strategy", "params",
// "rounds"}, `tensors` the float64 state (momentum, m, v) named "<kind>/<tensor name>".
// Restoring it into a fresh strategy continues bit for bit as if nothing had happened.
struct StrategyState {
  nlohmann::json meta;
  Model tensors;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  Strategy(const Strategy&) = delete;
  Strategy& operator=(const Strategy&) = delete;

  const std::string& name() const { return name_; }
  // Every parameter with its value, defaults included: make_strategy(name(), params()) makes an
  // equal strategy.
  const nlohmann::json& params() const { return params_; }
  // What each selected device is told with its fit instruction: the strategy's client-side
  // parameters plus the "fit_config" parameter, verbatim.
  const nlohmann::json& configure_fit() const { return fit_config_; }
  // The "evaluate_config" parameter, verbatim.
  const nlohmann::json& configure_evaluate() const { return evaluate_config_; }
  // The fewest updates aggregate() accepts.
  virtual size_t min_updates() const { return 1; }
  virtual bool aggregates_from_weighted_sum() const = 0;
  // Rounds aggregated so far (restored with the state).
  uint64_t rounds() const { return rounds_; }

  virtual Model aggregate(const Model& global, std::span<const Update> updates) = 0;
  // Unsupported unless aggregates_from_weighted_sum().
  virtual Model aggregate_from_weighted_sum(const Model& global, const WeightedSum& sum);
  // The same with the sums read a piece at a time; a non-finite sum value is refused (Refused)
  // when read, before the strategy's state changes.
  virtual Model aggregate_from_weighted_sum(const Model& global, const WeightedSumReader& sum);
  // Unsupported when aggregates_from_weighted_sum() (those need the example counts). Refuses
  // (Refused) fewer than min_updates() updates, as aggregate() does.
  virtual Model aggregate_from_updates(const Model& global, const UpdatesReader& updates);
  // Refuses (Refused) no results, a repeated device, examples < 1, a non-finite loss or metric.
  EvaluationSummary aggregate_evaluate(std::span<const EvaluationResult> results) const;

  StrategyState export_state() const;
  // Refuses (ParameterRefused) a state of another strategy or other parameters, or whose
  // tensors are not this strategy's; the tensors' shapes are checked against the model at the
  // next aggregate.
  void restore_state(const StrategyState& state);

 protected:
  Strategy(std::string name, nlohmann::json params, nlohmann::json fit_config,
           nlohmann::json evaluate_config);
  // Called after an aggregate succeeded.
  void count_round() { ++rounds_; }
  virtual Model export_tensors() const { return {}; }
  virtual void restore_tensors(const Model& tensors);

 private:
  std::string name_;
  nlohmann::json params_;
  nlohmann::json fit_config_;
  nlohmann::json evaluate_config_;
  uint64_t rounds_ = 0;
};

// The names make_strategy knows.
const std::vector<std::string>& strategy_names();

// Builds a strategy from its name and a JSON object of parameters. Refuses (ParameterRefused)
// an unknown name (listing the known ones), an unknown parameter (listing the known ones), a
// parameter of the wrong type or out of range, naming it. Parameters, with defaults:
//   every strategy  fit_config {}, evaluate_config {}   (objects passed to clients verbatim)
//   fedprox         proximal_mu (required, >= 0)
//   fedavgm         server_learning_rate 1.0 (> 0), server_momentum 0.9 ([0, 1))
//   fedadagrad      eta 0.1, eta_l 0.1, tau 1e-9, beta_1 0.0
//   fedadam         eta 0.1, eta_l 0.1, tau 1e-9, beta_1 0.9, beta_2 0.99
//   fedyogi         eta 0.01, eta_l 0.0316, tau 1e-3, beta_1 0.9, beta_2 0.99
//                   (eta, eta_l > 0; tau > 0; beta_1, beta_2 in [0, 1))
//   trimmed_mean    beta 0.2 ([0, 0.5))
//   krum            f 0 (>= 0)
//   multi_krum      f 0 (>= 0), m (required, >= 1)
std::unique_ptr<Strategy> make_strategy(std::string_view name,
                                        const nlohmann::json& params = nlohmann::json::object());
// make_strategy(meta["strategy"], meta["params"]) followed by restore_state(state).
std::unique_ptr<Strategy> restore_strategy(const StrategyState& state);

}  // namespace tn::federated
