// FedYogi (Reddi et al. 2021, "Adaptive Federated Optimization", Algorithm 2):
// v = v - (1 - beta_2) d^2 sign(v - d^2), with sign(0) = 0: the second moment moves towards d^2
// by a step that does not grow with v.
#include "mean_family.h"

namespace tn::federated::detail {

std::unique_ptr<Strategy> make_fedyogi(const nlohmann::json& params) {
  const AdaptiveParams defaults{.eta = 1e-2, .eta_l = 0.0316, .tau = 1e-3, .beta_1 = 0.9, .beta_2 = 0.99};
  return make_adaptive("fedyogi", params, defaults, /*with_beta_2=*/true,
                       [](const AdaptiveParams& p, double v_prior, double delta_squared) {
                         double difference = v_prior - delta_squared;
                         double sign = difference > 0 ? 1.0 : (difference < 0 ? -1.0 : 0.0);
                         return v_prior - (1 - p.beta_2) * delta_squared * sign;
                       });
}

}  // namespace tn::federated::detail
