// The ChaCha20 keystream that masks and the neighbour graph's order are drawn from
// (secagg_internal.h).
#include <cstring>
#include <limits>

#include "secagg_internal.h"

namespace tn::federated::secagg::detail {

KeyStream::KeyStream(const Bytes32& key) : key_(key) { require_sodium(); }

KeyStream::~KeyStream() {
  sodium_memzero(key_.data(), key_.size());
  sodium_memzero(buffer_.data(), buffer_.size());
}

void KeyStream::refill() {
  // The IETF variant's block counter is 32 bits: past 2^32 blocks (256 GiB) the stream would
  // repeat, which a mask must never do.
  if (next_block_ + kBlocksPerRefill > (uint64_t{1} << 32))
    throw SecAggRefused(SecAggRefused::Reason::Parameter,
                        "secure aggregation: a mask longer than ChaCha20's 256 GiB keystream");
  static constexpr std::array<uint8_t, crypto_stream_chacha20_ietf_NONCEBYTES> kZeroNonce{};
  std::memset(buffer_.data(), 0, buffer_.size());
  crypto_stream_chacha20_ietf_xor_ic(buffer_.data(), buffer_.data(), buffer_.size(), kZeroNonce.data(),
                                     static_cast<uint32_t>(next_block_), key_.data());
  next_block_ += kBlocksPerRefill;
  position_ = 0;
}

uint32_t KeyStream::next_word() {
  if (position_ == buffer_.size()) refill();
  const uint8_t* bytes = buffer_.data() + position_;
  position_ += 4;
  return uint32_t{bytes[0]} | uint32_t{bytes[1]} << 8 | uint32_t{bytes[2]} << 16 | uint32_t{bytes[3]} << 24;
}

uint32_t KeyStream::uniform_below(uint32_t bound) {
  // Accept only words below the largest multiple of `bound` that fits in 32 bits.
  const uint64_t range = uint64_t{std::numeric_limits<uint32_t>::max()} + 1;
  const uint64_t accepted = range - range % bound;
  for (;;) {
    uint32_t word = next_word();
    if (word < accepted) return word % bound;
  }
}

}  // namespace tn::federated::secagg::detail
