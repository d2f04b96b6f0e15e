// A device's side of a round's data plane (RoundConfig.data_plane; docs/DESIGN.md, the federated
// round's data plane): joined as its rank of a star around the hub, the model received from the
// hub's broadcast, and a secure round's masked input sent into the hub's reduce of integer vectors
// (docs/secure_aggregation.md, Transport). Device uses them, and so does tests/federated's rogue
// device.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "distributed/process_group.h"
#include "federated/model.h"
#include "torchnative/federated/v1/device.pb.h"

namespace tn::client {

namespace v1 = ::torchnative::federated::v1;

// The round's data plane joined as the rank it names, each operation within `timeout` unless it
// carries a deadline of its own. Throws what the rendezvous refuses.
std::unique_ptr<dist::ProcessGroup> join_data_plane(const v1::RoundConfig& round,
                                                    std::chrono::milliseconds timeout);
// The round's model from the hub's broadcast, laid out as the round's table and checked against
// its digest.
federated::Model receive_model(dist::ProcessGroup& group, const v1::RoundConfig& round);
// A secure round's masked input into the hub's reduce (CONTRIBUTION_KIND_MASKED_WORDS: the words as
// int32, the same bits, summed there modulo 2^32). Throws unless the hub took it whole.
void send_masked_words(dist::ProcessGroup& group, const v1::RoundConfig& round,
                       const std::vector<uint32_t>& masked);

}  // namespace tn::client
