#include "proto/secure_aggregation_messages.h"

#include <algorithm>
#include <cstring>

namespace tn::proto {

namespace {

using secagg::DeviceIndex;
using secagg::SecAggRefused;

[[noreturn]] void refuse(const std::string& what) {
  throw SecAggRefused(SecAggRefused::Reason::Parameter, "secure aggregation message: " + what);
}

template <size_t N>
std::array<uint8_t, N> fixed_bytes(const std::string& bytes, const char* field) {
  if (bytes.size() != N)
    refuse(std::string(field) + " of " + std::to_string(bytes.size()) + " bytes, expected " +
           std::to_string(N));
  std::array<uint8_t, N> out;
  std::memcpy(out.data(), bytes.data(), N);
  return out;
}

template <size_t N>
std::string as_string(const std::array<uint8_t, N>& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), N};
}

std::vector<DeviceIndex> ascending(const google::protobuf::RepeatedField<uint32_t>& list, const char* field) {
  std::vector<DeviceIndex> out(list.begin(), list.end());
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i - 1] >= out[i])
      refuse(std::string(field) + " not strictly ascending at " + std::to_string(i) + " (" +
             std::to_string(out[i - 1]) + " then " + std::to_string(out[i]) + ")");
  return out;
}

}  // namespace

secagg::Signer signer_of(const SigningKey& key) {
  return [&key](std::span<const uint8_t> message) {
    return fixed_bytes<64>(key.sign({reinterpret_cast<const char*>(message.data()), message.size()}),
                           "signature");
  };
}

v1::SecAggKeyAdvertisement to_message(const secagg::KeyAdvertisement& advertisement) {
  v1::SecAggKeyAdvertisement message;
  message.set_device_index(advertisement.device);
  message.set_mask_key(as_string(advertisement.mask_key));
  message.set_channel_key(as_string(advertisement.channel_key));
  message.set_signature(as_string(advertisement.signature));
  return message;
}

secagg::KeyAdvertisement from_message(const v1::SecAggKeyAdvertisement& message) {
  return {.device = message.device_index(),
          .mask_key = fixed_bytes<32>(message.mask_key(), "mask_key"),
          .channel_key = fixed_bytes<32>(message.channel_key(), "channel_key"),
          .signature = fixed_bytes<64>(message.signature(), "signature")};
}

namespace {

// The envelopes as messages, each between `fixed` and the device it is keyed by.
std::vector<v1::SecAggEnvelope> messages_of(const secagg::Envelopes& envelopes, DeviceIndex fixed,
                                            bool fixed_is_sender) {
  std::vector<v1::SecAggEnvelope> out;
  for (const auto& [other, sealed] : envelopes) {
    v1::SecAggEnvelope& message = out.emplace_back();
    message.set_sender(fixed_is_sender ? fixed : other);
    message.set_recipient(fixed_is_sender ? other : fixed);
    message.set_sealed(std::string(sealed.begin(), sealed.end()));
  }
  return out;
}

}  // namespace

std::vector<v1::SecAggEnvelope> envelopes_from(DeviceIndex sender, const secagg::Envelopes& envelopes) {
  return messages_of(envelopes, sender, true);
}

std::vector<v1::SecAggEnvelope> envelopes_to(DeviceIndex recipient, const secagg::Envelopes& by_sender) {
  return messages_of(by_sender, recipient, false);
}

namespace {

// The envelopes keyed by their other end; each must have `fixed` as its sender (or recipient).
secagg::Envelopes keyed(const std::vector<v1::SecAggEnvelope>& messages, DeviceIndex fixed,
                        bool fixed_is_sender) {
  secagg::Envelopes out;
  for (const v1::SecAggEnvelope& message : messages) {
    const DeviceIndex mine = fixed_is_sender ? message.sender() : message.recipient();
    const DeviceIndex other = fixed_is_sender ? message.recipient() : message.sender();
    if (mine != fixed)
      refuse(std::string("an envelope ") + (fixed_is_sender ? "from device " : "for device ") +
             std::to_string(mine) + " among those " + (fixed_is_sender ? "from device " : "for device ") +
             std::to_string(fixed));
    if (!out.emplace(other, std::vector<uint8_t>(message.sealed().begin(), message.sealed().end())).second)
      refuse("two envelopes between devices " + std::to_string(fixed) + " and " + std::to_string(other));
  }
  return out;
}

}  // namespace

secagg::Envelopes envelopes_of_sender(DeviceIndex sender, const std::vector<v1::SecAggEnvelope>& messages) {
  return keyed(messages, sender, true);
}

secagg::Envelopes envelopes_for_recipient(DeviceIndex recipient,
                                          const std::vector<v1::SecAggEnvelope>& messages) {
  return keyed(messages, recipient, false);
}

std::vector<v1::SecAggMaskedInput> masked_input_messages(const std::vector<uint32_t>& words,
                                                         size_t words_per_message) {
  if (words_per_message == 0) refuse("masked input messages of 0 words");
  std::vector<v1::SecAggMaskedInput> out;
  size_t offset = 0;
  do {
    const size_t count = std::min(words_per_message, words.size() - offset);
    v1::SecAggMaskedInput& message = out.emplace_back();
    message.set_offset(offset);
    message.mutable_words()->Add(words.begin() + offset, words.begin() + offset + count);
    offset += count;
  } while (offset < words.size());
  return out;
}

std::vector<uint32_t> masked_input_of(const std::vector<v1::SecAggMaskedInput>& messages, size_t length) {
  std::vector<uint32_t> words;
  words.reserve(length);
  for (const v1::SecAggMaskedInput& message : messages) {
    if (message.offset() != words.size())
      refuse("a masked input message at word " + std::to_string(message.offset()) + ", expected " +
             std::to_string(words.size()));
    if (size_t(message.words_size()) > length - words.size())
      refuse("a masked input message runs to word " + std::to_string(words.size() + message.words_size()) +
             ", past the input's " + std::to_string(length));
    words.insert(words.end(), message.words().begin(), message.words().end());
  }
  if (words.size() != length)
    refuse("a masked input of " + std::to_string(words.size()) + " words, expected " +
           std::to_string(length));
  return words;
}

v1::SecAggSurvivorsSignature to_message(DeviceIndex device, const secagg::Signature& signature) {
  v1::SecAggSurvivorsSignature message;
  message.set_device_index(device);
  message.set_signature(as_string(signature));
  return message;
}

secagg::Signature from_message(const v1::SecAggSurvivorsSignature& message) {
  return fixed_bytes<64>(message.signature(), "signature");
}

v1::SecAggUnmaskRequest to_message(const secagg::UnmaskRequest& request,
                                   const secagg::SignedViews& signatures) {
  v1::SecAggUnmaskRequest message;
  message.mutable_survivors()->Add(request.survivors.begin(), request.survivors.end());
  message.mutable_dropped()->Add(request.dropped.begin(), request.dropped.end());
  for (const auto& [device, view] : signatures) {
    v1::SecAggSurvivorsSignature& signed_view = *message.add_signatures() =
        to_message(device, view.signature);
    signed_view.mutable_survivors()->Add(view.survivors.begin(), view.survivors.end());
  }
  return message;
}

secagg::SignedViews signatures_of(const v1::SecAggUnmaskRequest& message) {
  secagg::SignedViews out;
  for (const v1::SecAggSurvivorsSignature& signature : message.signatures())
    if (!out.emplace(
                signature.device_index(),
                secagg::SignedView{ascending(signature.survivors(), "signed view"), from_message(signature)})
             .second)
      refuse("two signatures of device " + std::to_string(signature.device_index()));
  return out;
}

v1::SecAggNeighbourKeys to_message(const std::map<DeviceIndex, secagg::KeyAdvertisement>& keys,
                                   const std::map<DeviceIndex, secagg::Bytes32>& identities) {
  v1::SecAggNeighbourKeys message;
  for (const auto& [device, advertisement] : keys) {
    *message.add_advertisements() = to_message(advertisement);
    message.add_identities(as_string(identities.at(device)));
  }
  return message;
}

std::map<DeviceIndex, secagg::KeyAdvertisement> advertisements_of(const v1::SecAggNeighbourKeys& message) {
  std::map<DeviceIndex, secagg::KeyAdvertisement> out;
  for (const v1::SecAggKeyAdvertisement& advertisement : message.advertisements())
    if (!out.emplace(advertisement.device_index(), from_message(advertisement)).second)
      refuse("two advertisements of device " + std::to_string(advertisement.device_index()));
  return out;
}

std::map<DeviceIndex, secagg::Bytes32> identities_of(const v1::SecAggNeighbourKeys& message) {
  if (message.identities_size() != message.advertisements_size())
    refuse(std::to_string(message.identities_size()) + " identities for " +
           std::to_string(message.advertisements_size()) + " advertisements");
  std::map<DeviceIndex, secagg::Bytes32> out;
  for (int i = 0; i < message.identities_size(); ++i)
    out[message.advertisements(i).device_index()] = fixed_bytes<32>(message.identities(i), "identity key");
  return out;
}

secagg::UnmaskRequest from_message(const v1::SecAggUnmaskRequest& message) {
  return {ascending(message.survivors(), "survivors"), ascending(message.dropped(), "dropped")};
}

v1::SecAggUnmaskResponse to_message(const std::vector<secagg::RevealedShare>& shares) {
  v1::SecAggUnmaskResponse message;
  for (const secagg::RevealedShare& revealed : shares) {
    v1::SecAggRevealedShare& out = *message.add_shares();
    out.set_owner(revealed.owner);
    out.set_kind(revealed.kind == secagg::ShareKind::SelfMaskSeed ? v1::SECAGG_SHARE_KIND_SELF_MASK_SEED
                                                                  : v1::SECAGG_SHARE_KIND_MASK_SECRET);
    out.set_x(revealed.share.x);
    out.mutable_y()->Add(revealed.share.y.begin(), revealed.share.y.end());
  }
  return message;
}

std::vector<secagg::RevealedShare> from_message(const v1::SecAggUnmaskResponse& message) {
  std::vector<secagg::RevealedShare> out;
  for (const v1::SecAggRevealedShare& revealed : message.shares()) {
    secagg::ShareKind kind;
    if (revealed.kind() == v1::SECAGG_SHARE_KIND_SELF_MASK_SEED)
      kind = secagg::ShareKind::SelfMaskSeed;
    else if (revealed.kind() == v1::SECAGG_SHARE_KIND_MASK_SECRET)
      kind = secagg::ShareKind::MaskSecret;
    else
      refuse("a share of device " + std::to_string(revealed.owner()) + " of kind " +
             std::to_string(int(revealed.kind())));
    out.push_back({revealed.owner(), kind, {revealed.x(), {revealed.y().begin(), revealed.y().end()}}});
  }
  return out;
}

}  // namespace tn::proto
