// FedAdam (Reddi et al. 2021, "Adaptive Federated Optimization", Algorithm 2):
// v = beta_2 v + (1 - beta_2) d^2, without bias correction.
#include "mean_family.h"

namespace tn::federated::detail {

std::unique_ptr<Strategy> make_fedadam(const nlohmann::json& params) {
  const AdaptiveParams defaults{.eta = 1e-1, .eta_l = 1e-1, .tau = 1e-9, .beta_1 = 0.9, .beta_2 = 0.99};
  return make_adaptive("fedadam", params, defaults, /*with_beta_2=*/true,
                       [](const AdaptiveParams& p, double v_prior, double delta_squared) {
                         return p.beta_2 * v_prior + (1 - p.beta_2) * delta_squared;
                       });
}

}  // namespace tn::federated::detail
