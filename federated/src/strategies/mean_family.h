// The mean family (FedAvg, FedProx, FedAvgM, FedAdagrad, FedAdam, FedYogi): every one a server
// step applied to the example-weighted mean of the updates, so each can start from a weighted
// sum. The base class owns the weighted sums, the state tensors and their export; a strategy's
// own file says only how one chunk of coordinates steps (the equations of strategy.h).
#pragma once

#include <cmath>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>

#include "strategy_support.h"

namespace tn::federated::detail {

// What a server step carries from round to round, per aggregated tensor, in float64.
enum class ServerState {
  None,      // nothing: y = avg
  Momentum,  // "momentum/<tensor>"
  Moments,   // "m/<tensor>" and "v/<tensor>"
};

// One chunk of coordinates of one tensor. The priors hold the state the round starts from: on
// the first round m = 0 and v = the strategy's start value. A step writes y, and m and v as its
// state uses them.
struct StepChunk {
  std::span<const double> average;  // sum_i n_i x_i / N
  std::span<const double> x;        // the global model
  std::span<const double> m_prior, v_prior;
  std::span<double> y, m, v;
};

class MeanFamilyStrategy : public Strategy {
 public:
  bool aggregates_from_weighted_sum() const final { return true; }
  Model aggregate(const Model& global, std::span<const Update> updates) final;
  Model aggregate_from_weighted_sum(const Model& global, const WeightedSum& sum) final;
  Model aggregate_from_weighted_sum(const Model& global, const WeightedSumReader& sum) final;

 protected:
  MeanFamilyStrategy(std::string name, nlohmann::json params, ClientConfigs configs, ServerState state,
                     double v_start = 0);
  virtual void step(const StepChunk& chunk) const = 0;
  Model export_tensors() const final;
  void restore_tensors(const Model& tensors) final;

 private:
  // State tensors are float64, so storing the state between rounds rounds nothing.
  using StateMap = std::unordered_map<std::string, NamedTensor>;
  using SumSource = std::function<void(size_t tensor, int64_t begin, std::span<double> sum)>;

  void check_total_weight(double total_weight) const;
  bool has_second_moment() const { return state_ == ServerState::Moments; }
  std::string first_prefix() const { return state_ == ServerState::Momentum ? "momentum/" : "m/"; }
  const NamedTensor* prior_state(const StateMap& state, const std::string& prefix,
                                 const NamedTensor& tensor) const;
  Model step_from_sum(const Model& global, const SumSource& weighted_sum, double total_weight);

  ServerState state_;
  double v_start_;
  StateMap first_;   // momentum (FedAvgM) or m
  StateMap second_;  // v
};

// FedAvg's server side, which FedProx shares (y = avg), its parameters read from `reader`;
// `client_side` goes to the clients.
std::unique_ptr<Strategy> make_weighted_mean(const std::string& name, ParamReader& reader,
                                             nlohmann::json client_side);

// The adaptive server optimizers of Reddi et al. 2021 (FedAdagrad, FedAdam, FedYogi) share their
// parameters, their first moment and their step; they differ in the second moment.
struct AdaptiveParams {
  double eta;     // server learning rate
  double eta_l;   // the clients' learning rate, sent to them
  double tau;     // adaptivity floor; v starts at tau^2
  double beta_1;  // first-moment decay
  double beta_2;  // second-moment decay (not FedAdagrad's)
};
AdaptiveParams read_adaptive_params(ParamReader& reader, const AdaptiveParams& defaults, bool with_beta_2);

// One of them: m = beta_1 m_prior + (1 - beta_1) d,  v = second_moment(p, v_prior, d^2),
// y = x + eta m / (sqrt(v) + tau),  with d = avg - x.
template <typename SecondMoment>
class AdaptiveStrategy final : public MeanFamilyStrategy {
 public:
  AdaptiveStrategy(std::string name, nlohmann::json params, ClientConfigs configs, const AdaptiveParams& p,
                   SecondMoment second_moment)
      : MeanFamilyStrategy(std::move(name), std::move(params), std::move(configs), ServerState::Moments,
                           p.tau * p.tau),
        p_(p),
        second_moment_(second_moment) {}

 private:
  void step(const StepChunk& c) const override {
    for (size_t j = 0; j < c.y.size(); ++j) {
      double delta = c.average[j] - c.x[j];
      c.m[j] = p_.beta_1 * c.m_prior[j] + (1 - p_.beta_1) * delta;
      c.v[j] = second_moment_(p_, c.v_prior[j], delta * delta);
      c.y[j] = c.x[j] + p_.eta * c.m[j] / (std::sqrt(c.v[j]) + p_.tau);
    }
  }

  AdaptiveParams p_;
  SecondMoment second_moment_;
};

// Reads the parameters (eta, eta_l, tau, beta_1 and, with_beta_2, beta_2, each defaulting to
// `defaults`') and builds the adaptive strategy `name`; eta_l goes to the clients.
template <typename SecondMoment>
std::unique_ptr<Strategy> make_adaptive(const std::string& name, const nlohmann::json& params,
                                        const AdaptiveParams& defaults, bool with_beta_2,
                                        SecondMoment second_moment) {
  ParamReader reader(name, params);
  AdaptiveParams p = read_adaptive_params(reader, defaults, with_beta_2);
  ClientConfigs configs = read_client_configs(name, reader, {{"eta_l", p.eta_l}});
  nlohmann::json resolved = reader.finish();
  return std::make_unique<AdaptiveStrategy<SecondMoment>>(name, std::move(resolved), std::move(configs), p,
                                                          second_moment);
}

}  // namespace tn::federated::detail
