// Shamir sharing: any threshold-sized subset reconstructs, and every malformed, duplicate or
// insufficient set of shares is refused by name.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "secagg_test_util.h"

namespace tn::federated::secagg {
namespace {

using Reason = SecAggRefused::Reason;

std::vector<uint32_t> points(uint32_t count) {
  std::vector<uint32_t> xs(count);
  std::iota(xs.begin(), xs.end(), 1);
  return xs;
}

std::vector<Share> pick(const std::vector<Share>& shares, const std::vector<size_t>& which) {
  std::vector<Share> picked;
  for (size_t i : which) picked.push_back(shares[i]);
  return picked;
}

TEST(SecAggShamir, AnyThresholdSubsetReconstructs) {
  Bytes32 secret = random_secret();
  std::vector<Share> shares = shamir_split(secret, 4, points(10));
  EXPECT_EQ(shamir_combine(pick(shares, {0, 1, 2, 3}), 4), secret);
  EXPECT_EQ(shamir_combine(pick(shares, {9, 7, 5, 3}), 4), secret);
  EXPECT_EQ(shamir_combine(pick(shares, {2, 8, 4, 6, 0}), 4), secret);
  EXPECT_EQ(shamir_combine(shares, 4), secret);
}

TEST(SecAggShamir, ExtremeThresholdsAndSecrets) {
  for (uint8_t fill : {uint8_t{0}, uint8_t{0xff}}) {
    Bytes32 secret{};
    secret.fill(fill);
    EXPECT_EQ(shamir_combine(shamir_split(secret, 1, points(3)), 1), secret);
    EXPECT_EQ(shamir_combine(shamir_split(secret, 7, points(7)), 7), secret);
  }
}

TEST(SecAggShamir, SharesAreFreshlyRandom) {
  Bytes32 secret = random_secret();
  EXPECT_NE(shamir_split(secret, 3, points(5))[0].y, shamir_split(secret, 3, points(5))[0].y);
}

TEST(SecAggShamir, BelowThresholdRefusedByName) {
  std::vector<Share> shares = shamir_split(random_secret(), 4, points(10));
  Refusal refusal = refusal_of([&] { shamir_combine(pick(shares, {0, 1, 2}), 4); });
  EXPECT_EQ(refusal.reason, Reason::BelowThreshold);
  EXPECT_NE(refusal.message.find("3 shares are below the threshold 4"), std::string::npos) << refusal.message;
}

TEST(SecAggShamir, DuplicateHolderRefusedByName) {
  std::vector<Share> shares = shamir_split(random_secret(), 2, points(4));
  Refusal refusal = refusal_of([&] { shamir_combine(pick(shares, {1, 2, 1}), 2); });
  EXPECT_EQ(refusal.reason, Reason::DuplicateShare);
  EXPECT_NE(refusal.message.find("holder point 2"), std::string::npos) << refusal.message;
  EXPECT_EQ(refusal_of([&] { shamir_split(random_secret(), 2, {1, 2, 2}); }).reason, Reason::DuplicateShare);
}

TEST(SecAggShamir, ShareOffThePolynomialIsNamed) {
  std::vector<Share> shares = shamir_split(random_secret(), 3, points(5));
  shares[4].y[2] ^= 1;
  Refusal refusal = refusal_of([&] { shamir_combine(shares, 3); });
  EXPECT_EQ(refusal.reason, Reason::InconsistentShares);
  EXPECT_NE(refusal.message.find("holder point 5 disagrees"), std::string::npos) << refusal.message;
}

TEST(SecAggShamir, MalformedSharesAndParametersRefused) {
  std::vector<Share> shares = shamir_split(random_secret(), 2, points(3));
  std::vector<Share> short_share = shares;
  short_share[0].y.pop_back();
  EXPECT_EQ(refusal_of([&] { shamir_combine(short_share, 2); }).reason, Reason::InconsistentShares);
  std::vector<Share> out_of_field = shares;
  out_of_field[1].y[0] = ~uint64_t{0};
  EXPECT_EQ(refusal_of([&] { shamir_combine(out_of_field, 2); }).reason, Reason::InconsistentShares);
  EXPECT_EQ(refusal_of([&] { shamir_split(random_secret(), 0, points(3)); }).reason, Reason::Parameter);
  EXPECT_EQ(refusal_of([&] { shamir_split(random_secret(), 4, points(3)); }).reason, Reason::Parameter);
  EXPECT_EQ(refusal_of([&] { shamir_split(random_secret(), 2, {0, 1, 2}); }).reason, Reason::Parameter);
  EXPECT_EQ(refusal_of([&] { shamir_combine(shares, 0); }).reason, Reason::Parameter);
}

}  // namespace
}  // namespace tn::federated::secagg
