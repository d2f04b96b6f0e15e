// FedMedian (Yin et al. 2018, "Byzantine-Robust Distributed Learning: Towards Optimal
// Statistical Rates"): the coordinate-wise median of the updates, unweighted; for an even count
// the mean of the two middle values.
#include <algorithm>

#include "coordinate_wise.h"

namespace tn::federated::detail {
namespace {

class FedMedian final : public CoordinateWiseStrategy {
 public:
  FedMedian(nlohmann::json params, ClientConfigs configs)
      : CoordinateWiseStrategy("fedmedian", std::move(params), std::move(configs)) {}

 private:
  // The two middle values as a/2 + b/2: halving is exact for values read from
  // float16/bfloat16/float32 (and for normal float64), and cannot overflow.
  double combine(std::vector<double>& values) const override {
    const size_t middle = values.size() / 2;
    std::nth_element(values.begin(), values.begin() + ptrdiff_t(middle), values.end());
    double upper = values[middle];
    if (values.size() % 2 == 1) return upper;
    double lower = *std::max_element(values.begin(), values.begin() + ptrdiff_t(middle));
    return 0.5 * lower + 0.5 * upper;
  }
};

}  // namespace

std::unique_ptr<Strategy> make_fedmedian(const nlohmann::json& params) {
  ParamReader reader("fedmedian", params);
  ClientConfigs configs = read_client_configs("fedmedian", reader, nlohmann::json::object());
  nlohmann::json resolved = reader.finish();
  return std::make_unique<FedMedian>(std::move(resolved), std::move(configs));
}

}  // namespace tn::federated::detail
