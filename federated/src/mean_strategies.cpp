// FedAvg, FedProx, FedAvgM, FedAdagrad, FedAdam, FedYogi: every one a server step applied to
// the example-weighted mean of the updates, so each can start from a weighted sum.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <unordered_map>
#include <vector>

#include "federated/errors.h"
#include "numeric.h"
#include "strategies.h"

namespace tn::federated::detail {
namespace {

enum class Step { Average, Momentum, Adagrad, Adam, Yogi };

struct StepParams {
  double eta = 1;     // server learning rate
  double beta_1 = 0;  // momentum (FedAvgM) or first-moment decay
  double beta_2 = 0;  // second-moment decay (Adam, Yogi)
  double tau = 0;     // adaptivity floor
};

// State tensors are float64, so storing the state between rounds rounds nothing.
using StateMap = std::unordered_map<std::string, NamedTensor>;

class MeanStrategy final : public Strategy {
 public:
  MeanStrategy(std::string name, nlohmann::json params, ClientConfigs configs, Step step,
               StepParams step_params)
      : Strategy(std::move(name), std::move(params), std::move(configs.fit), std::move(configs.evaluate)),
        step_(step),
        p_(step_params) {}

  bool aggregates_from_weighted_sum() const override { return true; }

  Model aggregate(const Model& global, std::span<const Update> updates) override {
    AlignedUpdates aligned = align_updates(name(), global, updates, 1);
    double total_weight = 0;
    for (const Update* update : aligned.updates) total_weight += double(update->num_examples);
    std::vector<double> values(kChunkElements);
    // sum_i n_i * x_i over the updates in device-id order: the sum a float64 hub reduce in rank
    // order delivers, so both entry points give the same bits.
    auto weighted_sum = [&](size_t k, int64_t begin, std::span<double> sum) {
      std::fill(sum.begin(), sum.end(), 0.0);
      for (size_t i = 0; i < aligned.updates.size(); ++i) {
        double weight = double(aligned.updates[i]->num_examples);
        std::span<double> x(values.data(), sum.size());
        load_as_double(*aligned.tensors[i][k], begin, x);
        for (size_t j = 0; j < sum.size(); ++j) sum[j] += weight * x[j];
      }
    };
    return step_from_sum(global, weighted_sum, total_weight);
  }

  Model aggregate_from_weighted_sum(const Model& global, const WeightedSum& sum) override {
    global.spec();  // refuses a global model whose buffers do not match its shapes
    check_total_weight(sum.total_weight);
    std::unordered_map<std::string_view, const NamedTensor*> by_name;
    for (const NamedTensor& tensor : sum.sum.tensors)
      if (!by_name.emplace(tensor.name, &tensor).second)
        throw Refused(name() + ": the weighted sum lists tensor '" + tensor.name + "' twice");
    size_t expected = 0;
    for (const NamedTensor& reference : global.tensors) {
      if (!is_aggregated(reference.dtype)) continue;
      ++expected;
      auto found = by_name.find(reference.name);
      if (found == by_name.end())
        throw Refused(name() + ": the weighted sum lacks tensor '" + reference.name + "'");
      const NamedTensor& tensor = *found->second;
      if (!is_aggregated(tensor.dtype) || tensor.shape != reference.shape ||
          tensor.nbytes != tensor.spec().nbytes() || (tensor.nbytes > 0 && !tensor.data))
        throw Refused(name() + ": the weighted sum's tensor '" + tensor.name +
                      "' must be floating, of the model's shape and hold its bytes");
    }
    if (sum.sum.tensors.size() != expected)
      throw Refused(name() + ": the weighted sum has " + std::to_string(sum.sum.tensors.size()) +
                    " tensors, the model has " + std::to_string(expected) + " floating ones");
    WeightedSumReader reader{[&](const NamedTensor& tensor, int64_t begin, std::span<double> out) {
                               load_as_double(*by_name.at(tensor.name), begin, out);
                             },
                             sum.total_weight};
    return aggregate_from_weighted_sum(global, reader);
  }

  Model aggregate_from_weighted_sum(const Model& global, const WeightedSumReader& sum) override {
    global.spec();  // refuses a global model whose buffers do not match its shapes
    check_total_weight(sum.total_weight);
    auto read_sum = [&](size_t k, int64_t begin, std::span<double> out) {
      const NamedTensor& tensor = global.tensors[k];
      sum.read(tensor, begin, out);
      for (size_t j = 0; j < out.size(); ++j)
        if (!std::isfinite(out[j]))
          throw Refused(name() + ": the weighted sum's tensor '" + tensor.name + "' element " +
                        std::to_string(begin + int64_t(j)) + " is not finite");
    };
    return step_from_sum(global, read_sum, sum.total_weight);
  }

 protected:
  Model export_tensors() const override {
    Model tensors;
    for (const StateMap* state : {&first_, &second_})
      for (const auto& [name, tensor] : *state) tensors.tensors.push_back(tensor);
    std::sort(tensors.tensors.begin(), tensors.tensors.end(),
              [](const NamedTensor& a, const NamedTensor& b) { return a.name < b.name; });
    return tensors;
  }

  void restore_tensors(const Model& tensors) override {
    StateMap first, second;
    for (const NamedTensor& tensor : tensors.tensors) {
      StateMap* target = nullptr;
      if (tensor.name.starts_with(first_prefix())) target = &first;
      if (uses_second_moment() && tensor.name.starts_with("v/")) target = &second;
      if (step_ == Step::Average || !target)
        throw ParameterRefused(
            name() + ": the saved state has tensor '" + tensor.name + "', which is not " +
            (step_ == Step::Average ? "kept by this strategy" : "one of its state tensors"));
      if (tensor.dtype != ScalarType::Double || tensor.nbytes != tensor.spec().nbytes() ||
          (tensor.nbytes > 0 && !tensor.data))
        throw ParameterRefused(name() + ": saved state tensor '" + tensor.name +
                               "' must be float64 and hold its shape's bytes");
      target->emplace(tensor.name, tensor);
    }
    if (uses_second_moment())
      for (const auto& [state_name, tensor] : first)
        if (!second.contains("v/" + state_name.substr(2)))
          throw ParameterRefused(name() + ": the saved state has '" + state_name + "' without its 'v/" +
                                 state_name.substr(2) + "'");
    if (uses_second_moment() && first.size() != second.size())
      throw ParameterRefused(name() + ": the saved state's m and v tensors do not pair up");
    first_ = std::move(first);
    second_ = std::move(second);
  }

 private:
  using SumSource = std::function<void(size_t tensor, int64_t begin, std::span<double> sum)>;

  void check_total_weight(double total_weight) const {
    if (!(total_weight > 0 && std::isfinite(total_weight)))
      throw Refused(name() + ": the weighted sum's total weight " + std::to_string(total_weight) +
                    " must be positive and finite");
  }

  bool uses_second_moment() const {
    return step_ == Step::Adagrad || step_ == Step::Adam || step_ == Step::Yogi;
  }
  std::string first_prefix() const { return step_ == Step::Momentum ? "momentum/" : "m/"; }

  // The state tensor `prefix + name` the round starts from, or nullptr on the first round (the
  // state then starts at m = 0, v = tau^2). Refuses state that does not fit the model.
  const NamedTensor* prior_state(const StateMap& state, const std::string& prefix,
                                 const NamedTensor& tensor) const {
    if (state.empty() && rounds() == 0) return nullptr;
    auto found = state.find(prefix + tensor.name);
    if (found == state.end())
      throw ParameterRefused(name() + ": the state after " + std::to_string(rounds()) + " rounds has no '" +
                             prefix + tensor.name + "'; it was made for another model");
    if (found->second.shape != tensor.shape)
      throw ParameterRefused(name() + ": state '" + found->first + "' has shape " +
                             shape_str(found->second.shape) + ", the model's tensor has " +
                             shape_str(tensor.shape));
    return &found->second;
  }

  Model step_from_sum(const Model& global, const SumSource& weighted_sum, double total_weight) {
    size_t aggregated = 0;
    for (const NamedTensor& tensor : global.tensors) aggregated += is_aggregated(tensor.dtype);
    bool stateful = step_ != Step::Average;
    if (stateful && !(first_.empty() && rounds() == 0) && first_.size() != aggregated)
      throw ParameterRefused(name() + ": the state holds " + std::to_string(first_.size()) +
                             " tensors, the model has " + std::to_string(aggregated) + " floating ones");

    Model result;
    StateMap first, second;
    std::vector<double> sum(kChunkElements), x(kChunkElements), y(kChunkElements), m_old(kChunkElements),
        v_old(kChunkElements), m(kChunkElements), v(kChunkElements);
    for (size_t k = 0; k < global.tensors.size(); ++k) {
      const NamedTensor& tensor = global.tensors[k];
      if (!is_aggregated(tensor.dtype)) {
        result.tensors.push_back(tensor);
        continue;
      }
      const NamedTensor* m_prior = stateful ? prior_state(first_, first_prefix(), tensor) : nullptr;
      const NamedTensor* v_prior = uses_second_moment() ? prior_state(second_, "v/", tensor) : nullptr;
      NewTensor out = allocate_tensor(tensor.spec());
      std::optional<NewTensor> m_out, v_out;
      if (stateful) m_out = allocate_tensor({first_prefix() + tensor.name, ScalarType::Double, tensor.shape});
      if (uses_second_moment())
        v_out = allocate_tensor({"v/" + tensor.name, ScalarType::Double, tensor.shape});
      const int64_t numel = tensor.numel();
      for (int64_t begin = 0; begin < numel; begin += kChunkElements) {
        const size_t count = size_t(std::min(kChunkElements, numel - begin));
        weighted_sum(k, begin, {sum.data(), count});
        load_as_double(tensor, begin, {x.data(), count});
        if (m_prior) load_as_double(*m_prior, begin, {m_old.data(), count});
        if (v_prior) load_as_double(*v_prior, begin, {v_old.data(), count});
        for (size_t j = 0; j < count; ++j) {
          double average = sum[j] / total_weight;
          y[j] = step_one(average, x[j], m_prior ? m_old[j] : 0.0, v_prior ? v_old[j] : p_.tau * p_.tau, m[j],
                          v[j]);
        }
        store_rounded({y.data(), count}, tensor.dtype, out.bytes, begin);
        if (m_out) store_rounded({m.data(), count}, ScalarType::Double, m_out->bytes, begin);
        if (v_out) store_rounded({v.data(), count}, ScalarType::Double, v_out->bytes, begin);
      }
      refuse_non_finite_result(name(), out.tensor);
      for (auto [state, target] : {std::pair{&m_out, &first}, std::pair{&v_out, &second}}) {
        if (!*state) continue;
        refuse_non_finite_result(name(), (*state)->tensor);
        target->emplace((*state)->tensor.name, std::move((*state)->tensor));
      }
      result.tensors.push_back(std::move(out.tensor));
    }
    // Only now that every tensor succeeded does the state move on.
    first_ = std::move(first);
    second_ = std::move(second);
    count_round();
    return result;
  }

  // One coordinate: the new model value from the weighted mean, the global value and the prior
  // state; the new state goes to m and v. The equations are those of strategy.h.
  double step_one(double average, double x, double m_prior, double v_prior, double& m, double& v) const {
    if (step_ == Step::Average) return average;
    double delta = average - x;
    if (step_ == Step::Momentum) {
      m = p_.beta_1 * m_prior + delta;
      return x + p_.eta * m;
    }
    m = p_.beta_1 * m_prior + (1 - p_.beta_1) * delta;
    double delta_squared = delta * delta;
    switch (step_) {
      case Step::Adagrad:
        v = v_prior + delta_squared;
        break;
      case Step::Adam:
        v = p_.beta_2 * v_prior + (1 - p_.beta_2) * delta_squared;
        break;
      default: {
        double difference = v_prior - delta_squared;
        double sign = difference > 0 ? 1.0 : (difference < 0 ? -1.0 : 0.0);
        v = v_prior - (1 - p_.beta_2) * delta_squared * sign;
      }
    }
    return x + p_.eta * m / (std::sqrt(v) + p_.tau);
  }

  Step step_;
  StepParams p_;
  StateMap first_;   // momentum (FedAvgM) or m
  StateMap second_;  // v
};

}  // namespace

std::unique_ptr<Strategy> make_mean_strategy(const std::string& name, const nlohmann::json& params) {
  ParamReader reader(name, params);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const Range positive{0, kInf, true}, decay{0, 1, false, true};
  StepParams p;
  Step step = Step::Average;
  nlohmann::json client_side = nlohmann::json::object();
  if (name == "fedprox") {
    client_side["proximal_mu"] = reader.real("proximal_mu", std::nullopt, {0, kInf});
  } else if (name == "fedavgm") {
    step = Step::Momentum;
    p.eta = reader.real("server_learning_rate", 1.0, positive);
    p.beta_1 = reader.real("server_momentum", 0.9, decay);
  } else if (name != "fedavg") {
    step = name == "fedadagrad" ? Step::Adagrad : name == "fedadam" ? Step::Adam : Step::Yogi;
    bool yogi = step == Step::Yogi;
    p.eta = reader.real("eta", yogi ? 1e-2 : 1e-1, positive);
    client_side["eta_l"] = reader.real("eta_l", yogi ? 0.0316 : 1e-1, positive);
    p.tau = reader.real("tau", yogi ? 1e-3 : 1e-9, positive);
    p.beta_1 = reader.real("beta_1", step == Step::Adagrad ? 0.0 : 0.9, decay);
    if (step != Step::Adagrad) p.beta_2 = reader.real("beta_2", 0.99, decay);
  }
  ClientConfigs configs = read_client_configs(name, reader, client_side);
  nlohmann::json resolved = reader.finish();
  return std::make_unique<MeanStrategy>(name, std::move(resolved), std::move(configs), step, p);
}

}  // namespace tn::federated::detail
