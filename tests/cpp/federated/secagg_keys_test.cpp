// Per-round keys: an advertisement verifies only under its device's identity, round and index;
// pairwise seeds agree between the two ends and differ across pairs and rounds.
#include <gtest/gtest.h>

#include "secagg_test_util.h"

namespace tn::federated::secagg {
namespace {

using Reason = SecAggRefused::Reason;

struct Device {
  IdentityKeys identity = IdentityKeys::generate();
  RoundSecrets secrets = RoundSecrets::generate();
};

TEST(SecAggKeys, AdvertisementVerifiesUnderItsIdentity) {
  Device device;
  KeyAdvertisement advertisement = device.secrets.advertise(3, "task-1/7", device.identity);
  EXPECT_EQ(advertisement.device, 3u);
  verify_advertisement(advertisement, "task-1/7", device.identity.public_key);
}

TEST(SecAggKeys, ForgedOrReplayedAdvertisementRefusedByName) {
  Device device, coordinator;
  KeyAdvertisement genuine = device.secrets.advertise(3, "task-1/7", device.identity);
  KeyAdvertisement substituted = genuine;
  substituted.mask_key = coordinator.secrets.advertise(3, "task-1/7", coordinator.identity).mask_key;
  Refusal refusal =
      refusal_of([&] { verify_advertisement(substituted, "task-1/7", device.identity.public_key); });
  EXPECT_EQ(refusal.reason, Reason::BadSignature);
  EXPECT_NE(refusal.message.find("device 3 for round 'task-1/7'"), std::string::npos) << refusal.message;

  KeyAdvertisement resigned = coordinator.secrets.advertise(3, "task-1/7", coordinator.identity);
  EXPECT_EQ(
      refusal_of([&] { verify_advertisement(resigned, "task-1/7", device.identity.public_key); }).reason,
      Reason::BadSignature);
  EXPECT_EQ(refusal_of([&] { verify_advertisement(genuine, "task-1/8", device.identity.public_key); }).reason,
            Reason::BadSignature);
  KeyAdvertisement moved = genuine;
  moved.device = 4;
  EXPECT_EQ(refusal_of([&] { verify_advertisement(moved, "task-1/7", device.identity.public_key); }).reason,
            Reason::BadSignature);
  KeyAdvertisement flipped = genuine;
  flipped.signature[10] ^= 0x01;
  EXPECT_EQ(refusal_of([&] { verify_advertisement(flipped, "task-1/7", device.identity.public_key); }).reason,
            Reason::BadSignature);
}

TEST(SecAggKeys, PairwiseSeedsAgreeAndAreBoundToPairAndRound) {
  Device a, b, c;
  KeyAdvertisement ad_a = a.secrets.advertise(0, "r", a.identity);
  KeyAdvertisement ad_b = b.secrets.advertise(1, "r", b.identity);
  KeyAdvertisement ad_c = c.secrets.advertise(2, "r", c.identity);
  Bytes32 ab = pairwise_seed(a.secrets.mask_secret, 0, ad_b.mask_key, 1, "r");
  EXPECT_EQ(ab, pairwise_seed(b.secrets.mask_secret, 1, ad_a.mask_key, 0, "r"));
  EXPECT_NE(ab, pairwise_seed(a.secrets.mask_secret, 0, ad_b.mask_key, 1, "r2"));
  EXPECT_NE(ab, pairwise_seed(a.secrets.mask_secret, 0, ad_c.mask_key, 2, "r"));
  EXPECT_NE(ab, pairwise_seed(a.secrets.mask_secret, 0, ad_b.mask_key, 5, "r"));
}

TEST(SecAggKeys, SmallOrderKeyAndSelfPairRefused) {
  Device a;
  Bytes32 identity_point{};  // the all-zero point has order 1: every shared secret would be zero
  Refusal refusal = refusal_of([&] { pairwise_seed(a.secrets.mask_secret, 0, identity_point, 9, "r"); });
  EXPECT_EQ(refusal.reason, Reason::BadKey);
  EXPECT_NE(refusal.message.find("device 9"), std::string::npos) << refusal.message;
  Bytes32 own_key = a.secrets.advertise(0, "r", a.identity).mask_key;
  EXPECT_EQ(refusal_of([&] { pairwise_seed(a.secrets.mask_secret, 0, own_key, 0, "r"); }).reason,
            Reason::Parameter);
}

}  // namespace
}  // namespace tn::federated::secagg
