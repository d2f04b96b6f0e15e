#include "federated/strategy.h"

#include <algorithm>
#include <cmath>

#include "federated/errors.h"

namespace tn::federated {

Strategy::Strategy(std::string name, nlohmann::json params, nlohmann::json fit_config,
                   nlohmann::json evaluate_config)
    : name_(std::move(name)),
      params_(std::move(params)),
      fit_config_(std::move(fit_config)),
      evaluate_config_(std::move(evaluate_config)) {}

Model Strategy::aggregate_from_weighted_sum(const Model&, const WeightedSum&) {
  throw Unsupported(name_ + ": cannot aggregate from a weighted sum, it needs the individual updates");
}

Model Strategy::aggregate_from_weighted_sum(const Model&, const WeightedSumReader&) {
  throw Unsupported(name_ + ": cannot aggregate from a weighted sum, it needs the individual updates");
}

Model Strategy::aggregate_from_updates(const Model&, const UpdatesReader&) {
  throw Unsupported(name_ + ": aggregates from the weighted sum, which needs the example counts");
}

EvaluationSummary Strategy::aggregate_evaluate(std::span<const EvaluationResult> results) const {
  if (results.empty()) throw Refused(name_ + ": no evaluation results to aggregate");
  std::vector<const EvaluationResult*> sorted;
  for (const EvaluationResult& result : results) sorted.push_back(&result);
  std::sort(sorted.begin(), sorted.end(),
            [](const EvaluationResult* a, const EvaluationResult* b) { return a->device_id < b->device_id; });

  struct WeightedTotal {
    double sum = 0;
    double weight = 0;
  };
  WeightedTotal loss;
  std::map<std::string, WeightedTotal> metrics;
  EvaluationSummary summary;
  for (const EvaluationResult* result : sorted) {
    const std::string from = name_ + ": evaluation from '" + result->device_id + "'";
    if (!summary.contributors.empty() && summary.contributors.back() == result->device_id)
      throw Refused(from + " is listed twice");
    if (result->num_examples < 1)
      throw Refused(from + ": " + std::to_string(result->num_examples) + " examples, must be at least 1");
    if (!std::isfinite(result->loss)) throw Refused(from + ": the loss is not finite");
    double weight = double(result->num_examples);
    loss.sum += weight * result->loss;
    loss.weight += weight;
    for (const auto& [metric, value] : result->metrics) {
      if (!std::isfinite(value)) throw Refused(from + ": metric '" + metric + "' is not finite");
      metrics[metric].sum += weight * value;
      metrics[metric].weight += weight;
    }
    summary.num_examples += result->num_examples;
    summary.contributors.push_back(result->device_id);
  }
  summary.loss = loss.sum / loss.weight;
  for (const auto& [metric, total] : metrics) summary.metrics[metric] = total.sum / total.weight;
  return summary;
}

StrategyState Strategy::export_state() const {
  return {{{"strategy", name_}, {"params", params_}, {"rounds", rounds_}}, export_tensors()};
}

void Strategy::restore_state(const StrategyState& state) {
  const nlohmann::json& meta = state.meta;
  if (!meta.is_object() || !meta.contains("strategy") || !meta.contains("params") || !meta.contains("rounds"))
    throw ParameterRefused(name_ + ": a saved state needs \"strategy\", \"params\" and \"rounds\", got " +
                           meta.dump());
  if (meta["strategy"] != name_)
    throw ParameterRefused(name_ + ": the saved state belongs to strategy " + meta["strategy"].dump());
  if (meta["params"] != params_)
    throw ParameterRefused(name_ + ": the saved state has parameters " + meta["params"].dump() +
                           ", this strategy has " + params_.dump());
  if (!meta["rounds"].is_number_integer() || meta["rounds"].get<int64_t>() < 0)
    throw ParameterRefused(name_ + ": the saved round count " + meta["rounds"].dump() + " is not a count");
  restore_tensors(state.tensors);
  rounds_ = meta["rounds"].get<uint64_t>();
}

void Strategy::restore_tensors(const Model& tensors) {
  if (!tensors.tensors.empty())
    throw ParameterRefused(name_ + ": keeps no state tensors, the saved state has '" +
                           tensors.tensors[0].name + "'");
}

}  // namespace tn::federated
