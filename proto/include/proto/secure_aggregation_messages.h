// SecAgg+'s stage messages (device.proto, "Secure aggregation") to and from tn_secagg's types
// (federated/secure_aggregation.h). Decoding refuses by name (SecAggRefused Parameter) what a
// peer could get wrong or forge: keys and signatures of the wrong length, an unknown share kind,
// unmask lists that are not ascending, envelopes of another sender or recipient.
#pragma once

#include <map>
#include <vector>

#include "federated/secure_aggregation.h"
#include "federated/secure_session.h"
#include "proto/signing.h"
#include "torchnative/federated/v1/device.pb.h"

namespace tn::proto {

namespace v1 = ::torchnative::federated::v1;
namespace secagg = ::tn::federated::secagg;

// A device's request-signing key (its registered identity) as SecAgg+'s signer; `key` outlives it.
secagg::Signer signer_of(const SigningKey& key);

v1::SecAggKeyAdvertisement to_message(const secagg::KeyAdvertisement& advertisement);
secagg::KeyAdvertisement from_message(const v1::SecAggKeyAdvertisement& message);

// A sender's envelopes (by recipient) as messages, and back: every message must name `sender` and
// a recipient once (the coordinator fills in nothing a device did not seal).
std::vector<v1::SecAggEnvelope> envelopes_from(secagg::DeviceIndex sender,
                                               const secagg::Envelopes& envelopes);
secagg::Envelopes envelopes_of_sender(secagg::DeviceIndex sender,
                                      const std::vector<v1::SecAggEnvelope>& messages);
// The envelopes sealed for `recipient` (by sender), as messages and back.
std::vector<v1::SecAggEnvelope> envelopes_to(secagg::DeviceIndex recipient,
                                             const secagg::Envelopes& by_sender);
secagg::Envelopes envelopes_for_recipient(secagg::DeviceIndex recipient,
                                          const std::vector<v1::SecAggEnvelope>& messages);

v1::SecAggSurvivorsSignature to_message(secagg::DeviceIndex device, const secagg::Signature& signature);
secagg::Signature from_message(const v1::SecAggSurvivorsSignature& message);

// A masked input as messages of at most `words_per_message` words each, in order (one message,
// empty, for an empty input).
std::vector<v1::SecAggMaskedInput> masked_input_messages(const std::vector<uint32_t>& words,
                                                         size_t words_per_message);
// The masked input of `length` words from its messages, each starting where the last ended.
// Refuses by name a message that leaves a gap, overlaps or runs past `length`, and an input that
// stops short.
std::vector<uint32_t> masked_input_of(const std::vector<v1::SecAggMaskedInput>& messages, size_t length);

v1::SecAggUnmaskRequest to_message(const secagg::UnmaskRequest& request,
                                   const secagg::SignedViews& signatures = {});
secagg::UnmaskRequest from_message(const v1::SecAggUnmaskRequest& message);
// The request's signed views by signer; refuses two of one signer.
secagg::SignedViews signatures_of(const v1::SecAggUnmaskRequest& message);

// Stage 2's input for a device: its neighbours' advertisements and identity keys, and back
// (refusing an identity key not of 32 bytes, and identities not one per advertisement).
v1::SecAggNeighbourKeys to_message(const std::map<secagg::DeviceIndex, secagg::KeyAdvertisement>& keys,
                                   const std::map<secagg::DeviceIndex, secagg::Bytes32>& identities);
std::map<secagg::DeviceIndex, secagg::KeyAdvertisement> advertisements_of(
    const v1::SecAggNeighbourKeys& message);
std::map<secagg::DeviceIndex, secagg::Bytes32> identities_of(const v1::SecAggNeighbourKeys& message);

v1::SecAggUnmaskResponse to_message(const std::vector<secagg::RevealedShare>& shares);
std::vector<secagg::RevealedShare> from_message(const v1::SecAggUnmaskResponse& message);

}  // namespace tn::proto
