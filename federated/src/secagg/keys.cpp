// Per-round keys: X25519 key pairs signed with the device's Ed25519 identity, and the keys two
// devices agree from them: pairwise mask seeds and share channels (secure_aggregation.h).
#include <string>

#include "secagg_internal.h"

namespace tn::federated::secagg {
namespace {

using Reason = SecAggRefused::Reason;
using detail::append;
using detail::append_number;
using detail::append_round;

// What the identity signs: a domain tag, the round, the device index and both public keys.
std::vector<uint8_t> signed_message(const KeyAdvertisement& advertisement, std::string_view round_id) {
  constexpr std::string_view kTag = "torchnative secagg+ round keys v1";
  std::vector<uint8_t> message;
  append(message, kTag.data(), kTag.size());
  append_round(message, round_id);
  append_number(message, advertisement.device);
  append(message, advertisement.mask_key.data(), advertisement.mask_key.size());
  append(message, advertisement.channel_key.data(), advertisement.channel_key.size());
  return message;
}

// What a device signs at the consistency check: a domain tag, the round, the signer and the set.
std::vector<uint8_t> survivors_message(DeviceIndex device, std::string_view round_id,
                                       const std::vector<DeviceIndex>& survivors) {
  constexpr std::string_view kTag = "torchnative secagg+ survivors v1";
  std::vector<uint8_t> message;
  append(message, kTag.data(), kTag.size());
  append_round(message, round_id);
  append_number(message, device);
  append_number(message, survivors.size());
  for (DeviceIndex survivor : survivors) append_number(message, survivor);
  return message;
}

Bytes32 public_key_of(const Bytes32& secret) {
  Bytes32 public_key{};
  crypto_scalarmult_base(public_key.data(), secret.data());
  return public_key;
}

Bytes32 random_bytes() {
  Bytes32 bytes{};
  randombytes_buf(bytes.data(), bytes.size());
  return bytes;
}

}  // namespace

IdentityKeys IdentityKeys::generate() {
  detail::require_sodium();
  IdentityKeys keys;
  crypto_sign_keypair(keys.public_key.data(), keys.secret_key.data());
  return keys;
}

RoundSecrets RoundSecrets::generate() {
  detail::require_sodium();
  return RoundSecrets{random_bytes(), random_bytes(), random_bytes()};
}

Signer IdentityKeys::signer() const {
  return [secret_key = secret_key](std::span<const uint8_t> message) {
    Signature signature{};
    crypto_sign_detached(signature.data(), nullptr, message.data(), message.size(), secret_key.data());
    return signature;
  };
}

KeyAdvertisement RoundSecrets::advertise(DeviceIndex device, std::string_view round_id,
                                         const Signer& sign) const {
  KeyAdvertisement advertisement{device, public_key_of(mask_secret), public_key_of(channel_secret), {}};
  advertisement.signature = sign(signed_message(advertisement, round_id));
  return advertisement;
}

KeyAdvertisement RoundSecrets::advertise(DeviceIndex device, std::string_view round_id,
                                         const IdentityKeys& identity) const {
  return advertise(device, round_id, identity.signer());
}

void verify_advertisement(const KeyAdvertisement& advertisement, std::string_view round_id,
                          const Bytes32& identity_key) {
  detail::require_sodium();
  std::vector<uint8_t> message = signed_message(advertisement, round_id);
  if (crypto_sign_verify_detached(advertisement.signature.data(), message.data(), message.size(),
                                  identity_key.data()) != 0)
    throw SecAggRefused(Reason::BadSignature, "secure aggregation: the round keys of device " +
                                                  std::to_string(advertisement.device) + " for round '" +
                                                  std::string(round_id) + "' are not signed by its identity");
}

Signature sign_survivors(const Signer& sign, DeviceIndex device, std::string_view round_id,
                         const std::vector<DeviceIndex>& survivors) {
  return sign(survivors_message(device, round_id, survivors));
}

void verify_survivors(const Signature& signature, DeviceIndex device, std::string_view round_id,
                      const std::vector<DeviceIndex>& survivors, const Bytes32& identity_key) {
  detail::require_sodium();
  const std::vector<uint8_t> message = survivors_message(device, round_id, survivors);
  if (crypto_sign_verify_detached(signature.data(), message.data(), message.size(), identity_key.data()) != 0)
    throw SecAggRefused(Reason::BadSignature, "secure aggregation: device " + std::to_string(device) +
                                                  " did not sign this set of survivors for round '" +
                                                  std::string(round_id) + "'");
}

namespace detail {

Bytes32 agreed_key(std::string_view purpose, const Bytes32& my_secret, DeviceIndex me,
                   const Bytes32& peer_key, DeviceIndex peer, std::string_view round_id) {
  require_sodium();
  if (me == peer)
    throw SecAggRefused(Reason::Parameter, "secure aggregation: device " + std::to_string(me) +
                                               " cannot agree a key with itself");
  Bytes32 shared{};
  // libsodium refuses a peer key of small order, whose shared secret would be all zeros.
  if (crypto_scalarmult(shared.data(), my_secret.data(), peer_key.data()) != 0)
    throw SecAggRefused(Reason::BadKey,
                        "secure aggregation: the key of device " + std::to_string(peer) + " has small order");
  // Hashing both public keys with the shared point, as libsodium's documentation advises, binds
  // the key to this pair of keys; the indices and round bind it to this pair of devices and round.
  Bytes32 my_key = public_key_of(my_secret);
  bool me_first = me < peer;
  std::vector<uint8_t> input;
  append(input, purpose.data(), purpose.size());
  append(input, shared.data(), shared.size());
  append_number(input, me_first ? me : peer);
  append(input, (me_first ? my_key : peer_key).data(), 32);
  append_number(input, me_first ? peer : me);
  append(input, (me_first ? peer_key : my_key).data(), 32);
  append_round(input, round_id);
  Bytes32 key{};
  crypto_generichash(key.data(), key.size(), input.data(), input.size(), nullptr, 0);
  sodium_memzero(shared.data(), shared.size());
  sodium_memzero(input.data(), input.size());
  return key;
}

}  // namespace detail

Bytes32 pairwise_seed(const Bytes32& my_mask_secret, DeviceIndex me, const Bytes32& peer_mask_key,
                      DeviceIndex peer, std::string_view round_id) {
  return detail::agreed_key("torchnative secagg+ pairwise seed v1", my_mask_secret, me, peer_mask_key, peer,
                            round_id);
}

}  // namespace tn::federated::secagg
