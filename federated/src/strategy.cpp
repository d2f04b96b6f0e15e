#include "federated/strategy.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "federated/errors.h"
#include "numeric.h"
#include "strategies.h"

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

const std::vector<std::string>& strategy_names() {
  static const std::vector<std::string> names = {"fedavg",  "fedprox",   "fedavgm",   "fedadagrad",
                                                 "fedadam", "fedyogi",   "fedmedian", "trimmed_mean",
                                                 "krum",    "multi_krum"};
  return names;
}

std::unique_ptr<Strategy> make_strategy(std::string_view name, const nlohmann::json& params) {
  const std::string key(name);
  if (key == "fedavg" || key == "fedprox" || key == "fedavgm" || key == "fedadagrad" || key == "fedadam" ||
      key == "fedyogi")
    return detail::make_mean_strategy(key, params);
  if (key == "fedmedian" || key == "trimmed_mean") return detail::make_coordinate_strategy(key, params);
  if (key == "krum" || key == "multi_krum") return detail::make_krum_strategy(key, params);
  std::string known;
  for (const std::string& candidate : strategy_names()) known += (known.empty() ? "" : ", ") + candidate;
  throw ParameterRefused("unknown strategy '" + key + "' (known: " + known + ")");
}

std::unique_ptr<Strategy> restore_strategy(const StrategyState& state) {
  if (!state.meta.is_object() || !state.meta.contains("strategy") || !state.meta["strategy"].is_string() ||
      !state.meta.contains("params"))
    throw ParameterRefused("saved strategy state: needs \"strategy\" and \"params\", got " +
                           state.meta.dump());
  std::unique_ptr<Strategy> strategy =
      make_strategy(state.meta["strategy"].get<std::string>(), state.meta["params"]);
  strategy->restore_state(state);
  return strategy;
}

namespace detail {
namespace {

void refuse_fewer_than(const std::string& strategy, size_t min_updates, size_t count) {
  if (count < min_updates)
    throw Refused(strategy + ": needs at least " + std::to_string(min_updates) + " update" +
                  (min_updates == 1 ? "" : "s") + ", got " + std::to_string(count));
}

}  // namespace

AlignedUpdates align_updates(const std::string& strategy, const Model& global,
                             std::span<const Update> updates, size_t min_updates) {
  refuse_fewer_than(strategy, min_updates, updates.size());
  global.spec();  // refuses a global model whose buffers do not match its shapes
  AlignedUpdates aligned;
  for (const Update& update : updates) aligned.updates.push_back(&update);
  std::sort(aligned.updates.begin(), aligned.updates.end(),
            [](const Update* a, const Update* b) { return a->device_id < b->device_id; });

  std::unordered_map<std::string_view, size_t> position;
  for (size_t k = 0; k < global.tensors.size(); ++k) position.emplace(global.tensors[k].name, k);
  using Reason = UpdateRefused::Reason;
  for (size_t i = 0; i < aligned.updates.size(); ++i) {
    const Update& update = *aligned.updates[i];
    const std::string from = strategy + ": update from '" + update.device_id + "'";
    if (i > 0 && aligned.updates[i - 1]->device_id == update.device_id)
      throw UpdateRefused(Reason::Duplicate, from + " is given twice");
    if (update.num_examples < 1)
      throw UpdateRefused(Reason::BadExamples, from + ": " + std::to_string(update.num_examples) +
                                                   " examples, must be at least 1");
    if (update.model.tensors.size() != global.tensors.size())
      throw UpdateRefused(Reason::Malformed, from + " has " + std::to_string(update.model.tensors.size()) +
                                                 " tensors, the model has " +
                                                 std::to_string(global.tensors.size()));
    std::vector<const NamedTensor*> tensors(global.tensors.size(), nullptr);
    for (const NamedTensor& tensor : update.model.tensors) {
      auto found = position.find(tensor.name);
      if (found == position.end() || tensors[found->second])
        throw UpdateRefused(Reason::Malformed,
                            from + ": tensor '" + tensor.name + "' is not the model's or repeated");
      const NamedTensor& reference = global.tensors[found->second];
      if (tensor.dtype != reference.dtype || tensor.shape != reference.shape ||
          tensor.nbytes != reference.nbytes || (tensor.nbytes > 0 && !tensor.data))
        throw UpdateRefused(
            Reason::Malformed,
            from + ": tensor '" + tensor.name + "' does not match the global model's dtype, shape or size");
      tensors[found->second] = &tensor;
    }
    aligned.tensors.push_back(std::move(tensors));
  }
  return aligned;
}

UpdateLoader load_aligned(const AlignedUpdates& aligned) {
  return [&aligned](size_t update, size_t k, int64_t begin, std::span<double> out) {
    load_as_double(*aligned.tensors[update][k], begin, out);
  };
}

UpdateLoader load_read(const std::string& strategy, const Model& global, const UpdatesReader& updates,
                       size_t min_updates) {
  refuse_fewer_than(strategy, min_updates, updates.count);
  if (!updates.read) throw Refused(strategy + ": the updates reader has no read function");
  if (updates.chunk_elements < 0)
    throw Refused(strategy + ": the updates reader's chunk of " + std::to_string(updates.chunk_elements) +
                  " elements is negative");
  global.spec();  // refuses a global model whose buffers do not match its shapes
  return [&global, &updates](size_t update, size_t k, int64_t begin, std::span<double> out) {
    updates.read(update, global.tensors[k], begin, out);
  };
}

ClientConfigs read_client_configs(const std::string& strategy, ParamReader& reader,
                                  nlohmann::json strategy_fit) {
  nlohmann::json fit = reader.object("fit_config");
  for (const auto& [key, value] : strategy_fit.items())
    if (fit.contains(key))
      throw ParameterRefused(strategy + ": fit_config may not set '" + key + "', the strategy sends it");
  fit.update(strategy_fit);
  return {std::move(fit), reader.object("evaluate_config")};
}

}  // namespace detail
}  // namespace tn::federated
