// The mean family's shared machinery: weighted sums, the step over chunks, the state tensors.
#include "mean_family.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

#include "federated/errors.h"
#include "numeric.h"

namespace tn::federated::detail {

MeanFamilyStrategy::MeanFamilyStrategy(std::string name, nlohmann::json params, ClientConfigs configs,
                                       ServerState state, double v_start)
    : Strategy(std::move(name), std::move(params), std::move(configs.fit), std::move(configs.evaluate)),
      state_(state),
      v_start_(v_start) {}

Model MeanFamilyStrategy::aggregate(const Model& global, std::span<const Update> updates) {
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

Model MeanFamilyStrategy::aggregate_from_weighted_sum(const Model& global, const WeightedSum& sum) {
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

Model MeanFamilyStrategy::aggregate_from_weighted_sum(const Model& global, const WeightedSumReader& sum) {
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

Model MeanFamilyStrategy::export_tensors() const {
  Model tensors;
  for (const StateMap* state : {&first_, &second_})
    for (const auto& [name, tensor] : *state) tensors.tensors.push_back(tensor);
  std::sort(tensors.tensors.begin(), tensors.tensors.end(),
            [](const NamedTensor& a, const NamedTensor& b) { return a.name < b.name; });
  return tensors;
}

void MeanFamilyStrategy::restore_tensors(const Model& tensors) {
  StateMap first, second;
  for (const NamedTensor& tensor : tensors.tensors) {
    StateMap* target = nullptr;
    if (tensor.name.starts_with(first_prefix())) target = &first;
    if (has_second_moment() && tensor.name.starts_with("v/")) target = &second;
    if (state_ == ServerState::None || !target)
      throw ParameterRefused(
          name() + ": the saved state has tensor '" + tensor.name + "', which is not " +
          (state_ == ServerState::None ? "kept by this strategy" : "one of its state tensors"));
    if (tensor.dtype != ScalarType::Double || tensor.nbytes != tensor.spec().nbytes() ||
        (tensor.nbytes > 0 && !tensor.data))
      throw ParameterRefused(name() + ": saved state tensor '" + tensor.name +
                             "' must be float64 and hold its shape's bytes");
    target->emplace(tensor.name, tensor);
  }
  if (has_second_moment())
    for (const auto& [state_name, tensor] : first)
      if (!second.contains("v/" + state_name.substr(2)))
        throw ParameterRefused(name() + ": the saved state has '" + state_name + "' without its 'v/" +
                               state_name.substr(2) + "'");
  if (has_second_moment() && first.size() != second.size())
    throw ParameterRefused(name() + ": the saved state's m and v tensors do not pair up");
  first_ = std::move(first);
  second_ = std::move(second);
}

void MeanFamilyStrategy::check_total_weight(double total_weight) const {
  if (!(total_weight > 0 && std::isfinite(total_weight)))
    throw Refused(name() + ": the weighted sum's total weight " + std::to_string(total_weight) +
                  " must be positive and finite");
}

// The state tensor `prefix + name` the round starts from, or nullptr on the first round (the
// state then starts at m = 0, v = tau^2). Refuses state that does not fit the model.
const NamedTensor* MeanFamilyStrategy::prior_state(const StateMap& state, const std::string& prefix,
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

Model MeanFamilyStrategy::step_from_sum(const Model& global, const SumSource& weighted_sum,
                                        double total_weight) {
  size_t aggregated = 0;
  for (const NamedTensor& tensor : global.tensors) aggregated += is_aggregated(tensor.dtype);
  bool stateful = state_ != ServerState::None;
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
    const NamedTensor* v_prior = has_second_moment() ? prior_state(second_, "v/", tensor) : nullptr;
    NewTensor out = allocate_tensor(tensor.spec());
    std::optional<NewTensor> m_out, v_out;
    if (stateful) m_out = allocate_tensor({first_prefix() + tensor.name, ScalarType::Double, tensor.shape});
    if (has_second_moment()) v_out = allocate_tensor({"v/" + tensor.name, ScalarType::Double, tensor.shape});
    const int64_t numel = tensor.numel();
    for (int64_t begin = 0; begin < numel; begin += kChunkElements) {
      const size_t count = size_t(std::min(kChunkElements, numel - begin));
      weighted_sum(k, begin, {sum.data(), count});
      load_as_double(tensor, begin, {x.data(), count});
      if (m_prior)
        load_as_double(*m_prior, begin, {m_old.data(), count});
      else
        std::fill_n(m_old.begin(), count, 0.0);
      if (v_prior)
        load_as_double(*v_prior, begin, {v_old.data(), count});
      else
        std::fill_n(v_old.begin(), count, v_start_);
      for (size_t j = 0; j < count; ++j) sum[j] /= total_weight;  // now the weighted mean
      step({{sum.data(), count},
            {x.data(), count},
            {m_old.data(), count},
            {v_old.data(), count},
            {y.data(), count},
            {m.data(), count},
            {v.data(), count}});
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

AdaptiveParams read_adaptive_params(ParamReader& reader, const AdaptiveParams& defaults, bool with_beta_2) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const Range positive{0, kInf, true}, decay{0, 1, false, true};
  AdaptiveParams p = defaults;
  p.eta = reader.real("eta", defaults.eta, positive);
  p.eta_l = reader.real("eta_l", defaults.eta_l, positive);
  p.tau = reader.real("tau", defaults.tau, positive);
  p.beta_1 = reader.real("beta_1", defaults.beta_1, decay);
  if (with_beta_2) p.beta_2 = reader.real("beta_2", defaults.beta_2, decay);
  return p;
}

}  // namespace tn::federated::detail
