// FedAvg (McMahan et al. 2017, "Communication-Efficient Learning of Deep Networks from
// Decentralized Data"): the new global model is the example-weighted mean of the updates.
#include "mean_family.h"

namespace tn::federated::detail {
namespace {

class WeightedMean final : public MeanFamilyStrategy {
 public:
  WeightedMean(std::string name, nlohmann::json params, ClientConfigs configs)
      : MeanFamilyStrategy(std::move(name), std::move(params), std::move(configs), ServerState::None) {}

 private:
  void step(const StepChunk& c) const override { std::copy(c.average.begin(), c.average.end(), c.y.begin()); }
};

}  // namespace

std::unique_ptr<Strategy> make_weighted_mean(const std::string& name, ParamReader& reader,
                                             nlohmann::json client_side) {
  ClientConfigs configs = read_client_configs(name, reader, std::move(client_side));
  nlohmann::json resolved = reader.finish();
  return std::make_unique<WeightedMean>(name, std::move(resolved), std::move(configs));
}

std::unique_ptr<Strategy> make_fedavg(const nlohmann::json& params) {
  ParamReader reader("fedavg", params);
  return make_weighted_mean("fedavg", reader, nlohmann::json::object());
}

}  // namespace tn::federated::detail
