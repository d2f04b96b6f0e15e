#include <algorithm>
#include <utility>

#include "federated/secure_session.h"

namespace tn::federated::secagg {

namespace {

using Reason = SecAggRefused::Reason;

const char* const kStageNames[] = {"advertise keys",    "share keys", "masked input",
                                   "consistency check", "unmask",     "done"};

template <typename Stage>
const char* name_of(Stage stage) {
  return kStageNames[static_cast<int>(stage)];
}

std::string listed(const std::set<DeviceIndex>& devices) {
  std::string out = "{";
  for (DeviceIndex device : devices) out += (out.size() > 1 ? ", " : "") + std::to_string(device);
  return out + "}";
}

template <typename Map>
std::set<DeviceIndex> keys_of(const Map& map) {
  std::set<DeviceIndex> keys;
  for (const auto& [key, value] : map) keys.insert(key);
  return keys;
}

}  // namespace

DeviceSession::DeviceSession(std::string round_id, DeviceIndex me, Signer sign,
                             std::map<DeviceIndex, Bytes32> identities, uint32_t threshold, unsigned bits)
    : round_id_(std::move(round_id)),
      me_(me),
      sign_(std::move(sign)),
      identities_(std::move(identities)),
      threshold_(threshold),
      bits_(bits) {}

// A stage is entered once: the next stage is set before its work, so that a refused stage ends
// the device's round and a repeated one (a replay) is refused.
void DeviceSession::enter(Stage expected, const char* what) {
  if (stage_ != expected)
    throw SecAggRefused(Reason::OutOfOrder, "secure aggregation: device " + std::to_string(me_) +
                                                " of round " + round_id_ + " was asked for " + what +
                                                " at stage " + name_of(stage_) +
                                                ": a stage out of order or replayed");
  stage_ = expected == Stage::Unmask ? Stage::Done : static_cast<Stage>(static_cast<int>(expected) + 1);
}

KeyAdvertisement DeviceSession::advertise_keys() {
  enter(Stage::AdvertiseKeys, "its keys");
  return secrets_.advertise(me_, round_id_, sign_);
}

Envelopes DeviceSession::share_keys(const std::map<DeviceIndex, KeyAdvertisement>& neighbours,
                                    const std::map<DeviceIndex, Bytes32>& identities) {
  enter(Stage::ShareKeys, "its shares");
  for (const auto& [peer, key] : identities)
    if (const auto [known, added] = identities_.emplace(peer, key); !added && known->second != key)
      throw SecAggRefused(Reason::Parameter, "secure aggregation: device " + std::to_string(me_) +
                                                 " was given an identity of device " + std::to_string(peer) +
                                                 " other than the one it holds, in round " + round_id_);
  std::vector<uint32_t> points;
  for (const auto& [peer, advertisement] : neighbours) {
    const auto identity = identities_.find(peer);
    if (peer == me_ || advertisement.device != peer || identity == identities_.end())
      throw SecAggRefused(Reason::Parameter, "secure aggregation: device " + std::to_string(me_) +
                                                 " was given keys of device " + std::to_string(peer) +
                                                 ", which is not another device of round " + round_id_);
    verify_advertisement(advertisement, round_id_, identity->second);
    points.push_back(peer + 1);
  }
  if (neighbours.size() < threshold_)
    throw SecAggRefused(Reason::BelowThreshold, "secure aggregation: device " + std::to_string(me_) +
                                                    " has " + std::to_string(neighbours.size()) +
                                                    " neighbours left, below the threshold " +
                                                    std::to_string(threshold_));
  const std::vector<Share> self = shamir_split(secrets_.self_mask_seed, threshold_, points);
  const std::vector<Share> mask = shamir_split(secrets_.mask_secret, threshold_, points);
  Envelopes sealed;
  size_t i = 0;  // the shares are in the points' order, the neighbours'
  for (const auto& [peer, advertisement] : neighbours) {
    sealed[peer] = seal_shares({self[i], mask[i]}, secrets_.channel_secret, me_, advertisement.channel_key,
                               peer, round_id_);
    ++i;
  }
  neighbours_ = neighbours;
  return sealed;
}

std::vector<uint32_t> DeviceSession::masked_input(const Envelopes& received,
                                                  const std::vector<uint32_t>& input) {
  enter(Stage::MaskedInput, "its masked input");
  for (const auto& [sender, envelope] : received) {
    const auto neighbour = neighbours_.find(sender);
    if (neighbour == neighbours_.end())
      throw SecAggRefused(Reason::BadEnvelope, "secure aggregation: device " + std::to_string(me_) +
                                                   " was given shares from device " + std::to_string(sender) +
                                                   ", which did not advertise keys to it");
    held_[sender] =
        open_shares(envelope, secrets_.channel_secret, me_, neighbour->second.channel_key, sender, round_id_);
  }
  if (held_.size() < threshold_)
    throw SecAggRefused(Reason::BelowThreshold, "secure aggregation: device " + std::to_string(me_) +
                                                    " received shares from " + std::to_string(held_.size()) +
                                                    " neighbours, below the threshold " +
                                                    std::to_string(threshold_));
  // Masked with exactly the neighbours that shared: they are the ones whose secrets the
  // coordinator can recover should they drop out now.
  std::map<DeviceIndex, Bytes32> seeds;
  for (const auto& [sender, shares] : held_)
    seeds[sender] =
        pairwise_seed(secrets_.mask_secret, me_, neighbours_.at(sender).mask_key, sender, round_id_);
  return mask_input(input, bits_, secrets_.self_mask_seed, me_, seeds);
}

Signature DeviceSession::consistency_check(const std::vector<DeviceIndex>& view) {
  enter(Stage::ConsistencyCheck, "its signature of the survivors");
  const std::string device = "secure aggregation: device " + std::to_string(me_) + " of round " + round_id_;
  if (!std::ranges::is_sorted(view) || std::ranges::adjacent_find(view) != view.end())
    throw SecAggRefused(Reason::Parameter, device + " was shown survivors not strictly ascending");
  if (!std::ranges::binary_search(view, me_))
    throw SecAggRefused(Reason::Parameter, device + " sent its masked input but is not among the survivors");
  // Only its neighbours that shared their keys with it can have masked with it: anything else in
  // its view is not the coordinator's to show it.
  for (DeviceIndex peer : view)
    if (peer != me_ && !held_.contains(peer))
      throw SecAggRefused(Reason::Parameter,
                          device + " was shown device " + std::to_string(peer) +
                              " as a survivor, which is not a neighbour that shared with it");
  signed_survivors_ = view;
  return sign_survivors(sign_, me_, round_id_, view);
}

// A neighbour's signed view: by a surviving neighbour, verified under its identity, holding both
// ends, and agreeing with this device's view about every neighbour of this device it names (a
// device this one was told dropped, or not shown, cannot be a survivor in its neighbour's view).
void DeviceSession::check_signed_view(DeviceIndex signer, const SignedView& view,
                                      const UnmaskRequest& request) const {
  const std::string device = "secure aggregation: device " + std::to_string(me_) + " of round " + round_id_;
  const std::string of = device + " was given a signed view of device " + std::to_string(signer);
  if (signer == me_ || !std::ranges::binary_search(signed_survivors_, signer))
    throw SecAggRefused(Reason::BadSignature, of + ", which is not a surviving neighbour of it");
  verify_survivors(view.signature, signer, round_id_, view.survivors, identities_.at(signer));
  const auto& survivors = view.survivors;
  if (!std::ranges::is_sorted(survivors) || !std::ranges::binary_search(survivors, me_) ||
      !std::ranges::binary_search(survivors, signer))
    throw SecAggRefused(Reason::BadSignature, of + " that is not ascending or lacks one of the two");
  for (DeviceIndex peer : survivors)
    if (peer != me_ && neighbours_.contains(peer) && !std::ranges::binary_search(request.survivors, peer))
      throw SecAggRefused(Reason::BadSignature, of + " holding device " + std::to_string(peer) +
                                                    " as a survivor, which its own view does not");
}

std::vector<RevealedShare> DeviceSession::unmask(const UnmaskRequest& request,
                                                 const SignedViews& signatures) {
  enter(Stage::Unmask, "its shares to unmask");
  const std::string device = "secure aggregation: device " + std::to_string(me_) + " of round " + round_id_;
  if (request.survivors != signed_survivors_)
    throw SecAggRefused(Reason::Parameter,
                        device + " was asked to unmask survivors other than those it signed");
  for (DeviceIndex peer : request.dropped)
    if (!held_.contains(peer))
      throw SecAggRefused(Reason::Parameter, device + " was asked to unmask dropped device " +
                                                 std::to_string(peer) + ", which did not share with it");
  if (signatures.size() < threshold_)
    throw SecAggRefused(Reason::BadSignature, device + " was given " + std::to_string(signatures.size()) +
                                                  " signed views of its neighbours, below the threshold " +
                                                  std::to_string(threshold_));
  for (const auto& [signer, view] : signatures) check_signed_view(signer, view, request);
  return answer_unmask_request(held_, request);
}

CoordinatorSession::CoordinatorSession(std::string round_id, std::vector<Bytes32> identities,
                                       const GraphParameters& graph, const Bytes32& graph_seed, unsigned bits,
                                       size_t words)
    : round_id_(std::move(round_id)),
      identities_(std::move(identities)),
      threshold_(graph.threshold),
      graph_(
          NeighbourGraph::random_harary(static_cast<uint32_t>(identities_.size()), graph.degree, graph_seed)),
      bits_(bits),
      sum_(words, 0) {}

void CoordinatorSession::require(Stage expected, DeviceIndex sender, const char* what) const {
  if (sender >= identities_.size())
    throw SecAggRefused(Reason::Parameter, "secure aggregation: device " + std::to_string(sender) +
                                               " is not in round " + round_id_);
  if (stage_ != expected)
    throw SecAggRefused(Reason::OutOfOrder, "secure aggregation: device " + std::to_string(sender) + "'s " +
                                                what + " came at stage " + name_of(stage_) + " of round " +
                                                round_id_);
}

void CoordinatorSession::close(Stage stage, size_t remaining, const char* what) {
  if (stage_ != stage)
    throw SecAggRefused(Reason::OutOfOrder, std::string("secure aggregation: closing stage ") +
                                                name_of(stage) + " at stage " + name_of(stage_) +
                                                " of round " + round_id_);
  if (remaining < threshold_) {
    stage_ = Stage::Done;
    throw SecAggRefused(Reason::BelowThreshold, "secure aggregation: round " + round_id_ + ": " +
                                                    std::to_string(remaining) + " devices " + what +
                                                    ", below the threshold " + std::to_string(threshold_) +
                                                    ": the round is abandoned");
  }
  stage_ = stage == Stage::Unmask ? Stage::Done : static_cast<Stage>(static_cast<int>(stage) + 1);
}

void CoordinatorSession::receive_advertisement(const KeyAdvertisement& advertisement) {
  const DeviceIndex device = advertisement.device;
  require(Stage::AdvertiseKeys, device, "advertisement");
  if (advertised_.contains(device))
    throw SecAggRefused(Reason::OutOfOrder, "secure aggregation: device " + std::to_string(device) +
                                                " advertised its keys a second time in round " + round_id_);
  verify_advertisement(advertisement, round_id_, identities_[device]);
  advertised_[device] = advertisement;
}

void CoordinatorSession::close_advertising() {
  close(Stage::AdvertiseKeys, advertised_.size(), "advertised their keys");
}

std::map<DeviceIndex, KeyAdvertisement> CoordinatorSession::keys_for(DeviceIndex d) const {
  std::map<DeviceIndex, KeyAdvertisement> keys;
  for (DeviceIndex peer : graph_.neighbours(d))
    if (const auto found = advertised_.find(peer); found != advertised_.end()) keys[peer] = found->second;
  return keys;
}

void CoordinatorSession::receive_shares(DeviceIndex sender, Envelopes envelopes) {
  require(Stage::ShareKeys, sender, "shares");
  if (!advertised_.contains(sender))
    throw SecAggRefused(Reason::Parameter, "secure aggregation: device " + std::to_string(sender) +
                                               " sent shares without advertising its keys in round " +
                                               round_id_);
  if (shared_.contains(sender))
    throw SecAggRefused(Reason::OutOfOrder, "secure aggregation: device " + std::to_string(sender) +
                                                " sent its shares a second time in round " + round_id_);
  const std::set<DeviceIndex> expected = keys_of(keys_for(sender)), given = keys_of(envelopes);
  if (given != expected)
    throw SecAggRefused(Reason::Parameter, "secure aggregation: device " + std::to_string(sender) +
                                               " sealed shares for " + listed(given) +
                                               ", its neighbours that advertised are " + listed(expected));
  shared_[sender] = std::move(envelopes);
}

void CoordinatorSession::close_sharing() { close(Stage::ShareKeys, shared_.size(), "shared their keys"); }

Envelopes CoordinatorSession::envelopes_for(DeviceIndex d) const {
  Envelopes out;
  for (const auto& [sender, sealed] : shared_)
    if (const auto found = sealed.find(d); found != sealed.end()) out[sender] = found->second;
  return out;
}

void CoordinatorSession::receive_masked_input(DeviceIndex sender, const std::vector<uint32_t>& masked) {
  require(Stage::MaskedInput, sender, "masked input");
  if (!shared_.contains(sender))
    throw SecAggRefused(Reason::Parameter, "secure aggregation: device " + std::to_string(sender) +
                                               " sent a masked input without sharing its keys in round " +
                                               round_id_ + ": it could not be unmasked");
  if (masked_.contains(sender))
    throw SecAggRefused(Reason::OutOfOrder, "secure aggregation: device " + std::to_string(sender) +
                                                " sent its masked input a second time in round " + round_id_);
  try {
    add_modular(sum_, masked, bits_);
  } catch (const SecAggRefused& error) {
    throw SecAggRefused(error.reason,
                        "device " + std::to_string(sender) + "'s masked input: " + error.what());
  }
  masked_.insert(sender);
}

void CoordinatorSession::receive_masked_sum(const std::set<DeviceIndex>& senders, std::vector<uint32_t> sum) {
  if (senders.empty())
    throw SecAggRefused(Reason::Parameter,
                        "secure aggregation: a masked sum of no device in round " + round_id_);
  for (DeviceIndex sender : senders) {
    require(Stage::MaskedInput, sender, "masked input");
    if (!shared_.contains(sender))
      throw SecAggRefused(Reason::Parameter,
                          "secure aggregation: device " + std::to_string(sender) +
                              "'s masked input is in a sum, without its keys shared in round " + round_id_ +
                              ": it could not be unmasked");
    if (masked_.contains(sender))
      throw SecAggRefused(Reason::OutOfOrder,
                          "secure aggregation: device " + std::to_string(sender) +
                              "'s masked input is in a sum, after it masked already in round " + round_id_);
  }
  const uint32_t modulus_mask = bits_ == 32 ? ~uint32_t{0} : (uint32_t{1} << bits_) - 1;
  for (uint32_t& word : sum) word &= modulus_mask;
  try {
    add_modular(sum_, sum, bits_);
  } catch (const SecAggRefused& error) {
    throw SecAggRefused(error.reason, "the masked sum of devices " + listed(senders) + ": " + error.what());
  }
  masked_.insert(senders.begin(), senders.end());
}

UnmaskRequest CoordinatorSession::close_masking() {
  close(Stage::MaskedInput, masked_.size(), "sent their masked input");
  request_.survivors.assign(masked_.begin(), masked_.end());
  for (const auto& [sender, sealed] : shared_)
    if (!masked_.contains(sender)) request_.dropped.push_back(sender);
  return request_;
}

std::vector<DeviceIndex> CoordinatorSession::view_of(DeviceIndex d) const {
  std::vector<DeviceIndex> view;
  for (DeviceIndex peer : graph_.neighbours(d))
    if (masked_.contains(peer)) view.push_back(peer);
  if (masked_.contains(d)) view.insert(std::ranges::upper_bound(view, d), d);
  return view;
}

UnmaskRequest CoordinatorSession::request_for(DeviceIndex d) const {
  UnmaskRequest request{view_of(d), {}};
  for (DeviceIndex peer : graph_.neighbours(d))
    if (std::ranges::binary_search(request_.dropped, peer)) request.dropped.push_back(peer);
  return request;
}

void CoordinatorSession::receive_survivors_signature(DeviceIndex sender, const Signature& signature) {
  require(Stage::ConsistencyCheck, sender, "signature of the survivors");
  if (!masked_.contains(sender))
    throw SecAggRefused(Reason::Parameter, "secure aggregation: device " + std::to_string(sender) +
                                               " is not a survivor of round " + round_id_);
  if (signatures_.contains(sender))
    throw SecAggRefused(Reason::OutOfOrder, "secure aggregation: device " + std::to_string(sender) +
                                                " signed the survivors a second time in round " + round_id_);
  std::vector<DeviceIndex> view = view_of(sender);
  verify_survivors(signature, sender, round_id_, view, identities_[sender]);
  signatures_[sender] = {std::move(view), signature};
}

void CoordinatorSession::close_consistency_check() {
  close(Stage::ConsistencyCheck, signatures_.size(), "signed the survivors");
}

SignedViews CoordinatorSession::signatures_for(DeviceIndex d) const {
  SignedViews out;
  for (DeviceIndex peer : graph_.neighbours(d))
    if (const auto found = signatures_.find(peer); found != signatures_.end()) out[peer] = found->second;
  return out;
}

void CoordinatorSession::receive_unmask_response(DeviceIndex sender,
                                                 const std::vector<RevealedShare>& shares) {
  require(Stage::Unmask, sender, "unmask response");
  if (!signatures_.contains(sender))
    throw SecAggRefused(Reason::Parameter, "secure aggregation: device " + std::to_string(sender) +
                                               " did not sign the survivors of round " + round_id_);
  if (revealed_.contains(sender))
    throw SecAggRefused(Reason::OutOfOrder, "secure aggregation: device " + std::to_string(sender) +
                                                " answered the unmask request a second time in round " +
                                                round_id_);
  const std::vector<DeviceIndex>& neighbours = graph_.neighbours(sender);
  for (const RevealedShare& revealed : shares) {
    const bool survivor = masked_.contains(revealed.owner);
    const ShareKind asked = survivor ? ShareKind::SelfMaskSeed : ShareKind::MaskSecret;
    const bool dropped = std::ranges::binary_search(request_.dropped, revealed.owner);
    if (!std::ranges::binary_search(neighbours, revealed.owner) || !(survivor || dropped) ||
        revealed.kind != asked || revealed.share.x != sender + 1)
      throw SecAggRefused(Reason::Parameter, "secure aggregation: device " + std::to_string(sender) +
                                                 " revealed a share of device " +
                                                 std::to_string(revealed.owner) +
                                                 " that was not asked of it in round " + round_id_);
  }
  revealed_[sender] = shares;
}

std::vector<uint32_t> CoordinatorSession::close_unmasking() {
  close(Stage::Unmask, revealed_.size(), "answered the unmask request");
  std::vector<RevealedShare> all;
  for (const auto& [sender, shares] : revealed_) all.insert(all.end(), shares.begin(), shares.end());
  const ReconstructedSecrets secrets = reconstruct_secrets(all, threshold_);
  std::map<DeviceIndex, Bytes32> mask_keys;
  for (const auto& [device, advertisement] : advertised_) mask_keys[device] = advertisement.mask_key;
  return unmask_sum(sum_, bits_, graph_, round_id_, mask_keys, request_, secrets);
}

}  // namespace tn::federated::secagg
