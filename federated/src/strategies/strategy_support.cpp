// The helpers every strategy shares: aligning the updates with the global model, reading them
// a range at a time, and the pass-through client configs.
#include "strategy_support.h"

#include <algorithm>
#include <unordered_map>

#include "federated/errors.h"
#include "numeric.h"

namespace tn::federated::detail {
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

}  // namespace tn::federated::detail
