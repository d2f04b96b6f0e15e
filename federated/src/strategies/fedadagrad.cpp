// FedAdagrad (Reddi et al. 2021, "Adaptive Federated Optimization", Algorithm 2):
// v = v + d^2, the second moment only grows.
#include "mean_family.h"

namespace tn::federated::detail {

std::unique_ptr<Strategy> make_fedadagrad(const nlohmann::json& params) {
  const AdaptiveParams defaults{.eta = 1e-1, .eta_l = 1e-1, .tau = 1e-9, .beta_1 = 0.0, .beta_2 = 0.0};
  return make_adaptive(
      "fedadagrad", params, defaults, /*with_beta_2=*/false,
      [](const AdaptiveParams&, double v_prior, double delta_squared) { return v_prior + delta_squared; });
}

}  // namespace tn::federated::detail
