// UpdateInbox on its own: who may submit, what a delivery keeps (in memory or spooled, read back
// exactly), the memory bound on submissions in flight, and the round thread's wait.
#include "update_inbox.h"

#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <thread>

#include "proto/model_transfer.h"

namespace {

using tn::server::UpdateInbox;
using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

tn::federated::Model model_of(std::vector<float> values) {
  tn::federated::Model model;
  model.tensors.push_back(tn::federated::copy_tensor(
      "weight", tn::ScalarType::Float, {int64_t(values.size())}, std::as_bytes(std::span(values))));
  return model;
}

struct Inbox {
  tn::federated::Model global = model_of({1, 2, 3});
  tn::federated::ContributionLayout layout{global.spec()};
  std::shared_ptr<UpdateInbox> inbox;

  explicit Inbox(uint64_t memory_bytes, std::chrono::milliseconds lasting = 10s)
      : inbox(std::make_shared<UpdateInbox>(layout, global, tn::proto::ModelChunker(global, "t/0").header(),
                                            std::set<std::string>{"dev-a", "dev-b", "dev-c"},
                                            SteadyClock::now() + lasting,
                                            UpdateInbox::Options{memory_bytes, ""})) {}

  std::unique_ptr<UpdateInbox::Submission> begin(const std::string& device) {
    auto begun = inbox->begin(device);
    if (auto* why = std::get_if<std::string>(&begun)) ADD_FAILURE() << *why;
    return std::move(std::get<std::unique_ptr<UpdateInbox::Submission>>(begun));
  }
  std::string refusal(const std::string& device) {
    auto begun = inbox->begin(device);
    auto* why = std::get_if<std::string>(&begun);
    return why ? *why : "admitted";
  }
  std::vector<double> packed(std::vector<float> values, int64_t examples) {
    std::vector<double> out(layout.elements());
    layout.pack(model_of(std::move(values)), examples, {}, out);
    return out;
  }
  std::vector<double> read(const std::string& device) {
    std::vector<double> out(layout.elements());
    inbox->read(device, 0, out.size(), out.data());
    return out;
  }
};

TEST(UpdateInbox, OnlyTheRoundsGrpcDevicesSubmitAndEachCountsOnce) {
  Inbox round(1 << 20);
  EXPECT_EQ(round.refusal("dev-z"), "device dev-z does not take part in this round over gRPC");
  auto a = round.begin("dev-a");
  EXPECT_EQ(round.refusal("dev-a"), "another SubmitUpdate of device dev-a is in progress");
  EXPECT_EQ(a->deliver(round.packed({4, 5, 6}, 2)), std::nullopt);
  a.reset();
  EXPECT_EQ(round.refusal("dev-a"), "device dev-a's update counts in this round already");
  // A submission that ends without delivering (a broken stream, a refused update) leaves the
  // device free to try again.
  round.begin("dev-b").reset();
  auto b = round.begin("dev-b");
  EXPECT_EQ(round.inbox->close(), std::vector<std::string>{"dev-a"});
  EXPECT_EQ(b->deliver(round.packed({7, 8, 9}, 1)), "the round closed before the update was complete");
  EXPECT_EQ(round.refusal("dev-c"), "the round's deadline has passed");
  EXPECT_EQ(round.read("dev-a"), (std::vector<double>{8, 10, 12, 2}));
  std::vector<double> out(4);
  EXPECT_THROW(round.inbox->read("dev-b", 0, 4, out.data()), std::invalid_argument);
  EXPECT_THROW(round.inbox->read("dev-a", 1, 4, out.data()), std::invalid_argument);
}

TEST(UpdateInbox, ContributionsPastTheMemoryBoundAreSpooledAndReadBackExactly) {
  Inbox round(5 * sizeof(double));  // room for one 4-element contribution in memory
  const std::vector<double> first = round.packed({0.1f, -2.5f, 3e30f}, 3),
                            second = round.packed({1, 2, 3}, 7);
  EXPECT_EQ(round.begin("dev-b")->deliver(first), std::nullopt);
  EXPECT_EQ(round.inbox->spooled_bytes(), 0u);
  EXPECT_EQ(round.begin("dev-a")->deliver(second), std::nullopt);
  EXPECT_EQ(round.inbox->spooled_bytes(), 4 * sizeof(double));
  EXPECT_EQ(round.inbox->close(), (std::vector<std::string>{"dev-a", "dev-b"}));
  EXPECT_EQ(round.read("dev-b"), first);
  EXPECT_EQ(round.read("dev-a"), second);
  std::vector<double> middle(2);
  round.inbox->read("dev-a", 1, 2, middle.data());
  EXPECT_EQ(middle, (std::vector<double>{14, 21}));
}

TEST(UpdateInbox, SubmissionsInFlightWaitForMemoryAndOneAloneIsAlwaysAdmitted) {
  Inbox round(100, 1s);
  auto a = round.begin("dev-a");
  EXPECT_TRUE(a->admit(1000));  // alone: admitted whatever its size
  auto b = round.begin("dev-b");
  std::atomic<bool> admitted{false};
  std::thread waiting([&] { admitted = b->admit(50); });
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(admitted);
  a.reset();  // its memory is free once it ends
  waiting.join();
  EXPECT_TRUE(admitted);
  auto c = round.begin("dev-c");
  EXPECT_FALSE(c->admit(60));  // 50 + 60 > 100 until the deadline
}

TEST(UpdateInbox, TheWaitEndsOnceEveryDeviceDeliveredOrWasGivenUp) {
  Inbox round(1 << 20);
  EXPECT_EQ(round.begin("dev-a")->deliver(round.packed({1, 1, 1}, 1)), std::nullopt);
  auto b = round.begin("dev-b");
  std::vector<std::string> given_up;
  const auto start = SteadyClock::now();
  std::thread delivering([&] {
    std::this_thread::sleep_for(200ms);
    EXPECT_EQ(b->deliver(round.packed({2, 2, 2}, 1)), std::nullopt);
  });
  round.inbox->wait([](const std::string& device) { return device == "dev-c"; },
                    [&](const std::string& device) { given_up.push_back(device); }, 20ms);
  delivering.join();
  EXPECT_LT(SteadyClock::now() - start, 5s);  // not the 10 s deadline
  EXPECT_EQ(given_up, std::vector<std::string>{"dev-c"});
  EXPECT_EQ(round.refusal("dev-c"),
            "device dev-c was left out of the round: no heartbeat within the liveness window");
  EXPECT_EQ(round.inbox->close(), (std::vector<std::string>{"dev-a", "dev-b"}));
}

TEST(UpdateInbox, AnUpdateOfAnotherTensorTableIsNamed) {
  Inbox round(1 << 20);
  EXPECT_EQ(round.inbox->table_mismatch(tn::proto::ModelChunker(round.global, "x").header()), std::nullopt);
  tn::federated::Model other = model_of({1, 2, 3, 4});
  EXPECT_EQ(
      round.inbox->table_mismatch(tn::proto::ModelChunker(other, "x").header()),
      "the update's tensor 0 is 'weight' float32 [4], the round's model has 'weight' float32 [3] there");
  other.tensors.push_back(other.tensors.front());
  other.tensors.back().name = "bias";
  EXPECT_EQ(round.inbox->table_mismatch(tn::proto::ModelChunker(other, "x").header()),
            "the update has 2 tensors, the round's model 1");
}

}  // namespace
