// SecAgg+'s stage messages (proto/secure_aggregation_messages.h): a round whose every message
// is serialised and parsed between the DeviceSessions and the CoordinatorSession, as a transport
// carries them, unmasks to the survivors' inputs summed here, bit for bit; what a peer could get
// wrong in a message is refused by name.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <optional>
#include <random>

#include "federated/secure_session.h"
#include "proto/secure_aggregation_messages.h"
#include "test_support.h"

namespace tn::proto {
namespace {

using secagg::DeviceIndex;
using secagg::SecAggRefused;

constexpr unsigned kBits = 32;
constexpr size_t kWords = 40;
constexpr const char* kRound = "task-2/7";

// `message` after a trip through its wire form.
template <typename Message>
Message carried(const Message& message) {
  Message out;
  EXPECT_TRUE(out.ParseFromString(message.SerializeAsString()));
  return out;
}

template <typename Message>
std::vector<Message> carried(const std::vector<Message>& messages) {
  std::vector<Message> out;
  for (const Message& message : messages) out.push_back(carried(message));
  return out;
}

std::string refusal_of(const std::function<void()>& body) {
  return tn::test::message_of<SecAggRefused>(body);
}

TEST(SecAggMessages, ARoundCarriedAsMessagesUnmasksToTheSurvivorsSum) {
  const uint32_t n = 10;
  const secagg::GraphParameters graph =
      secagg::derive_graph_parameters(n, {.corrupt_fraction = 0.05, .dropout_fraction = 0.33});
  // Each device signs with its request-signing key, the identity it registered (a deque: the
  // keys are neither copied nor moved).
  struct Identity {
    SigningKey key = SigningKey::generate();
  };
  std::deque<Identity> identities;
  std::map<DeviceIndex, secagg::Bytes32> registry;
  std::vector<secagg::Bytes32> public_keys;
  for (DeviceIndex d = 0; d < n; ++d) {
    const std::string key = identities.emplace_back().key.public_key();
    std::memcpy(registry[d].data(), key.data(), key.size());
    public_keys.push_back(registry[d]);
  }
  std::vector<secagg::DeviceSession> devices;
  for (DeviceIndex d = 0; d < n; ++d)
    devices.emplace_back(kRound, d, signer_of(identities[d].key), std::map<DeviceIndex, secagg::Bytes32>{},
                         graph.threshold, kBits);
  secagg::CoordinatorSession coordinator(kRound, public_keys, graph, secagg::Bytes32{9}, kBits, kWords);

  for (DeviceIndex d = 0; d < n; ++d)
    coordinator.receive_advertisement(from_message(carried(to_message(devices[d].advertise_keys()))));
  coordinator.close_advertising();
  for (DeviceIndex d = 0; d < n; ++d) {
    std::map<DeviceIndex, secagg::Bytes32> identities;
    for (const auto& [peer, advertisement] : coordinator.keys_for(d)) identities[peer] = registry[peer];
    const v1::SecAggNeighbourKeys keys = carried(to_message(coordinator.keys_for(d), identities));
    if (d == 4) continue;  // gone after advertising
    // A device is given no identities but its neighbours', with their keys.
    secagg::DeviceSession& device = devices[d];
    const secagg::Envelopes sealed = device.share_keys(advertisements_of(keys), identities_of(keys));
    coordinator.receive_shares(d, envelopes_of_sender(d, carried(envelopes_from(d, sealed))));
  }
  coordinator.close_sharing();
  std::mt19937 random(5);
  std::vector<uint32_t> expected(kWords, 0);
  for (DeviceIndex d = 0; d < n; ++d) {
    if (d == 4 || d == 6) continue;  // 6 is gone after sharing
    std::vector<uint32_t> input(kWords);
    for (size_t i = 0; i < kWords; ++i) expected[i] += input[i] = static_cast<uint32_t>(random());
    const secagg::Envelopes received =
        envelopes_for_recipient(d, carried(envelopes_to(d, coordinator.envelopes_for(d))));
    const std::vector<uint32_t> masked = devices[d].masked_input(received, input);
    coordinator.receive_masked_input(d, masked_input_of(carried(masked_input_messages(masked, 16)), kWords));
  }
  const secagg::UnmaskRequest check = from_message(carried(to_message(coordinator.close_masking())));
  EXPECT_EQ(check.dropped, (std::vector<DeviceIndex>{6}));
  for (DeviceIndex d : check.survivors) {
    const secagg::UnmaskRequest shown =
        from_message(carried(to_message(secagg::UnmaskRequest{coordinator.view_of(d), {}})));
    coordinator.receive_survivors_signature(
        d, from_message(carried(to_message(d, devices[d].consistency_check(shown.survivors)))));
  }
  coordinator.close_consistency_check();
  for (DeviceIndex d : check.survivors) {
    const v1::SecAggUnmaskRequest sent =
        carried(to_message(coordinator.request_for(d), coordinator.signatures_for(d)));
    coordinator.receive_unmask_response(
        d, from_message(carried(to_message(devices[d].unmask(from_message(sent), signatures_of(sent))))));
  }
  EXPECT_EQ(coordinator.close_unmasking(), expected);  // 2^32 wraps as uint32_t does
}

TEST(SecAggMessages, WhatAPeerCouldGetWrongIsRefusedByName) {
  v1::SecAggKeyAdvertisement advertisement =
      to_message(secagg::RoundSecrets::generate().advertise(3, kRound, secagg::IdentityKeys::generate()));
  advertisement.mutable_mask_key()->pop_back();
  EXPECT_NE(refusal_of([&] { from_message(advertisement); }).find("mask_key of 31 bytes, expected 32"),
            std::string::npos);
  v1::SecAggUnmaskRequest request;
  request.add_survivors(2);
  request.add_survivors(1);
  EXPECT_NE(
      refusal_of([&] { from_message(request); }).find("survivors not strictly ascending at 1 (2 then 1)"),
      std::string::npos);
  request.Clear();
  request.add_signatures()->add_survivors(1);
  request.mutable_signatures(0)->add_survivors(1);
  EXPECT_NE(refusal_of([&] { signatures_of(request); }).find("signed view not strictly ascending"),
            std::string::npos);
  request.Clear();
  *request.add_signatures() = to_message(1, secagg::Signature{});
  *request.add_signatures() = to_message(1, secagg::Signature{});
  EXPECT_NE(refusal_of([&] { signatures_of(request); }).find("two signatures of device 1"),
            std::string::npos);
  request.mutable_signatures(0)->mutable_signature()->resize(63);
  EXPECT_NE(refusal_of([&] { signatures_of(request); }).find("signature of 63 bytes, expected 64"),
            std::string::npos);
  v1::SecAggNeighbourKeys keys;
  *keys.add_advertisements() = advertisement;
  EXPECT_NE(refusal_of([&] { identities_of(keys); }).find("0 identities for 1 advertisements"),
            std::string::npos);
  keys.add_identities("short");
  EXPECT_NE(refusal_of([&] { identities_of(keys); }).find("identity key of 5 bytes, expected 32"),
            std::string::npos);
  std::vector<v1::SecAggMaskedInput> pieces = masked_input_messages(std::vector<uint32_t>(10, 7), 4);
  EXPECT_EQ(pieces.size(), 3u);
  EXPECT_EQ(masked_input_of(pieces, 10), std::vector<uint32_t>(10, 7));
  EXPECT_NE(refusal_of([&] { masked_input_of(pieces, 9); }).find("runs to word 10, past the input's 9"),
            std::string::npos);
  EXPECT_NE(refusal_of([&] { masked_input_of(pieces, 11); }).find("a masked input of 10 words, expected 11"),
            std::string::npos);
  pieces[1].set_offset(3);
  EXPECT_NE(
      refusal_of([&] { masked_input_of(pieces, 10); }).find("a masked input message at word 3, expected 4"),
      std::string::npos);
  EXPECT_EQ(masked_input_messages({}, 4).size(), 1u);
  v1::SecAggUnmaskResponse response;
  response.add_shares()->set_owner(5);
  EXPECT_NE(refusal_of([&] { from_message(response); }).find("a share of device 5 of kind 0"),
            std::string::npos);
  std::vector<v1::SecAggEnvelope> envelopes = envelopes_to(2, {{1, {1, 2}}, {3, {4}}});
  EXPECT_NE(refusal_of([&] { envelopes_for_recipient(3, envelopes); }).find("an envelope for device 2"),
            std::string::npos);
  envelopes.push_back(envelopes.front());
  EXPECT_NE(refusal_of([&] {
              envelopes_for_recipient(2, envelopes);
            }).find("two envelopes between devices 2 and 1"),
            std::string::npos);
}

}  // namespace
}  // namespace tn::proto
