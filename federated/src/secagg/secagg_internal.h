// What the SecAgg+ sources share and the public header does not show: libsodium's start-up, the
// ChaCha20 keystream that masks and the graph's random order are drawn from, and mask arithmetic.
#pragma once

#include <sodium.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "federated/secure_aggregation.h"

namespace tn::federated::secagg::detail {

// sodium_init() once per process; throws Error if libsodium cannot start (no entropy source).
void require_sodium();

// The ChaCha20 (IETF) keystream under a 32-byte key and the all-zero nonce, read as little-endian
// 32-bit words. A zero nonce is safe because every key here (self-mask seeds, pairwise seeds,
// graph seeds) is fresh per round and used for one stream only.
class KeyStream {
 public:
  explicit KeyStream(const Bytes32& key);
  ~KeyStream();
  KeyStream(const KeyStream&) = delete;
  KeyStream& operator=(const KeyStream&) = delete;

  uint32_t next_word();
  // Uniform in [0, bound) by rejection, so that no value is favoured; bound > 0.
  uint32_t uniform_below(uint32_t bound);

 private:
  void refill();

  static constexpr size_t kBlocksPerRefill = 64;  // 4 KiB per libsodium call
  Bytes32 key_;
  std::array<uint8_t, kBlocksPerRefill * 64> buffer_{};
  size_t position_ = buffer_.size();
  uint64_t next_block_ = 0;
};

// Refuses (Parameter) a width outside [1, 32].
void check_bits(unsigned bits);
uint32_t word_mask(unsigned bits);

// A 32-byte key for `purpose` that devices `me` and `peer` (or the coordinator holding a dropped
// device's reconstructed secret) agree on: BLAKE2b of their X25519 shared point, both public keys
// and indices in device order, and the round. Refuses me == peer and a peer key of small order.
Bytes32 agreed_key(std::string_view purpose, const Bytes32& my_secret, DeviceIndex me,
                   const Bytes32& peer_key, DeviceIndex peer, std::string_view round_id);

// Byte encodings for what is signed, hashed or encrypted (encoding.cpp): numbers as 8 bytes
// little-endian; the round id length-prefixed, so that no two (round, following fields) encode
// alike.
void append(std::vector<uint8_t>& out, const void* data, size_t size);
void append_number(std::vector<uint8_t>& out, uint64_t value);
void append_round(std::vector<uint8_t>& out, std::string_view round_id);
// Reads 8 bytes at `offset` and advances it; nothing if fewer remain.
std::optional<uint64_t> read_number(const std::vector<uint8_t>& in, size_t& offset);

enum class Sign { Add, Subtract };
// vector +/- the keystream of `seed`, word by word, modulo 2^bits.
void apply_mask(std::vector<uint32_t>& vector, const Bytes32& seed, Sign sign, unsigned bits);

// Refuses (SecAggRefused, Parameter) with "<part>: <name> <value> must be positive and finite"
// unless value is: fixed point's and DP noise's parameter checks, each naming its part.
void check_positive_finite(const char* part, double value, const char* name);

}  // namespace tn::federated::secagg::detail
