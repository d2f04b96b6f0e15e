// EventLog over a real state directory: sequence numbers go on across a reopening, a follower
// replays the stored events after any number (of one task or all) and then follows new ones.
#include "event_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace {

namespace v1 = ::torchnative::federated::v1;
using tn::server::EventLog;
using tn::server::GuardedState;
using tn::server::StateStore;
using namespace std::chrono_literals;

std::vector<uint64_t> sequences(const std::vector<v1::Event>& events) {
  std::vector<uint64_t> numbers;
  for (const v1::Event& event : events) numbers.push_back(event.sequence());
  return numbers;
}

TEST(EventLog, SequencesGoOnAcrossRestartsAndFollowersReplayFromAnyNumber) {
  const auto directory =
      std::filesystem::temp_directory_path() / ("tn_event_log_" + std::to_string(::getpid()));
  {
    GuardedState state(StateStore::open(directory));
    EventLog events(state);
    events.publish(v1::EVENT_KIND_TASK_CREATED, "t1", 0, "", "fedavg");
    events.publish({{v1::EVENT_KIND_ROUND_STARTED, "t1", 1, "", "2 devices"},
                    {v1::EVENT_KIND_DEVICE_SELECTED, "t1", 1, "dev-a", ""},
                    {v1::EVENT_KIND_TASK_CREATED, "t2", 0, "", "krum"}});
    EXPECT_EQ(events.latest(), 4u);
  }
  GuardedState state(StateStore::open(directory));
  EventLog events(state);
  EXPECT_EQ(events.latest(), 4u);

  uint64_t cursor = 0;  // everything stored, before the window has anything
  const std::vector<v1::Event> replayed = events.follow(cursor, "", 0ms);
  EXPECT_EQ(sequences(replayed), (std::vector<uint64_t>{1, 2, 3, 4}));
  EXPECT_EQ(replayed[2].kind(), v1::EVENT_KIND_DEVICE_SELECTED);
  EXPECT_EQ(replayed[2].device_id(), "dev-a");
  EXPECT_EQ(replayed[1].message(), "2 devices");
  EXPECT_EQ(cursor, 4u);

  events.publish(v1::EVENT_KIND_TASK_STOPPED, "t1", 0, "", "stopped");
  EXPECT_EQ(sequences(events.follow(cursor, "", 0ms)), std::vector<uint64_t>{5});  // from the window

  uint64_t task_cursor = 1;  // behind the window: one task's, from the store (5 is stored too)
  EXPECT_EQ(sequences(events.follow(task_cursor, "t1", 0ms)), (std::vector<uint64_t>{2, 3, 5}));
  EXPECT_TRUE(events.follow(task_cursor, "t1", 0ms).empty());
  events.publish(v1::EVENT_KIND_TASK_FINISHED, "t1", 0, "", "");
  EXPECT_EQ(sequences(events.follow(task_cursor, "t1", 0ms)), std::vector<uint64_t>{6});

  uint64_t ahead = 9;  // past the latest: waits for sequence 10 on
  events.publish(v1::EVENT_KIND_TASK_CREATED, "t3", 0, "", "");
  EXPECT_TRUE(events.follow(ahead, "", 0ms).empty());
  EXPECT_EQ(ahead, 9u);
  std::filesystem::remove_all(directory);
}

}  // namespace
