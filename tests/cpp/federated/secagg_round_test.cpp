// SecAgg+ end to end in memory: n devices advertise signed keys, share their secrets with their
// neighbours in envelopes the coordinator relays and mask quantised inputs; some vanish after
// advertising, some after sharing and some after sending their masked input; the coordinator
// reconstructs what it may and recovers the survivors' sum bit for bit. No transport: messages are
// function calls, and the coordinator's choices are explicit.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "secagg_test_util.h"

namespace tn::federated::secagg {
namespace {

using Reason = SecAggRefused::Reason;

constexpr std::string_view kRoundId = "task-3/12";
constexpr size_t kLength = 1000;

struct RoundDevice {
  IdentityKeys identity = IdentityKeys::generate();
  RoundSecrets secrets = RoundSecrets::generate();
  std::vector<uint32_t> input;
  std::map<DeviceIndex, HeldShares> held;  // the shares its neighbours sent it
};

// Clipped to [-1, 1] and rounded to 2^levels_bits - 1 levels, so that a sum of `devices` inputs
// stays below 2^bits and the test's plain sum is the quantity a round would dequantise.
std::vector<uint32_t> quantised_input(std::mt19937& random, unsigned levels_bits) {
  std::uniform_real_distribution<double> update(-1.5, 1.5);
  double levels = std::exp2(levels_bits) - 1;
  std::vector<uint32_t> words;
  for (size_t i = 0; i < kLength; ++i) {
    double clipped = std::clamp(update(random), -1.0, 1.0);
    words.push_back(static_cast<uint32_t>(std::lround((clipped + 1) / 2 * levels)));
  }
  return words;
}

class SimulatedRound {
 public:
  SimulatedRound(uint32_t devices, const ThreatModel& threat, unsigned bits)
      : bits_(bits),
        parameters_(derive_graph_parameters(devices, threat)),
        graph_(NeighbourGraph::random_harary(devices, parameters_.degree, Bytes32{42})),
        devices_(devices) {
    std::mt19937 random(7);
    for (RoundDevice& device : devices_) device.input = quantised_input(random, bits - 8);
  }

  const GraphParameters& parameters() const { return parameters_; }
  const NeighbourGraph& graph() const { return graph_; }
  RoundDevice& device(DeviceIndex index) { return devices_[index]; }

  // Stage 1: every device signs its round keys.
  std::map<DeviceIndex, KeyAdvertisement> advertise() {
    std::map<DeviceIndex, KeyAdvertisement> advertised;
    for (DeviceIndex d = 0; d < devices_.size(); ++d)
      advertised[d] = devices_[d].secrets.advertise(d, kRoundId, devices_[d].identity);
    return advertised;
  }

  // Stage 2: each of the `dealers` checks its neighbours' keys against their registered
  // identities and deals shares of its self-mask seed and mask secret to them (holder point =
  // index + 1), each sealed for its recipient; the coordinator relays the envelopes and the
  // recipients still there (the dealers) open them.
  void share_keys(const std::map<DeviceIndex, KeyAdvertisement>& advertised,
                  const std::set<DeviceIndex>& dealers) {
    struct Envelope {
      DeviceIndex sender, recipient;
      std::vector<uint8_t> bytes;
    };
    std::vector<Envelope> relayed;
    for (DeviceIndex d : dealers) {
      std::vector<uint32_t> points;
      for (DeviceIndex peer : graph_.neighbours(d)) {
        verify_advertisement(advertised.at(peer), kRoundId, devices_[peer].identity.public_key);
        points.push_back(peer + 1);
      }
      const RoundSecrets& secrets = devices_[d].secrets;
      std::vector<Share> self = shamir_split(secrets.self_mask_seed, parameters_.threshold, points);
      std::vector<Share> secret = shamir_split(secrets.mask_secret, parameters_.threshold, points);
      for (size_t i = 0; i < points.size(); ++i) {
        DeviceIndex peer = points[i] - 1;
        relayed.push_back({d, peer,
                           seal_shares({self[i], secret[i]}, secrets.channel_secret, d,
                                       advertised.at(peer).channel_key, peer, kRoundId)});
      }
    }
    for (const Envelope& envelope : relayed)
      if (dealers.count(envelope.recipient))
        devices_[envelope.recipient].held[envelope.sender] = open_shares(
            envelope.bytes, devices_[envelope.recipient].secrets.channel_secret, envelope.recipient,
            advertised.at(envelope.sender).channel_key, envelope.sender, kRoundId);
  }

  // Stage 3: the devices in `senders` mask their inputs, pairwise with each neighbour whose shares
  // reached them (a neighbour gone before dealing is masked with by no one); the coordinator adds
  // them up.
  std::vector<uint32_t> masked_sum(const std::map<DeviceIndex, KeyAdvertisement>& advertised,
                                   const std::set<DeviceIndex>& senders) {
    std::vector<uint32_t> sum(kLength, 0);
    for (DeviceIndex d : senders) {
      std::map<DeviceIndex, Bytes32> seeds;
      for (const auto& [peer, shares] : devices_[d].held)
        seeds[peer] =
            pairwise_seed(devices_[d].secrets.mask_secret, d, advertised.at(peer).mask_key, peer, kRoundId);
      add_modular(sum, mask_input(devices_[d].input, bits_, devices_[d].secrets.self_mask_seed, d, seeds),
                  bits_);
    }
    return sum;
  }

  // Stage 4: the devices in `responders` answer the coordinator's request.
  std::vector<RevealedShare> answers(const UnmaskRequest& request, const std::set<DeviceIndex>& responders) {
    std::vector<RevealedShare> revealed;
    for (DeviceIndex d : responders)
      for (RevealedShare& share : answer_unmask_request(devices_[d].held, request)) revealed.push_back(share);
    return revealed;
  }

  std::vector<uint32_t> plain_sum(const std::set<DeviceIndex>& senders) const {
    std::vector<uint32_t> sum(kLength, 0);
    for (DeviceIndex d : senders) add_modular(sum, devices_[d].input, bits_);
    return sum;
  }

  unsigned bits() const { return bits_; }

 private:
  unsigned bits_;
  GraphParameters parameters_;
  NeighbourGraph graph_;
  std::vector<RoundDevice> devices_;
};

std::map<DeviceIndex, Bytes32> mask_keys_of(const std::map<DeviceIndex, KeyAdvertisement>& advertised) {
  std::map<DeviceIndex, Bytes32> keys;
  for (const auto& [device, advertisement] : advertised) keys[device] = advertisement.mask_key;
  return keys;
}

// 100 devices, 5% corrupt and 33% dropout tolerated: degree 28, threshold 6. 30% vanish: devices
// 7, 27, 47, ... (5) after advertising their keys, 1, 6, 11, ... (20) after sharing them, and 3,
// 23, 43, ... (5) after sending their masked input.
struct Outcome {
  std::set<DeviceIndex> dealers, senders, dropped, responders;
};

Outcome dropouts(uint32_t devices) {
  Outcome outcome;
  for (DeviceIndex d = 0; d < devices; ++d) {
    bool after_advertising = d % 20 == 7, after_sharing = d % 5 == 1, after_masking = d % 20 == 3;
    if (after_advertising) continue;
    outcome.dealers.insert(d);
    (after_sharing ? outcome.dropped : outcome.senders).insert(d);
    if (!after_sharing && !after_masking) outcome.responders.insert(d);
  }
  return outcome;
}

UnmaskRequest request_for(const Outcome& outcome) {
  return {{outcome.senders.begin(), outcome.senders.end()}, {outcome.dropped.begin(), outcome.dropped.end()}};
}

class SecAggRound : public testing::TestWithParam<unsigned> {};

TEST_P(SecAggRound, UnmaskedSumEqualsTheSurvivorsPlainSumBitForBit) {
  SimulatedRound round(100, {0.05, 0.33, 40, 20, false}, GetParam());
  ASSERT_EQ(round.parameters().degree, 28u);
  ASSERT_EQ(round.parameters().threshold, 6u);
  std::map<DeviceIndex, KeyAdvertisement> advertised = round.advertise();
  Outcome outcome = dropouts(100);
  round.share_keys(advertised, outcome.dealers);
  std::vector<uint32_t> masked = round.masked_sum(advertised, outcome.senders);
  std::vector<uint32_t> expected = round.plain_sum(outcome.senders);
  EXPECT_NE(masked, expected);
  UnmaskRequest request = request_for(outcome);
  ReconstructedSecrets secrets =
      reconstruct_secrets(round.answers(request, outcome.responders), round.parameters().threshold);
  EXPECT_EQ(secrets.self_mask_seeds.size(), 75u);
  EXPECT_EQ(secrets.mask_secrets.size(), 20u);
  std::vector<uint32_t> unmasked =
      unmask_sum(masked, round.bits(), round.graph(), kRoundId, mask_keys_of(advertised), request, secrets);
  EXPECT_EQ(unmasked, expected);
}

INSTANTIATE_TEST_SUITE_P(SecAggWidths, SecAggRound, testing::Values(32u, 20u));

TEST(SecAggRoundRefusals, BelowThresholdRefusedByName) {
  SimulatedRound round(100, {0.05, 0.33, 40, 20, false}, 32);
  std::map<DeviceIndex, KeyAdvertisement> advertised = round.advertise();
  Outcome outcome = dropouts(100);
  round.share_keys(advertised, outcome.dealers);
  // Only threshold - 1 of dropped device 1's neighbours answer.
  std::vector<RevealedShare> revealed;
  uint32_t answering = 0;
  for (const RevealedShare& share : round.answers(request_for(outcome), outcome.responders))
    if (share.owner != 1 ||
        (share.kind == ShareKind::MaskSecret && ++answering < round.parameters().threshold))
      revealed.push_back(share);
  Refusal refusal = refusal_of([&] { reconstruct_secrets(revealed, round.parameters().threshold); });
  EXPECT_EQ(refusal.reason, Reason::BelowThreshold);
  EXPECT_NE(refusal.message.find(
                "the mask secret of device 1: secure aggregation: 5 shares are below the threshold 6"),
            std::string::npos)
      << refusal.message;
}

TEST(SecAggRoundRefusals, BothSharesOfOneDeviceRefusedByName) {
  SimulatedRound round(100, {0.05, 0.33, 40, 20, false}, 32);
  Outcome outcome = dropouts(100);
  round.share_keys(round.advertise(), outcome.dealers);
  UnmaskRequest greedy = request_for(outcome);
  greedy.dropped.push_back(40);  // a survivor, whose mask secret would strip its input bare
  DeviceIndex holder = round.graph().neighbours(40).front();
  Refusal refusal = refusal_of([&] { answer_unmask_request(round.device(holder).held, greedy); });
  EXPECT_EQ(refusal.reason, Reason::BothSharesRequested);
  EXPECT_NE(refusal.message.find("device 40 were requested"), std::string::npos) << refusal.message;

  // The coordinator's own reconstruction refuses both kinds for one device too.
  const HeldShares& shares = round.device(holder).held.at(40);
  std::vector<RevealedShare> both = {{40, ShareKind::SelfMaskSeed, shares.self_mask_seed},
                                     {40, ShareKind::MaskSecret, shares.mask_secret}};
  EXPECT_EQ(refusal_of([&] { reconstruct_secrets(both, 1); }).reason, Reason::BothSharesRequested);
}

TEST(SecAggRoundRefusals, SubstitutedRoundKeyRefusedByName) {
  SimulatedRound round(100, {0.05, 0.33, 40, 20, false}, 32);
  std::map<DeviceIndex, KeyAdvertisement> advertised = round.advertise();
  // The coordinator swaps device 7's mask key for one whose secret it knows.
  advertised[7].mask_key = RoundSecrets::generate().advertise(7, kRoundId, IdentityKeys::generate()).mask_key;
  Refusal refusal = refusal_of([&] { round.share_keys(advertised, dropouts(100).dealers); });
  EXPECT_EQ(refusal.reason, Reason::BadSignature);
  EXPECT_NE(refusal.message.find("device 7 for round 'task-3/12'"), std::string::npos) << refusal.message;
}

}  // namespace
}  // namespace tn::federated::secagg
