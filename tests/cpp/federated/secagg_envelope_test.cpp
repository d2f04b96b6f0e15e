// Shares between devices: an envelope opens only for its recipient, from its sender, in its round.
#include <gtest/gtest.h>

#include "secagg_test_util.h"

namespace tn::federated::secagg {
namespace {

using Reason = SecAggRefused::Reason;

struct Pair {
  RoundSecrets sender = RoundSecrets::generate(), recipient = RoundSecrets::generate();
  IdentityKeys identity = IdentityKeys::generate();
  Bytes32 sender_key = sender.advertise(0, "r", identity).channel_key;
  Bytes32 recipient_key = recipient.advertise(1, "r", identity).channel_key;
  // Device 0 deals device 1 (holder point 2) its shares.
  HeldShares shares{shamir_split(random_secret(), 2, {2, 3})[0], shamir_split(random_secret(), 2, {2, 3})[0]};

  std::vector<uint8_t> seal(std::string_view round = "r") const {
    return seal_shares(shares, sender.channel_secret, 0, recipient_key, 1, round);
  }
  HeldShares open(const std::vector<uint8_t>& envelope, std::string_view round = "r",
                  DeviceIndex from = 0) const {
    return open_shares(envelope, recipient.channel_secret, 1, sender_key, from, round);
  }
};

TEST(SecAggEnvelope, SealedSharesOpenForTheirRecipient) {
  Pair pair;
  HeldShares opened = pair.open(pair.seal());
  EXPECT_EQ(opened.self_mask_seed.x, 2u);
  EXPECT_EQ(opened.self_mask_seed.y, pair.shares.self_mask_seed.y);
  EXPECT_EQ(opened.mask_secret.y, pair.shares.mask_secret.y);
}

TEST(SecAggEnvelope, AlteredRedirectedOrReplayedEnvelopeRefusedByName) {
  Pair pair;
  std::vector<uint8_t> envelope = pair.seal();
  std::vector<uint8_t> altered = envelope;
  altered[40] ^= 0x01;
  Refusal refusal = refusal_of([&] { pair.open(altered); });
  EXPECT_EQ(refusal.reason, Reason::BadEnvelope);
  EXPECT_NE(refusal.message.find("the shares device 0 sent device 1 do not authenticate for round 'r'"),
            std::string::npos)
      << refusal.message;
  EXPECT_EQ(refusal_of([&] { pair.open(pair.seal("r2")); }).reason, Reason::BadEnvelope);
  EXPECT_EQ(refusal_of([&] { pair.open(envelope, "r2"); }).reason, Reason::BadEnvelope);
  EXPECT_EQ(refusal_of([&] { pair.open(envelope, "r", 5); }).reason, Reason::BadEnvelope);
  RoundSecrets bystander = RoundSecrets::generate();
  EXPECT_EQ(
      refusal_of([&] { open_shares(envelope, bystander.channel_secret, 1, pair.sender_key, 0, "r"); }).reason,
      Reason::BadEnvelope);
  std::vector<uint8_t> truncated(envelope.begin(), envelope.begin() + 20);
  EXPECT_NE(refusal_of([&] { pair.open(truncated); }).message.find("are truncated"), std::string::npos);
}

TEST(SecAggEnvelope, SharesDealtAtAnotherPointRefusedByName) {
  Pair pair;
  pair.shares.mask_secret.x = 3;  // device 2's point, sent to device 1
  Refusal refusal = refusal_of([&] { pair.open(pair.seal()); });
  EXPECT_EQ(refusal.reason, Reason::BadEnvelope);
  EXPECT_NE(refusal.message.find("were dealt at another holder's point"), std::string::npos)
      << refusal.message;
}

}  // namespace
}  // namespace tn::federated::secagg
