#include "secure_round.h"

#include <sodium.h>

#include <algorithm>
#include <cstring>

#include "federated/errors.h"
#include "federated/secure_contribution.h"

namespace tn::server {

namespace {

using federated::ParameterRefused;
namespace secagg = federated::secagg;

std::vector<secagg::Bytes32> identity_keys(const std::map<federated::DeviceId, std::string>& identities) {
  std::vector<secagg::Bytes32> keys;
  for (const auto& [device, key] : identities) {
    if (key.size() != secagg::Bytes32{}.size())
      throw ParameterRefused("secure round: device '" + device + "' has a registered key of " +
                             std::to_string(key.size()) + " bytes, not an Ed25519 public key of 32");
    std::memcpy(keys.emplace_back().data(), key.data(), key.size());
  }
  return keys;
}

secagg::GraphParameters graph_for(const SecureAggregationParams& params, size_t selected) {
  if (selected != params.fixed_point.max_devices)
    throw ParameterRefused("secure round: " + std::to_string(selected) +
                           " devices selected, the task's graph and "
                           "headroom are derived for " +
                           std::to_string(params.fixed_point.max_devices));
  return params.graph();
}

// The graph's seed: fresh from libsodium's CSPRNG each round, so that no device can choose its
// neighbours in advance.
secagg::Bytes32 fresh_seed() {
  secagg::Bytes32 seed;
  randombytes_buf(seed.data(), seed.size());
  return seed;
}

}  // namespace

SecureRound::SecureRound(const SecureAggregationParams& params, std::string round_id,
                         const std::map<federated::DeviceId, std::string>& identities,
                         const federated::ContributionLayout& layout)
    : fixed_point_(params.fixed_point),
      layout_(layout),
      session_(std::move(round_id), identity_keys(identities), graph_for(params, identities.size()),
               fresh_seed(), params.fixed_point.bits, layout.elements()) {
  for (const auto& [device, key] : identities) devices_.push_back(device);
}

secagg::DeviceIndex SecureRound::index_of(const federated::DeviceId& device) const {
  const auto found = std::ranges::lower_bound(devices_, device);
  if (found == devices_.end() || *found != device)
    throw ParameterRefused("secure round: device '" + device + "' is not selected for it");
  return static_cast<secagg::DeviceIndex>(found - devices_.begin());
}

std::vector<federated::DeviceId> SecureRound::contributors() const {
  std::vector<federated::DeviceId> out;
  for (secagg::DeviceIndex index : session_.survivors()) out.push_back(devices_[index]);
  return out;
}

federated::WeightedSumReader SecureRound::weighted_sum(const federated::Model& round_model,
                                                       const std::vector<uint32_t>& unmasked_sum) const {
  return secagg::secure_weighted_sum(layout_, round_model, unmasked_sum,
                                     static_cast<uint32_t>(session_.survivors().size()), fixed_point_);
}

}  // namespace tn::server
