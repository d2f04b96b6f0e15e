// What the strategy implementations share, and the table make_strategy builds them from. Private
// to the library; one strategy per file in this folder, each registered once in registry.cpp.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "federated/strategy.h"
#include "params.h"

namespace tn::federated::detail {

// The updates sorted by device id, and for each one its tensors in the global model's order.
struct AlignedUpdates {
  std::vector<const Update*> updates;
  std::vector<std::vector<const NamedTensor*>> tensors;  // [update][global tensor]
};

// Refuses fewer than `min_updates` updates, a repeated device, an example count below 1, and any
// update whose tensor names, dtypes, shapes or byte counts differ from the global model's.
AlignedUpdates align_updates(const std::string& strategy, const Model& global,
                             std::span<const Update> updates, size_t min_updates);

// Elements [begin, begin + out.size()) of update `update`'s tensor k (the global model's k-th,
// an aggregated one) as doubles: the one way the robust strategies see the updates, whether they
// were given whole (aggregate) or are read from where a hub keeps them (aggregate_from_updates).
using UpdateLoader = std::function<void(size_t update, size_t k, int64_t begin, std::span<double> out)>;
UpdateLoader load_aligned(const AlignedUpdates& aligned);
// Refuses, as align_updates does, fewer than `min_updates` updates (and a reader without a read
// function or with a negative chunk). The loader refers to `global` and `updates`.
UpdateLoader load_read(const std::string& strategy, const Model& global, const UpdatesReader& updates,
                       size_t min_updates);

// The pass-through client configs every strategy takes, checked against the strategy's own
// client-side parameters (a fit_config key may not overwrite one).
struct ClientConfigs {
  nlohmann::json fit;
  nlohmann::json evaluate;
};
ClientConfigs read_client_configs(const std::string& strategy, ParamReader& reader,
                                  nlohmann::json strategy_fit);

// A strategy's constructor: reads its parameters (refusing by name what does not fit) and
// builds it.
using StrategyMaker = std::unique_ptr<Strategy> (*)(const nlohmann::json& params);

std::unique_ptr<Strategy> make_fedavg(const nlohmann::json& params);
std::unique_ptr<Strategy> make_fedprox(const nlohmann::json& params);
std::unique_ptr<Strategy> make_fedavgm(const nlohmann::json& params);
std::unique_ptr<Strategy> make_fedadagrad(const nlohmann::json& params);
std::unique_ptr<Strategy> make_fedadam(const nlohmann::json& params);
std::unique_ptr<Strategy> make_fedyogi(const nlohmann::json& params);
std::unique_ptr<Strategy> make_fedmedian(const nlohmann::json& params);
std::unique_ptr<Strategy> make_trimmed_mean(const nlohmann::json& params);
std::unique_ptr<Strategy> make_krum(const nlohmann::json& params);
std::unique_ptr<Strategy> make_multi_krum(const nlohmann::json& params);

}  // namespace tn::federated::detail
