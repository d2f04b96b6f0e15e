// The one table of strategies: a name and its constructor. A new strategy is one file in this
// folder and one row here.
#include <array>

#include "federated/errors.h"
#include "strategy_support.h"

namespace tn::federated {
namespace {

struct StrategyEntry {
  std::string_view name;
  detail::StrategyMaker make;
};

constexpr std::array kStrategies = {
    StrategyEntry{"fedavg", detail::make_fedavg},
    StrategyEntry{"fedprox", detail::make_fedprox},
    StrategyEntry{"fedavgm", detail::make_fedavgm},
    StrategyEntry{"fedadagrad", detail::make_fedadagrad},
    StrategyEntry{"fedadam", detail::make_fedadam},
    StrategyEntry{"fedyogi", detail::make_fedyogi},
    StrategyEntry{"fedmedian", detail::make_fedmedian},
    StrategyEntry{"trimmed_mean", detail::make_trimmed_mean},
    StrategyEntry{"krum", detail::make_krum},
    StrategyEntry{"multi_krum", detail::make_multi_krum},
};

}  // namespace

const std::vector<std::string>& strategy_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all;
    for (const StrategyEntry& entry : kStrategies) all.emplace_back(entry.name);
    return all;
  }();
  return names;
}

std::unique_ptr<Strategy> make_strategy(std::string_view name, const nlohmann::json& params) {
  for (const StrategyEntry& entry : kStrategies)
    if (entry.name == name) return entry.make(params);
  std::string known;
  for (const std::string& candidate : strategy_names()) known += (known.empty() ? "" : ", ") + candidate;
  throw ParameterRefused("unknown strategy '" + std::string(name) + "' (known: " + known + ")");
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

}  // namespace tn::federated
