// FedProx (Li et al. 2020, "Federated Optimization in Heterogeneous Networks"): clients get
// "proximal_mu" in their fit config and add mu/2 |w - x|^2 to their loss; the server side is
// FedAvg's weighted mean.
#include <limits>

#include "mean_family.h"

namespace tn::federated::detail {

std::unique_ptr<Strategy> make_fedprox(const nlohmann::json& params) {
  ParamReader reader("fedprox", params);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  nlohmann::json client_side = {{"proximal_mu", reader.real("proximal_mu", std::nullopt, {0, kInf})}};
  return make_weighted_mean("fedprox", reader, std::move(client_side));
}

}  // namespace tn::federated::detail
