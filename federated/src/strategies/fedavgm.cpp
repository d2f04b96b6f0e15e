// FedAvgM (Hsu et al. 2019, "Measuring the Effects of Non-Identical Data Distribution for
// Federated Visual Classification"): server momentum over the mean's step,
// d = avg - x;  u = beta u + d;  y = x + eta u;  u starts at 0.
#include <limits>

#include "mean_family.h"

namespace tn::federated::detail {
namespace {

class FedAvgM final : public MeanFamilyStrategy {
 public:
  FedAvgM(nlohmann::json params, ClientConfigs configs, double eta, double beta)
      : MeanFamilyStrategy("fedavgm", std::move(params), std::move(configs), ServerState::Momentum),
        eta_(eta),
        beta_(beta) {}

 private:
  void step(const StepChunk& c) const override {
    for (size_t j = 0; j < c.y.size(); ++j) {
      c.m[j] = beta_ * c.m_prior[j] + (c.average[j] - c.x[j]);
      c.y[j] = c.x[j] + eta_ * c.m[j];
    }
  }

  double eta_;   // server_learning_rate
  double beta_;  // server_momentum
};

}  // namespace

std::unique_ptr<Strategy> make_fedavgm(const nlohmann::json& params) {
  ParamReader reader("fedavgm", params);
  double eta = reader.real("server_learning_rate", 1.0, {0, std::numeric_limits<double>::infinity(), true});
  double beta = reader.real("server_momentum", 0.9, {0, 1, false, true});
  ClientConfigs configs = read_client_configs("fedavgm", reader, nlohmann::json::object());
  nlohmann::json resolved = reader.finish();
  return std::make_unique<FedAvgM>(std::move(resolved), std::move(configs), eta, beta);
}

}  // namespace tn::federated::detail
