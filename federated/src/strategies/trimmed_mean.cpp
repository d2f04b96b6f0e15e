// The trimmed mean (Yin et al. 2018, "Byzantine-Robust Distributed Learning: Towards Optimal
// Statistical Rates"): per coordinate, k = floor(beta * n) values cut from each end and the mean
// of the remaining n - 2k, summed in ascending order; unweighted.
#include <algorithm>

#include "coordinate_wise.h"
#include "numeric.h"

namespace tn::federated::detail {
namespace {

class TrimmedMean final : public CoordinateWiseStrategy {
 public:
  TrimmedMean(nlohmann::json params, ClientConfigs configs, double beta)
      : CoordinateWiseStrategy("trimmed_mean", std::move(params), std::move(configs)), beta_(beta) {}

 private:
  double combine(std::vector<double>& values) const override {
    const size_t cut = floor_of_product(beta_, values.size());
    std::sort(values.begin(), values.end());
    double sum = 0;
    for (size_t i = cut; i < values.size() - cut; ++i) sum += values[i];
    return sum / double(values.size() - 2 * cut);
  }

  double beta_;  // the fraction cut from each end, in [0, 0.5)
};

}  // namespace

std::unique_ptr<Strategy> make_trimmed_mean(const nlohmann::json& params) {
  ParamReader reader("trimmed_mean", params);
  double beta = reader.real("beta", 0.2, {0, 0.5, false, true});
  ClientConfigs configs = read_client_configs("trimmed_mean", reader, nlohmann::json::object());
  nlohmann::json resolved = reader.finish();
  return std::make_unique<TrimmedMean>(std::move(resolved), std::move(configs), beta);
}

}  // namespace tn::federated::detail
