// The unmask stage: a device's answer to the coordinator's request, the reconstruction of
// secrets from the answers, and the removal of masks from the masked sum (secure_aggregation.h).
#include <set>
#include <string>

#include "secagg_internal.h"

namespace tn::federated::secagg {
namespace {

using Reason = SecAggRefused::Reason;
using detail::Sign;

std::string kind_name(ShareKind kind) {
  return kind == ShareKind::SelfMaskSeed ? "self-mask seed" : "mask secret";
}

std::string device_name(DeviceIndex device) { return "device " + std::to_string(device); }

// Refuses a device listed among both survivors and dropped: its self-mask seed and its mask
// secret together would strip every mask from its input.
void check_disjoint(const std::set<DeviceIndex>& survivors, const std::set<DeviceIndex>& dropped) {
  for (DeviceIndex device : dropped)
    if (survivors.count(device))
      throw SecAggRefused(Reason::BothSharesRequested,
                          "secure aggregation: both the self-mask seed and the mask "
                          "secret of " +
                              device_name(device) + " were requested");
}

template <typename Value>
const Value& secret_of(const std::map<DeviceIndex, Value>& secrets, DeviceIndex device,
                       const std::string& what) {
  auto it = secrets.find(device);
  if (it == secrets.end())
    throw SecAggRefused(Reason::Parameter, "secure aggregation: no " + what + " of " + device_name(device));
  return it->second;
}

// Removes from the sum what `survivor`'s input carries for its pair with the dropped device:
// it added the pad if survivor < dropped and subtracted it otherwise.
void remove_pairwise_mask(std::vector<uint32_t>& sum, unsigned bits, const Bytes32& dropped_secret,
                          DeviceIndex dropped, const Bytes32& survivor_key, DeviceIndex survivor,
                          std::string_view round_id) {
  Bytes32 seed = pairwise_seed(dropped_secret, dropped, survivor_key, survivor, round_id);
  detail::apply_mask(sum, seed, survivor < dropped ? Sign::Subtract : Sign::Add, bits);
  sodium_memzero(seed.data(), seed.size());
}

}  // namespace

std::vector<RevealedShare> answer_unmask_request(const std::map<DeviceIndex, HeldShares>& held,
                                                 const UnmaskRequest& request) {
  std::set<DeviceIndex> survivors(request.survivors.begin(), request.survivors.end());
  std::set<DeviceIndex> dropped(request.dropped.begin(), request.dropped.end());
  check_disjoint(survivors, dropped);
  // Devices this one holds no shares of are skipped, not refused: a request may list the round's
  // whole outcome and every device answers for its own neighbours.
  std::vector<RevealedShare> answer;
  for (DeviceIndex device : survivors)
    if (auto it = held.find(device); it != held.end())
      answer.push_back({device, ShareKind::SelfMaskSeed, it->second.self_mask_seed});
  for (DeviceIndex device : dropped)
    if (auto it = held.find(device); it != held.end())
      answer.push_back({device, ShareKind::MaskSecret, it->second.mask_secret});
  return answer;
}

ReconstructedSecrets reconstruct_secrets(const std::vector<RevealedShare>& revealed, uint32_t threshold) {
  std::map<DeviceIndex, std::vector<Share>> self_shares, secret_shares;
  for (const RevealedShare& item : revealed)
    (item.kind == ShareKind::SelfMaskSeed ? self_shares : secret_shares)[item.owner].push_back(item.share);
  std::set<DeviceIndex> survivors, dropped;
  for (const auto& entry : self_shares) survivors.insert(entry.first);
  for (const auto& entry : secret_shares) dropped.insert(entry.first);
  check_disjoint(survivors, dropped);
  auto combine = [threshold](DeviceIndex device, ShareKind kind, const std::vector<Share>& shares) {
    try {
      return shamir_combine(shares, threshold);
    } catch (const SecAggRefused& refused) {
      throw SecAggRefused(refused.reason,
                          "the " + kind_name(kind) + " of " + device_name(device) + ": " + refused.what());
    }
  };
  ReconstructedSecrets secrets;
  for (const auto& [device, shares] : self_shares)
    secrets.self_mask_seeds[device] = combine(device, ShareKind::SelfMaskSeed, shares);
  for (const auto& [device, shares] : secret_shares)
    secrets.mask_secrets[device] = combine(device, ShareKind::MaskSecret, shares);
  return secrets;
}

std::vector<uint32_t> unmask_sum(std::vector<uint32_t> masked_sum, unsigned bits, const NeighbourGraph& graph,
                                 std::string_view round_id, const std::map<DeviceIndex, Bytes32>& mask_keys,
                                 const UnmaskRequest& request, const ReconstructedSecrets& secrets) {
  detail::check_bits(bits);
  std::set<DeviceIndex> survivors(request.survivors.begin(), request.survivors.end());
  std::set<DeviceIndex> dropped(request.dropped.begin(), request.dropped.end());
  check_disjoint(survivors, dropped);
  for (DeviceIndex survivor : survivors)
    detail::apply_mask(masked_sum, secret_of(secrets.self_mask_seeds, survivor, "self-mask seed"),
                       Sign::Subtract, bits);
  for (DeviceIndex gone : dropped) {
    const Bytes32& secret = secret_of(secrets.mask_secrets, gone, "mask secret");
    for (DeviceIndex neighbour : graph.neighbours(gone))
      if (survivors.count(neighbour))
        remove_pairwise_mask(masked_sum, bits, secret, gone, secret_of(mask_keys, neighbour, "mask key"),
                             neighbour, round_id);
  }
  return masked_sum;
}

}  // namespace tn::federated::secagg
