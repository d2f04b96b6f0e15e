// Strategies whose every coordinate of the result depends only on that coordinate's values across
// the updates (FedMedian, the trimmed mean), so they cannot start from a sum and take the updates
// themselves. The base class walks the coordinates; a strategy's own file combines one column.
#pragma once

#include <vector>

#include "strategy_support.h"

namespace tn::federated::detail {

class CoordinateWiseStrategy : public Strategy {
 public:
  bool aggregates_from_weighted_sum() const final { return false; }
  Model aggregate(const Model& global, std::span<const Update> updates) final;
  Model aggregate_from_updates(const Model& global, const UpdatesReader& updates) final;

 protected:
  CoordinateWiseStrategy(std::string name, nlohmann::json params, ClientConfigs configs)
      : Strategy(std::move(name), std::move(params), std::move(configs.fit), std::move(configs.evaluate)) {}
  // The result's value at one coordinate from every update's value there (unweighted, in any
  // order; `values` may be reordered).
  virtual double combine(std::vector<double>& values) const = 0;

 private:
  Model aggregate_loaded(const Model& global, size_t n, const UpdateLoader& load, int64_t chunk);
};

}  // namespace tn::federated::detail
