// Shares between devices: encrypted and authenticated for the recipient, relayed by the
// coordinator (secure_aggregation.h).
#include <string>

#include "secagg_internal.h"

namespace tn::federated::secagg {
namespace {

using Reason = SecAggRefused::Reason;
using detail::append_number;

constexpr std::string_view kChannelPurpose = "torchnative secagg+ share channel v1";
constexpr size_t kNonceBytes = crypto_aead_xchacha20poly1305_ietf_NPUBBYTES;
constexpr size_t kTagBytes = crypto_aead_xchacha20poly1305_ietf_ABYTES;
// A share has 5 chunks; the bound only stops a forged count from asking for a huge allocation.
constexpr uint64_t kMostChunks = 64;

// The associated data: what the envelope is, for which round, from whom and to whom, so that a
// relayed envelope cannot be redirected or replayed into another round.
std::vector<uint8_t> context(std::string_view round_id, DeviceIndex sender, DeviceIndex recipient) {
  constexpr std::string_view kTag = "torchnative secagg+ shares v1";
  std::vector<uint8_t> out;
  detail::append(out, kTag.data(), kTag.size());
  detail::append_round(out, round_id);
  append_number(out, sender);
  append_number(out, recipient);
  return out;
}

void append_share(std::vector<uint8_t>& out, const Share& share) {
  append_number(out, share.x);
  append_number(out, share.y.size());
  for (uint64_t y : share.y) append_number(out, y);
}

std::optional<Share> read_share(const std::vector<uint8_t>& in, size_t& offset) {
  std::optional<uint64_t> x = detail::read_number(in, offset), count = detail::read_number(in, offset);
  if (!x || !count || *x > UINT32_MAX || *count > kMostChunks) return std::nullopt;
  Share share{static_cast<uint32_t>(*x), {}};
  for (uint64_t i = 0; i < *count; ++i) {
    std::optional<uint64_t> y = detail::read_number(in, offset);
    if (!y) return std::nullopt;
    share.y.push_back(*y);
  }
  return share;
}

SecAggRefused bad_envelope(DeviceIndex sender, DeviceIndex recipient, const std::string& why) {
  return SecAggRefused(Reason::BadEnvelope, "secure aggregation: the shares device " +
                                                std::to_string(sender) + " sent device " +
                                                std::to_string(recipient) + " " + why);
}

// The decrypted shares; refuses trailing bytes and shares not dealt at the recipient's point.
HeldShares parse_shares(const std::vector<uint8_t>& plain, DeviceIndex sender, DeviceIndex recipient) {
  size_t offset = 0;
  std::optional<Share> self = read_share(plain, offset), secret = read_share(plain, offset);
  if (!self || !secret || offset != plain.size()) throw bad_envelope(sender, recipient, "are malformed");
  if (self->x != recipient + 1 || secret->x != recipient + 1)
    throw bad_envelope(sender, recipient, "were dealt at another holder's point");
  return {*self, *secret};
}

}  // namespace

std::vector<uint8_t> seal_shares(const HeldShares& shares, const Bytes32& my_channel_secret,
                                 DeviceIndex sender, const Bytes32& recipient_channel_key,
                                 DeviceIndex recipient, std::string_view round_id) {
  Bytes32 key = detail::agreed_key(kChannelPurpose, my_channel_secret, sender, recipient_channel_key,
                                   recipient, round_id);
  std::vector<uint8_t> plain, associated = context(round_id, sender, recipient);
  append_share(plain, shares.self_mask_seed);
  append_share(plain, shares.mask_secret);
  std::vector<uint8_t> envelope(kNonceBytes + plain.size() + kTagBytes);
  randombytes_buf(envelope.data(), kNonceBytes);  // 192-bit random nonces do not collide
  crypto_aead_xchacha20poly1305_ietf_encrypt(envelope.data() + kNonceBytes, nullptr, plain.data(),
                                             plain.size(), associated.data(), associated.size(), nullptr,
                                             envelope.data(), key.data());
  sodium_memzero(plain.data(), plain.size());
  sodium_memzero(key.data(), key.size());
  return envelope;
}

HeldShares open_shares(const std::vector<uint8_t>& envelope, const Bytes32& my_channel_secret,
                       DeviceIndex recipient, const Bytes32& sender_channel_key, DeviceIndex sender,
                       std::string_view round_id) {
  Bytes32 key =
      detail::agreed_key(kChannelPurpose, my_channel_secret, recipient, sender_channel_key, sender, round_id);
  if (envelope.size() < kNonceBytes + kTagBytes) throw bad_envelope(sender, recipient, "are truncated");
  std::vector<uint8_t> plain(envelope.size() - kNonceBytes - kTagBytes),
      associated = context(round_id, sender, recipient);
  int opened = crypto_aead_xchacha20poly1305_ietf_decrypt(
      plain.data(), nullptr, nullptr, envelope.data() + kNonceBytes, envelope.size() - kNonceBytes,
      associated.data(), associated.size(), envelope.data(), key.data());
  sodium_memzero(key.data(), key.size());
  if (opened != 0)
    throw bad_envelope(sender, recipient, "do not authenticate for round '" + std::string(round_id) + "'");
  HeldShares shares = parse_shares(plain, sender, recipient);
  sodium_memzero(plain.data(), plain.size());
  return shares;
}

}  // namespace tn::federated::secagg
