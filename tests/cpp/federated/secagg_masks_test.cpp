// Masks: the expansion is ChaCha20's keystream (RFC 8439's first test vector, and libsodium's
// one-shot stream across the refill boundary) reduced modulo 2^bits; pairwise masks cancel.
#include <gtest/gtest.h>

#include <vector>

#include "secagg_test_util.h"

namespace tn::federated::secagg {
namespace {

using Reason = SecAggRefused::Reason;

uint32_t low_bits(uint32_t word, unsigned bits) {
  return bits == 32 ? word : word & ((uint32_t{1} << bits) - 1);
}

TEST(SecAggMasks, ExpansionMatchesRfc8439TestVector) {
  // RFC 8439 appendix A.1, test vector #1: all-zero key and nonce, block counter 0.
  std::vector<uint32_t> words = expand_mask(Bytes32{}, 4, 32);
  EXPECT_EQ(words, (std::vector<uint32_t>{0xade0b876, 0x903df1a0, 0xe56a5d40, 0x28bd8653}));
}

TEST(SecAggMasks, ExpansionIsTheKeystreamModuloTwoToTheBits) {
  Bytes32 seed = random_secret();
  constexpr size_t kWords = 5000;  // past the 1024-word refill
  std::vector<uint8_t> stream(4 * kWords);
  std::array<uint8_t, crypto_stream_chacha20_ietf_NONCEBYTES> nonce{};
  crypto_stream_chacha20_ietf(stream.data(), stream.size(), nonce.data(), seed.data());
  for (unsigned bits : {32u, 20u, 1u}) {
    std::vector<uint32_t> mask = expand_mask(seed, kWords, bits);
    for (size_t i = 0; i < kWords; ++i) {
      const uint8_t* b = &stream[4 * i];
      uint32_t word = uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24;
      ASSERT_EQ(mask[i], low_bits(word, bits)) << "word " << i << " at " << bits << " bits";
    }
  }
}

TEST(SecAggMasks, PairwiseMasksCancelInTheSum) {
  constexpr unsigned kBits = 24;
  Bytes32 shared = random_secret(), self_a = random_secret(), self_b = random_secret();
  std::vector<uint32_t> a(300, 0xabcdef), b(300, 0x123456);
  std::vector<uint32_t> sum = mask_input(a, kBits, self_a, 4, {{9, shared}});
  add_modular(sum, mask_input(b, kBits, self_b, 9, {{4, shared}}), kBits);
  std::vector<uint32_t> self_masks = expand_mask(self_a, 300, kBits);
  add_modular(self_masks, expand_mask(self_b, 300, kBits), kBits);
  for (size_t i = 0; i < sum.size(); ++i)
    ASSERT_EQ((sum[i] - self_masks[i]) & 0xffffff, (a[i] + b[i]) & 0xffffff) << "word " << i;
}

TEST(SecAggMasks, RefusesWidthsInputsAndLengthsByName) {
  EXPECT_EQ(refusal_of([] { expand_mask(Bytes32{}, 1, 0); }).reason, Reason::Parameter);
  EXPECT_EQ(refusal_of([] { expand_mask(Bytes32{}, 1, 33); }).reason, Reason::Parameter);
  Refusal refusal = refusal_of([] { mask_input({1, 256}, 8, Bytes32{}, 0, {}); });
  EXPECT_EQ(refusal.reason, Reason::Parameter);
  EXPECT_NE(refusal.message.find("input word 1 is 256, not below 2^8"), std::string::npos) << refusal.message;
  EXPECT_EQ(refusal_of([] { mask_input({1}, 8, Bytes32{}, 2, {{2, Bytes32{}}}); }).reason, Reason::Parameter);
  std::vector<uint32_t> sum(3);
  EXPECT_EQ(refusal_of([&] { add_modular(sum, {1, 2}, 8); }).reason, Reason::Parameter);
  refusal = refusal_of([&] { add_modular(sum, {1, 2, 300}, 8); });
  EXPECT_EQ(refusal.reason, Reason::Parameter);
  EXPECT_NE(refusal.message.find("masked input word 2 is 300, not below 2^8"), std::string::npos)
      << refusal.message;
  EXPECT_EQ(sum, (std::vector<uint32_t>{0, 0, 0}));
}

}  // namespace
}  // namespace tn::federated::secagg
