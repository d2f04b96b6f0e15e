// SecAgg+'s stages as state machines (secure_session.h): devices' DeviceSessions and the
// CoordinatorSession exchange what a transport would carry; devices vanish at each stage; the
// unmasked sum equals, bit for bit, the survivors' inputs summed here modulo 2^bits; a round with
// fewer than t devices left at a stage is abandoned by name; replayed or out-of-order stages, a
// substituted key and a request for both shares of a device are refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "federated/secure_session.h"
#include "secagg_test_util.h"

namespace tn::federated::secagg {
namespace {

using Reason = SecAggRefused::Reason;

constexpr unsigned kBits = 20;
constexpr size_t kWords = 64;
constexpr const char* kRound = "task-9/4";

// Where each vanishing device stops: before advertising, after advertising, after sharing its
// keys, after sending its masked input (it signs no survivor set), after signing (it does not
// answer the unmask request).
struct Dropouts {
  std::set<DeviceIndex> before_advertising, after_advertising, after_sharing, after_masking, after_signing;
};

class Fleet {
 public:
  explicit Fleet(uint32_t devices)
      : graph_(derive_graph_parameters(devices, {.corrupt_fraction = 0.05, .dropout_fraction = 0.33})) {
    std::mt19937 random(3);
    std::map<DeviceIndex, Bytes32> registry;
    std::vector<Bytes32> public_keys;
    for (DeviceIndex d = 0; d < devices; ++d) {
      identities_.push_back(IdentityKeys::generate());
      registry[d] = identities_.back().public_key;
      public_keys.push_back(identities_.back().public_key);
      std::vector<uint32_t> input(kWords);
      for (uint32_t& word : input) word = random() & ((1u << kBits) - 1);
      inputs_.push_back(input);
    }
    for (DeviceIndex d = 0; d < devices; ++d)
      sessions_.emplace_back(kRound, d, identities_[d].signer(), registry, graph_.threshold, kBits);
    coordinator_.emplace(kRound, public_keys, graph_, Bytes32{7}, kBits, kWords);
  }

  uint32_t threshold() const { return graph_.threshold; }
  DeviceSession& device(DeviceIndex d) { return sessions_[d]; }
  CoordinatorSession& coordinator() { return *coordinator_; }
  const std::vector<uint32_t>& input(DeviceIndex d) const { return inputs_[d]; }

  // Every stage up to the unmask request, with the dropouts before it; the devices that took
  // part in each stage. The masked inputs of `summed` (those of them that mask) reach the
  // coordinator as one sum modulo 2^32, as the hub's reduce of the data plane adds them.
  UnmaskRequest run_to_unmask(const Dropouts& dropouts, const std::set<DeviceIndex>& summed = {}) {
    std::set<DeviceIndex> live;
    for (DeviceIndex d = 0; d < sessions_.size(); ++d)
      if (!dropouts.before_advertising.contains(d)) live.insert(d);
    for (DeviceIndex d : live) coordinator_->receive_advertisement(sessions_[d].advertise_keys());
    coordinator_->close_advertising();
    std::erase_if(live, [&](DeviceIndex d) { return dropouts.after_advertising.contains(d); });
    for (DeviceIndex d : live)
      coordinator_->receive_shares(d, sessions_[d].share_keys(coordinator_->keys_for(d)));
    coordinator_->close_sharing();
    std::erase_if(live, [&](DeviceIndex d) { return dropouts.after_sharing.contains(d); });
    std::set<DeviceIndex> in_sum;
    std::vector<uint32_t> sum(kWords, 0);
    for (DeviceIndex d : live) {
      const std::vector<uint32_t> masked =
          sessions_[d].masked_input(coordinator_->envelopes_for(d), inputs_[d]);
      if (!summed.contains(d)) {
        coordinator_->receive_masked_input(d, masked);
        continue;
      }
      in_sum.insert(d);
      for (size_t i = 0; i < kWords; ++i) sum[i] += masked[i];  // wraps modulo 2^32
    }
    if (!in_sum.empty()) coordinator_->receive_masked_sum(in_sum, sum);
    return coordinator_->close_masking();
  }

  // The consistency check (each survivor signs the view it is shown), then the unmask stage (each
  // signer is sent its part of the request and its neighbours' signed views); the signers.
  std::set<DeviceIndex> sign(const UnmaskRequest& request, const Dropouts& dropouts) {
    std::set<DeviceIndex> signers;
    for (DeviceIndex d : request.survivors)
      if (!dropouts.after_masking.contains(d)) {
        coordinator_->receive_survivors_signature(d,
                                                  sessions_[d].consistency_check(coordinator_->view_of(d)));
        signers.insert(d);
      }
    coordinator_->close_consistency_check();
    return signers;
  }

  std::vector<uint32_t> unmask(const UnmaskRequest& request, const Dropouts& dropouts) {
    for (DeviceIndex d : sign(request, dropouts))
      if (!dropouts.after_signing.contains(d))
        coordinator_->receive_unmask_response(
            d, sessions_[d].unmask(coordinator_->request_for(d), coordinator_->signatures_for(d)));
    return coordinator_->close_unmasking();
  }

  // The survivors' inputs summed here, word by word modulo 2^bits.
  std::vector<uint32_t> plain_sum(const std::vector<DeviceIndex>& survivors) const {
    std::vector<uint32_t> sum(kWords, 0);
    for (DeviceIndex d : survivors)
      for (size_t i = 0; i < kWords; ++i) sum[i] = (sum[i] + inputs_[d][i]) & ((1u << kBits) - 1);
    return sum;
  }

 private:
  GraphParameters graph_;
  std::vector<IdentityKeys> identities_;
  std::vector<std::vector<uint32_t>> inputs_;
  std::vector<DeviceSession> sessions_;
  std::optional<CoordinatorSession> coordinator_;
};

TEST(SecAggSession, TheUnmaskedSumIsTheSurvivorsInputsWithADropoutAtEveryStage) {
  Fleet fleet(16);
  const Dropouts dropouts{{1}, {2}, {3, 4}, {5}, {6}};
  const UnmaskRequest request = fleet.run_to_unmask(dropouts);
  std::vector<DeviceIndex> expected;  // devices 5 and 6 sent their masked inputs: in the sum
  for (DeviceIndex d = 0; d < 16; ++d)
    if (d < 1 || d > 4) expected.push_back(d);
  EXPECT_EQ(request.survivors, expected);
  EXPECT_EQ(request.dropped, (std::vector<DeviceIndex>{3, 4}));  // shared their keys, masked nothing
  const std::vector<uint32_t> sum = fleet.unmask(request, dropouts);
  EXPECT_EQ(sum, fleet.plain_sum(request.survivors));
  EXPECT_EQ(fleet.coordinator().survivors(), expected);
}

// Most masked inputs summed by a transport before the coordinator sees them (the data plane's
// hub), the others one by one (gRPC), with a dropout at every stage on both sides: the same
// survivors, and the unmasked sum the survivors' inputs.
TEST(SecAggSession, MaskedInputsSummedByATransportUnmaskToTheSurvivorsInputs) {
  Fleet fleet(16);
  const Dropouts dropouts{{1}, {2}, {3, 9}, {5, 10}, {6, 11}};
  const UnmaskRequest request = fleet.run_to_unmask(dropouts, {0, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  std::vector<DeviceIndex> expected;
  for (DeviceIndex d = 0; d < 16; ++d)
    if (d != 1 && d != 2 && d != 3 && d != 9) expected.push_back(d);
  EXPECT_EQ(request.survivors, expected);
  EXPECT_EQ(request.dropped, (std::vector<DeviceIndex>{3, 9}));
  EXPECT_EQ(fleet.unmask(request, dropouts), fleet.plain_sum(request.survivors));
}

// The coordinator must know exactly whose words a transport's sum holds: a sum naming a device
// that did not share its keys, or one that masked already, or of the wrong length, is refused by
// name and leaves the sum as it was.
TEST(SecAggSession, AMaskedSumOfDevicesThatCannotBeInItIsRefusedByName) {
  Fleet fleet(8);
  Dropouts dropouts;
  dropouts.after_advertising = {1};
  CoordinatorSession& coordinator = fleet.coordinator();
  for (DeviceIndex d = 0; d < 8; ++d) coordinator.receive_advertisement(fleet.device(d).advertise_keys());
  coordinator.close_advertising();
  for (DeviceIndex d = 0; d < 8; ++d)
    if (d != 1) coordinator.receive_shares(d, fleet.device(d).share_keys(coordinator.keys_for(d)));
  coordinator.close_sharing();
  std::vector<std::vector<uint32_t>> masked(8);
  for (DeviceIndex d = 0; d < 8; ++d)
    if (d != 1) masked[d] = fleet.device(d).masked_input(coordinator.envelopes_for(d), fleet.input(d));
  coordinator.receive_masked_input(0, masked[0]);
  const auto refused = [&](const std::set<DeviceIndex>& senders, std::vector<uint32_t> sum) {
    return refusal_of([&] { coordinator.receive_masked_sum(senders, sum); });
  };
  Refusal refusal = refused({2, 1}, masked[2]);
  EXPECT_EQ(refusal.reason, Reason::Parameter);
  EXPECT_NE(refusal.message.find("device 1's masked input is in a sum, without its keys shared"),
            std::string::npos)
      << refusal.message;
  refusal = refused({0, 2}, masked[2]);
  EXPECT_EQ(refusal.reason, Reason::OutOfOrder);
  EXPECT_NE(refusal.message.find("device 0's masked input is in a sum, after it masked already"),
            std::string::npos)
      << refusal.message;
  refusal = refused({2}, std::vector<uint32_t>(kWords + 1));
  EXPECT_NE(refusal.message.find("the masked sum of devices {2}: "), std::string::npos) << refusal.message;
  EXPECT_EQ(refused({}, masked[2]).reason, Reason::Parameter);
  // None of those touched the sum: the others' inputs, summed, unmask to the seven's.
  std::vector<uint32_t> sum(kWords, 0);
  for (DeviceIndex d = 2; d < 8; ++d)
    for (size_t i = 0; i < kWords; ++i) sum[i] += masked[d][i];
  coordinator.receive_masked_sum({2, 3, 4, 5, 6, 7}, sum);
  const UnmaskRequest request = coordinator.close_masking();
  EXPECT_EQ(request.survivors, (std::vector<DeviceIndex>{0, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(fleet.unmask(request, dropouts), fleet.plain_sum(request.survivors));
}

TEST(SecAggSession, TheUnmaskedSumIsTheSumOfAllInputsWithoutDropouts) {
  Fleet fleet(8);
  const UnmaskRequest request = fleet.run_to_unmask({});
  EXPECT_TRUE(request.dropped.empty());
  EXPECT_EQ(fleet.unmask(request, {}), fleet.plain_sum(request.survivors));
}

TEST(SecAggSession, ARoundWithFewerThanTheThresholdLeftIsAbandonedByName) {
  Fleet fleet(8);
  std::set<DeviceIndex> most;
  for (DeviceIndex d = fleet.threshold() - 1; d < 8; ++d) most.insert(d);  // t - 1 devices mask
  Dropouts dropouts;
  dropouts.after_sharing = most;
  const Refusal refusal = refusal_of([&] { fleet.run_to_unmask(dropouts); });
  EXPECT_EQ(refusal.reason, Reason::BelowThreshold);
  EXPECT_NE(refusal.message.find(std::to_string(fleet.threshold() - 1) +
                                 " devices sent their masked input, below the threshold " +
                                 std::to_string(fleet.threshold()) + ": the round is abandoned"),
            std::string::npos)
      << refusal.message;
}

TEST(SecAggSession, ReplayedAndOutOfOrderStagesAreRefusedByName) {
  Fleet fleet(8);
  const KeyAdvertisement keys = fleet.device(0).advertise_keys();
  fleet.coordinator().receive_advertisement(keys);
  Refusal refusal = refusal_of([&] { fleet.coordinator().receive_advertisement(keys); });
  EXPECT_EQ(refusal.reason, Reason::OutOfOrder);
  EXPECT_NE(refusal.message.find("device 0 advertised its keys a second time"), std::string::npos);
  refusal = refusal_of([&] { fleet.device(0).advertise_keys(); });
  EXPECT_EQ(refusal.reason, Reason::OutOfOrder);
  EXPECT_NE(
      refusal.message.find("was asked for its keys at stage share keys: a stage out of order or replayed"),
      std::string::npos)
      << refusal.message;
  refusal = refusal_of([&] { fleet.device(1).masked_input({}, fleet.input(1)); });
  EXPECT_EQ(refusal.reason, Reason::OutOfOrder);
  refusal = refusal_of([&] { fleet.coordinator().receive_masked_input(0, fleet.input(0)); });
  EXPECT_EQ(refusal.reason, Reason::OutOfOrder);
  EXPECT_NE(refusal.message.find("device 0's masked input came at stage advertise keys"), std::string::npos);
}

TEST(SecAggSession, ADeviceRefusesASubstitutedKeyAndARequestForBothShares) {
  Fleet fleet(8);
  for (DeviceIndex d = 0; d < 8; ++d)
    fleet.coordinator().receive_advertisement(fleet.device(d).advertise_keys());
  fleet.coordinator().close_advertising();
  std::map<DeviceIndex, KeyAdvertisement> keys = fleet.coordinator().keys_for(0);
  const DeviceIndex victim = keys.begin()->first;
  keys.begin()->second.mask_key =
      RoundSecrets::generate().advertise(victim, kRound, IdentityKeys::generate()).mask_key;
  Refusal refusal = refusal_of([&] { fleet.device(0).share_keys(keys); });
  EXPECT_EQ(refusal.reason, Reason::BadSignature);
  EXPECT_NE(refusal.message.find(std::to_string(victim)), std::string::npos) << refusal.message;

  // Its identity substituted with its key: refused, the device holding another identity for it.
  Fleet substituted(8);
  for (DeviceIndex d = 0; d < 8; ++d)
    substituted.coordinator().receive_advertisement(substituted.device(d).advertise_keys());
  substituted.coordinator().close_advertising();
  const IdentityKeys forger = IdentityKeys::generate();
  keys = substituted.coordinator().keys_for(0);
  keys.begin()->second = RoundSecrets::generate().advertise(victim, kRound, forger);
  refusal = refusal_of([&] { substituted.device(0).share_keys(keys, {{victim, forger.public_key}}); });
  EXPECT_EQ(refusal.reason, Reason::Parameter);
  EXPECT_NE(refusal.message.find("was given an identity of device " + std::to_string(victim) + " other than"),
            std::string::npos)
      << refusal.message;

  Fleet honest(8);
  honest.sign(honest.run_to_unmask({}), {});
  UnmaskRequest both = honest.coordinator().request_for(0);
  both.dropped.push_back(honest.coordinator().graph().neighbours(0).front());
  refusal = refusal_of([&] { honest.device(0).unmask(both, honest.coordinator().signatures_for(0)); });
  EXPECT_EQ(refusal.reason, Reason::BothSharesRequested);
}

// An active coordinator showing devices different views (to learn both shares of one device from
// different neighbours) is caught at the consistency check.
TEST(SecAggSession, ADeviceRevealsNothingForAViewItDidNotSignOrWithoutItsNeighboursSignedViews) {
  Fleet fleet(8);
  fleet.sign(fleet.run_to_unmask({}), {});
  CoordinatorSession& coordinator = fleet.coordinator();
  UnmaskRequest fewer = coordinator.request_for(0);  // a neighbour moved to the dropped
  const DeviceIndex moved = coordinator.graph().neighbours(0).back();
  std::erase(fewer.survivors, moved);
  fewer.dropped.push_back(moved);
  Refusal refusal = refusal_of([&] { fleet.device(0).unmask(fewer, coordinator.signatures_for(0)); });
  EXPECT_NE(refusal.message.find("was asked to unmask survivors other than those it signed"),
            std::string::npos)
      << refusal.message;
  SignedViews signatures = coordinator.signatures_for(1);
  auto& [forged, view] = *signatures.begin();  // signed by another identity than its own
  view.signature = sign_survivors(IdentityKeys::generate().signer(), forged, kRound, view.survivors);
  refusal = refusal_of([&] { fleet.device(1).unmask(coordinator.request_for(1), signatures); });
  EXPECT_EQ(refusal.reason, Reason::BadSignature);
  EXPECT_NE(refusal.message.find("device " + std::to_string(forged) + " did not sign this set of survivors"),
            std::string::npos)
      << refusal.message;
  SignedViews too_few = coordinator.signatures_for(3);
  while (too_few.size() + 1 > fleet.threshold()) too_few.erase(too_few.begin());
  refusal = refusal_of([&] { fleet.device(3).unmask(coordinator.request_for(3), too_few); });
  EXPECT_NE(refusal.message.find("signed views of its neighbours, below the threshold"), std::string::npos)
      << refusal.message;
}

// The coordinator tells device 0 that its neighbour m dropped (to have it reveal m's mask secret)
// and tells j, a neighbour of both, that m survived: j's signed view, which 0 needs, betrays it.
TEST(SecAggSession, ANeighboursSignedViewThatDisagreesAboutACommonNeighbourIsRefused) {
  Fleet fleet(8);
  const UnmaskRequest outcome = fleet.run_to_unmask({});
  const NeighbourGraph& graph = fleet.coordinator().graph();
  const std::vector<DeviceIndex>& mine = graph.neighbours(0);
  DeviceIndex j = 0, m = 0;
  for (DeviceIndex a : mine)
    for (DeviceIndex b : mine)
      if (a != b && std::ranges::binary_search(graph.neighbours(a), b)) j = a, m = b;
  ASSERT_NE(j, m);
  UnmaskRequest lie = fleet.coordinator().request_for(0);
  std::erase(lie.survivors, m);
  lie.dropped = {m};
  fleet.device(0).consistency_check(lie.survivors);
  SignedViews views;
  for (DeviceIndex peer : lie.survivors) {
    if (peer == 0) continue;
    const std::vector<DeviceIndex> view = fleet.coordinator().view_of(peer);
    views[peer] = {view, fleet.device(peer).consistency_check(view)};
  }
  ASSERT_GE(views.size(), fleet.threshold());
  ASSERT_EQ(outcome.survivors.size(), 8u);
  const Refusal refusal = refusal_of([&] { fleet.device(0).unmask(lie, views); });
  EXPECT_EQ(refusal.reason, Reason::BadSignature);
  EXPECT_NE(refusal.message.find("holding device " + std::to_string(m) +
                                 " as a survivor, which its own view does not"),
            std::string::npos)
      << refusal.message;
}

// What a device is sent at the consistency check and with the unmask request concerns its
// neighbourhood alone (O(k), not O(n)): at 100 devices (k 28), with dropouts, every view, dropped
// list and set of signed views is of the device and its neighbours, and each is what the unmask
// needs (the sum comes out exact).
TEST(SecAggSession, ADeviceIsSentOnlyItsNeighbourhoodAtTheConsistencyCheckAndTheUnmask) {
  Fleet fleet(100);
  const Dropouts dropouts{{1, 2}, {3, 4}, {5, 6, 7, 8}, {9}, {10}};
  const UnmaskRequest outcome = fleet.run_to_unmask(dropouts);
  const std::set<DeviceIndex> signers = fleet.sign(outcome, dropouts);
  CoordinatorSession& coordinator = fleet.coordinator();
  const auto within = [&](DeviceIndex d, const std::vector<DeviceIndex>& devices) {
    const std::vector<DeviceIndex>& neighbours = coordinator.graph().neighbours(d);
    return std::ranges::all_of(
        devices, [&](DeviceIndex x) { return x == d || std::ranges::binary_search(neighbours, x); });
  };
  size_t largest = 0;
  for (DeviceIndex d : signers) {
    const UnmaskRequest request = coordinator.request_for(d);
    EXPECT_TRUE(within(d, request.survivors) && within(d, request.dropped)) << d;
    EXPECT_EQ(request.survivors, coordinator.view_of(d));
    const SignedViews views = coordinator.signatures_for(d);
    for (const auto& [signer, view] : views)
      EXPECT_TRUE(within(d, {signer}) && within(signer, view.survivors));
    largest = std::max({largest, request.survivors.size(), views.size()});
  }
  EXPECT_LE(largest, coordinator.graph().neighbours(0).size() + 1);
  EXPECT_LT(largest, outcome.survivors.size() / 2);  // 90 survivors: the whole set would be sent before
  for (DeviceIndex d : signers)
    if (!dropouts.after_signing.contains(d))
      coordinator.receive_unmask_response(
          d, fleet.device(d).unmask(coordinator.request_for(d), coordinator.signatures_for(d)));
  EXPECT_EQ(coordinator.close_unmasking(), fleet.plain_sum(outcome.survivors));
}

TEST(SecAggSession, TheCoordinatorRefusesWhatItCouldNotUnmask) {
  Fleet fleet(8);
  for (DeviceIndex d = 0; d < 8; ++d)
    fleet.coordinator().receive_advertisement(fleet.device(d).advertise_keys());
  fleet.coordinator().close_advertising();
  for (DeviceIndex d = 1; d < 8; ++d)
    fleet.coordinator().receive_shares(d, fleet.device(d).share_keys(fleet.coordinator().keys_for(d)));
  Envelopes missing_one = fleet.device(0).share_keys(fleet.coordinator().keys_for(0));
  missing_one.erase(missing_one.begin());
  Refusal refusal = refusal_of([&] { fleet.coordinator().receive_shares(0, missing_one); });
  EXPECT_NE(refusal.message.find("device 0 sealed shares for {"), std::string::npos) << refusal.message;
  fleet.coordinator().close_sharing();
  refusal = refusal_of([&] { fleet.coordinator().receive_masked_input(0, fleet.input(0)); });
  EXPECT_NE(refusal.message.find("device 0 sent a masked input without sharing its keys"), std::string::npos);
  std::vector<uint32_t> wide = fleet.input(1);
  wide[3] = 1u << kBits;
  refusal = refusal_of([&] { fleet.coordinator().receive_masked_input(1, wide); });
  EXPECT_NE(refusal.message.find("device 1's masked input"), std::string::npos) << refusal.message;
}

}  // namespace
}  // namespace tn::federated::secagg
