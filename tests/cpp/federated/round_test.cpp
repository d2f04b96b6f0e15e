// The round state machine: who contributes, when it is due, abandonment and refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <iomanip>
#include <map>
#include <random>
#include <set>

#include "federated/round.h"
#include "federated_test_util.h"

namespace tn::federated {
namespace {

using namespace std::chrono_literals;

struct RoundFixture : testing::Test {
  ModelSpec spec = ModelSpec({{"w", ScalarType::Float, {2}}});
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();

  RoundPlan plan(size_t target, size_t minimum) const {
    return {5, 2, {"c", "a", "b", "d"}, target, minimum, clock->now() + 10s};
  }
  Update update(const DeviceId& device, uint64_t round_id = 5) const {
    return {device, round_id, 2, 10, {{tensor_from(spec.tensors()[0], {1, 2})}}};
  }
};

TEST_F(RoundFixture, CompletesOverExactlyTheContributorsWhoArrived) {
  Round round(plan(3, 2), spec, {}, clock);
  round.submit(update("d"));
  clock->advance(3s);
  round.submit(update("a"));
  EXPECT_FALSE(round.due());
  clock->advance(7s);  // the deadline
  EXPECT_TRUE(round.due());
  EXPECT_EQ(reason_of([&] { round.submit(update("b")); }), Reason::RoundClosed);
  EXPECT_EQ(round.close(), RoundStatus::Completed);
  EXPECT_EQ(round.contributors(), (std::vector<DeviceId>{"a", "d"}));
  EXPECT_EQ(round.missing(), (std::vector<DeviceId>{"b", "c"}));
  ASSERT_EQ(round.updates().size(), 2u);
  EXPECT_EQ(round.updates()[0].device_id, "a");
  EXPECT_EQ(message_of<StateError>([&] { round.close(); }), "round 5 is already closed");
  EXPECT_EQ(message_of<UpdateRefused>([&] { round.submit(update("c")); }),
            "update from 'c': round 5 is closed (completed)");
}

TEST_F(RoundFixture, IsDueOnceItHasItsTargetAndTakesNoMore) {
  Round round(plan(2, 1), spec, {}, clock);
  round.submit(update("b"));
  EXPECT_FALSE(round.due());
  round.submit(update("c"));
  EXPECT_TRUE(round.due());
  EXPECT_EQ(message_of<UpdateRefused>([&] { round.submit(update("a")); }),
            "update from 'a': round 5 already has the 2 updates it wants");
  EXPECT_EQ(round.close(), RoundStatus::Completed);
  EXPECT_EQ(round.contributors(), (std::vector<DeviceId>{"b", "c"}));
}

TEST_F(RoundFixture, IsAbandonedWithFewerThanTheMinimum) {
  Round round(plan(4, 3), spec, {}, clock);
  round.submit(update("a"));
  round.submit(update("b"));
  clock->advance(11s);
  EXPECT_EQ(round.close(), RoundStatus::Abandoned);
  EXPECT_EQ(round.contributors(), (std::vector<DeviceId>{"a", "b"}));
}

TEST_F(RoundFixture, RefusesStrangersReplaysAndStaleUpdates) {
  Round round(plan(4, 1), spec, {}, clock);
  round.submit(update("a"));
  EXPECT_EQ(message_of<UpdateRefused>([&] { round.submit(update("a")); }),
            "update from 'a': the device already contributed to round 5");
  EXPECT_EQ(reason_of([&] { round.submit(update("a")); }), Reason::Duplicate);
  EXPECT_EQ(message_of<UpdateRefused>([&] { round.submit(update("z")); }),
            "update from 'z': the device was not selected for round 5");
  EXPECT_EQ(reason_of([&] { round.submit(update("z")); }), Reason::NotSelected);
  EXPECT_EQ(reason_of([&] { round.submit(update("b", 4)); }), Reason::WrongRound);
  Update bad = update("b");
  bad.model.tensors[0] = tensor_from(spec.tensors()[0], {NAN, 0});
  EXPECT_EQ(reason_of([&] { round.submit(bad); }), Reason::NonFinite);
  EXPECT_EQ(round.contributors(), (std::vector<DeviceId>{"a"}));  // refused updates leave no trace
  round.submit(update("b"));
}

TEST_F(RoundFixture, ClosesFromTheContributorsOfADataPlaneSum) {
  Round round(plan(2, 2), spec, {}, clock);
  EXPECT_EQ(message_of<Refused>([&] {
              round.close_with_contributors({"a", "x"});
            }),
            "round 5: contributor 'x' was not selected");
  EXPECT_EQ(message_of<Refused>([&] {
              round.close_with_contributors({"a", "a"});
            }),
            "round 5: contributor 'a' is listed twice");
  EXPECT_EQ(round.close_with_contributors({"d", "b", "c"}), RoundStatus::Completed);
  EXPECT_EQ(round.contributors(), (std::vector<DeviceId>{"b", "c", "d"}));
  Round mixed(plan(2, 1), spec, {}, clock);
  mixed.submit(update("a"));
  EXPECT_EQ(message_of<StateError>([&] { mixed.close_with_contributors({"b"}); }),
            "round 5 took individual updates; it cannot also be closed from a data-plane sum");
}

TEST_F(RoundFixture, RefusesImpossiblePlans) {
  EXPECT_EQ(message_of<ParameterRefused>([&] { Round(plan(5, 1), spec, {}, clock); }),
            "round 5: needs min_updates (1) <= target_updates (5) <= selected devices (4)");
  EXPECT_EQ(message_of<ParameterRefused>([&] { Round(plan(2, 3), spec, {}, clock); }),
            "round 5: needs min_updates (3) <= target_updates (2) <= selected devices (4)");
  RoundPlan repeated = plan(2, 1);
  repeated.selected.push_back("a");
  EXPECT_EQ(message_of<ParameterRefused>([&] { Round(repeated, spec, {}, clock); }),
            "round 5: device 'a' is selected twice");
}

}  // namespace
}  // namespace tn::federated
