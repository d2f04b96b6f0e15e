// One secure aggregation round on the coordinator (issue 20 points 1-2; docs/secure_aggregation.md):
// the selected devices numbered in device-id order with their registered identity keys, the
// SecAgg+ CoordinatorSession over them (the graph derived for that many devices, from a fresh
// seed), and at the end what a mean-family strategy reads from the unmasked sum. The task runner
// drives it through a SecureExchange (secure_exchange.h), which SecAggStage calls feed.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "federated/contribution.h"
#include "federated/secure_session.h"
#include "secure_aggregation_params.h"

namespace tn::server {

class SecureRound {
 public:
  // `identities`: the selected devices' registered Ed25519 public keys (32 bytes each). Refuses
  // (federated::ParameterRefused) a key of another length and a selection of other than the
  // devices_per_round the task's graph and headroom were derived for. `layout` (the round model's
  // WeightedSum layout) outlives the round.
  SecureRound(const SecureAggregationParams& params, std::string round_id,
              const std::map<federated::DeviceId, std::string>& identities,
              const federated::ContributionLayout& layout);

  federated::secagg::CoordinatorSession& session() { return session_; }
  // The device's index in the round; refuses (federated::ParameterRefused) one not selected.
  federated::secagg::DeviceIndex index_of(const federated::DeviceId& device) const;
  const std::vector<federated::DeviceId>& devices() const { return devices_; }
  // Words in each device's masked input: the layout's elements.
  size_t words() const { return layout_.elements(); }
  // The devices whose inputs the unmasked sum holds, once masking has closed.
  std::vector<federated::DeviceId> contributors() const;
  // What a mean-family strategy reads from the session's unmasked sum (close_unmasking's).
  federated::WeightedSumReader weighted_sum(const federated::Model& round_model,
                                            const std::vector<uint32_t>& unmasked_sum) const;

 private:
  federated::secagg::FixedPointParameters fixed_point_;
  const federated::ContributionLayout& layout_;
  std::vector<federated::DeviceId> devices_;  // by index: device-id order
  federated::secagg::CoordinatorSession session_;
};

}  // namespace tn::server
