// SecAgg+'s stages as two state machines (issue 20 points 1 and 3; docs/secure_aggregation.md),
// one per device and one for the coordinator, transport-agnostic: the coordinator's round feeds
// them what devices send and relays what they return. Bell, Bonawitz, Gascón, Lepoint and Raykova
// 2020, the protocol's rounds 0-4 (advertise keys, share keys, masked input, consistency check,
// unmask), with their aborts: a party stops when fewer than the threshold t remain at a stage.
//
// Each stage's message is taken once, in its stage: a second one or one out of order is refused
// by name (OutOfOrder), so that a replayed stage changes nothing. A device's messages concern only
// its neighbourhood (O(k) per device, k = O(log n)): at stage 2 its neighbours' identities come
// with their keys; at the consistency check each survivor signs its view, the survivors among
// itself and its neighbours, and reveals shares only for that view, with at least t of its
// surviving neighbours' signed views that agree with it wherever they overlap
// (docs/secure_aggregation.md, "The consistency check in the sparse graph").
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "federated/secure_aggregation.h"

namespace tn::federated::secagg {

using Envelopes = std::map<DeviceIndex, std::vector<uint8_t>>;  // by recipient, or by sender

// A survivor's view at the consistency check (the survivors among itself and its neighbours,
// ascending) with its signature of it (sign_survivors).
struct SignedView {
  std::vector<DeviceIndex> survivors;
  Signature signature{};
};
using SignedViews = std::map<DeviceIndex, SignedView>;  // by signer

// One device's round: `sign` signs with its registered identity; `identities` are registered
// identity keys by index (assumed authentic: the registry is not protected by secure
// aggregation), of any devices of the round: those of its neighbours may also come at stage 2.
class DeviceSession {
 public:
  DeviceSession(std::string round_id, DeviceIndex me, Signer sign, std::map<DeviceIndex, Bytes32> identities,
                uint32_t threshold, unsigned bits);

  // Stage 1: this device's signed round keys.
  KeyAdvertisement advertise_keys();
  // Stage 2: its neighbours' advertisements as relayed (each checked against the neighbour's
  // identity, from `identities` or the constructor's: a substituted key is refused, BadSignature);
  // the shares of its self-mask seed and mask secret, sealed per neighbour. Refuses
  // (BelowThreshold) fewer than t neighbours, and an identity given twice that differs.
  Envelopes share_keys(const std::map<DeviceIndex, KeyAdvertisement>& neighbours,
                       const std::map<DeviceIndex, Bytes32>& identities = {});
  // Stage 3: the envelopes its neighbours sealed for it (by sender), opened and kept; `input`
  // masked with its self mask and the pairwise masks of those senders. Refuses (BelowThreshold)
  // fewer than t senders, and a sender that did not advertise to it (BadEnvelope).
  std::vector<uint32_t> masked_input(const Envelopes& received, const std::vector<uint32_t>& input);
  // Stage 4: its signature of its view, the survivors among itself and its neighbours, as the
  // coordinator shows it. Refuses (Parameter) a view that is not strictly ascending, does not hold
  // this device or holds a device that did not share its keys with it.
  Signature consistency_check(const std::vector<DeviceIndex>& view);
  // Stage 5: the shares the coordinator asks for (its view as survivors, its dropped neighbours),
  // with its surviving neighbours' signed views. Refuses survivors other than the view it signed
  // and dropped devices that are not neighbours outside it (Parameter); a signed view of a device
  // outside its view, one that does not verify, lacks this device or its signer, or disagrees
  // with this device's view about a neighbour of both, and fewer than t of them (BadSignature);
  // and a request that lists one device among both survivors and dropped (BothSharesRequested).
  std::vector<RevealedShare> unmask(const UnmaskRequest& request, const SignedViews& signatures);

 private:
  enum class Stage { AdvertiseKeys, ShareKeys, MaskedInput, ConsistencyCheck, Unmask, Done };
  void enter(Stage expected, const char* what);
  void check_signed_view(DeviceIndex signer, const SignedView& view, const UnmaskRequest& request) const;

  std::string round_id_;
  DeviceIndex me_;
  Signer sign_;
  std::map<DeviceIndex, Bytes32> identities_;
  uint32_t threshold_;
  unsigned bits_;
  RoundSecrets secrets_ = RoundSecrets::generate();
  Stage stage_ = Stage::AdvertiseKeys;
  std::map<DeviceIndex, KeyAdvertisement> neighbours_;  // those that advertised
  std::map<DeviceIndex, HeldShares> held_;              // from those that shared
  std::vector<DeviceIndex> signed_survivors_;
};

// The coordinator's round over devices 0..n-1 (their identity keys by index), a random Harary
// graph of the given degree from `graph_seed`, masked inputs of `words` words modulo 2^bits.
// Each close_* ends a stage and refuses (BelowThreshold, naming the stage) to go on with fewer
// than t devices left: the round is then abandoned.
class CoordinatorSession {
 public:
  CoordinatorSession(std::string round_id, std::vector<Bytes32> identities, const GraphParameters& graph,
                     const Bytes32& graph_seed, unsigned bits, size_t words);

  const NeighbourGraph& graph() const { return graph_; }
  const Bytes32& identity(DeviceIndex d) const { return identities_.at(d); }

  // Stage 1. Refuses a device outside the round, a bad signature (BadSignature) and a second
  // advertisement or one after the stage (OutOfOrder).
  void receive_advertisement(const KeyAdvertisement& advertisement);
  void close_advertising();
  // What device `d` gets for stage 2: its neighbours' advertisements, of those that advertised.
  std::map<DeviceIndex, KeyAdvertisement> keys_for(DeviceIndex d) const;

  // Stage 2: `sender`'s envelopes by recipient, exactly one for each neighbour that advertised.
  void receive_shares(DeviceIndex sender, Envelopes envelopes);
  void close_sharing();
  // What device `d` gets for stage 3: the envelopes sealed for it, by sender.
  Envelopes envelopes_for(DeviceIndex d) const;

  // Stage 3: a masked input of a device that shared its keys, added to the sum (a vector of the
  // wrong length or with a word not below 2^bits is refused and the sum left as it was).
  void receive_masked_input(DeviceIndex sender, const std::vector<uint32_t>& masked);
  // Stage 3, summed by a transport (the hub's reduce of the data plane): the masked inputs of
  // `senders`, each a device that shared its keys and has not masked yet, summed modulo 2^32 (any
  // multiple of 2^bits: it is reduced modulo 2^bits here). Refuses (naming the first device at
  // fault, or the sum's length) an empty set, a device that did not share, one that masked
  // already and a sum of the wrong length, leaving the sum as it was: the transport must know
  // exactly whose words it added, since unmasking removes exactly their self masks.
  void receive_masked_sum(const std::set<DeviceIndex>& senders, std::vector<uint32_t> sum);
  // Ends stage 3: the round's outcome (every survivor, every device dropped after sharing), which
  // no device is sent whole: each gets its part of it (view_of, request_for).
  UnmaskRequest close_masking();
  // What device `d` signs at stage 4: the survivors among itself and its neighbours, ascending.
  std::vector<DeviceIndex> view_of(DeviceIndex d) const;
  // What device `d` is asked at stage 5: its view as survivors, its dropped neighbours as dropped.
  UnmaskRequest request_for(DeviceIndex d) const;

  // Stage 4: a survivor's signature of its view (BadSignature when it does not verify).
  void receive_survivors_signature(DeviceIndex sender, const Signature& signature);
  // Ends stage 4.
  void close_consistency_check();
  // What device `d` gets with its unmask request: the signed views of its neighbours that signed.
  SignedViews signatures_for(DeviceIndex d) const;

  // Stage 5: a signer's revealed shares, each of a neighbour of its and of the kind requested.
  void receive_unmask_response(DeviceIndex sender, const std::vector<RevealedShare>& shares);
  // The sum of the survivors' inputs modulo 2^bits. Refuses a device with fewer than t shares
  // revealed (BelowThreshold, from reconstruct_secrets).
  std::vector<uint32_t> close_unmasking();
  // The devices whose inputs the sum holds (ascending), once masking has closed.
  const std::vector<DeviceIndex>& survivors() const { return request_.survivors; }

 private:
  enum class Stage { AdvertiseKeys, ShareKeys, MaskedInput, ConsistencyCheck, Unmask, Done };
  void require(Stage expected, DeviceIndex sender, const char* what) const;
  void close(Stage stage, size_t remaining, const char* what);

  std::string round_id_;
  std::vector<Bytes32> identities_;
  uint32_t threshold_;
  NeighbourGraph graph_;
  unsigned bits_;
  Stage stage_ = Stage::AdvertiseKeys;
  std::map<DeviceIndex, KeyAdvertisement> advertised_;
  std::map<DeviceIndex, Envelopes> shared_;  // by sender, by recipient
  std::set<DeviceIndex> masked_;
  std::vector<uint32_t> sum_;
  UnmaskRequest request_;
  SignedViews signatures_;
  std::map<DeviceIndex, std::vector<RevealedShare>> revealed_;
};

}  // namespace tn::federated::secagg
