// The task: rounds in sequence, retries of abandoned rounds, checkpoints and refusals.
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

#include "federated/contribution.h"
#include "federated/round.h"
#include "federated/strategy.h"
#include "federated_test_util.h"

namespace tn::federated {
namespace {

using namespace std::chrono_literals;

struct TaskFixture : testing::Test {
  ModelSpec spec = ModelSpec({{"w", ScalarType::Float, {3}}, {"steps", ScalarType::Long, {}}});
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();

  TaskConfig config(size_t max_retries = 2) const {
    TaskConfig config;
    config.name = "keyboard";
    config.selection = {0.5, 2, 4, 1.5};
    config.round_timeout = 60s;
    config.min_updates = 2;
    config.max_retries = max_retries;
    config.seed = 11;
    return config;
  }
  Model initial() const {
    return {{tensor_from(spec.tensors()[0], {0, 0, 0}), tensor_from(spec.tensors()[1], {5})}};
  }
  // The update a selected device sends for the task's open round.
  Update update_for(const Task& task, const DeviceId& device, std::vector<long double> values,
                    int64_t examples) const {
    json config = task.fit_config();
    return {device,
            config["round_id"].get<uint64_t>(),
            config["model_version"].get<uint64_t>(),
            examples,
            {{tensor_from(spec.tensors()[0], values), tensor_from(spec.tensors()[1], {99})}}};
  }
};

TEST_F(TaskFixture, RunsRoundsAndCountsVersions) {
  Task task(config(), initial(), make_strategy("fedprox", {{"proximal_mu", 0.01}}), clock);
  Selection selection = task.start_round(devices(6));
  ASSERT_TRUE(selection.ok());
  EXPECT_EQ(selection.target, 3u);
  EXPECT_EQ(selection.devices.size(), 5u);  // ceil(3 * 1.5), out of 6
  EXPECT_EQ(task.fit_config(), (json{{"proximal_mu", 0.01}, {"round_id", 1}, {"model_version", 0}}));
  task.submit(update_for(task, selection.devices[2], {1, 2, 3}, 1));
  task.submit(update_for(task, selection.devices[0], {3, 2, 1}, 3));
  EXPECT_FALSE(task.round_due());
  task.submit(update_for(task, selection.devices[1], {2, 2, 2}, 4));
  EXPECT_TRUE(task.round_due());  // the target of 3 arrived before the deadline
  RoundOutcome outcome = task.close_round();
  EXPECT_EQ(outcome.status, RoundStatus::Completed);
  EXPECT_EQ(outcome.contributors,
            (std::vector<DeviceId>{selection.devices[0], selection.devices[1], selection.devices[2]}));
  EXPECT_EQ(outcome.missing, (std::vector<DeviceId>{selection.devices[3], selection.devices[4]}));
  EXPECT_EQ(outcome.model_version, 1u);
  EXPECT_EQ(task.model_version(), 1u);
  // (3*3 + 4*2 + 1*1) / 8 etc., exact in float32; the counter keeps the global value.
  const NamedTensor& w = task.global_model().tensors[0];
  EXPECT_EQ(read_as<float>(w.data.get()), 18.0f / 8);
  EXPECT_EQ(read_as<float>(w.data.get() + 4), 2.0f);
  EXPECT_EQ(read_as<float>(w.data.get() + 8), 14.0f / 8);
  EXPECT_EQ(read_as<int64_t>(task.global_model().tensors[1].data.get()), 5);
  EXPECT_EQ(message_of<StateError>([&] { task.close_round(); }), "task 'keyboard': no round is open");

  ASSERT_TRUE(task.start_round(devices(6)).ok());
  EXPECT_EQ(task.fit_config()["round_id"], 2);
  EXPECT_EQ(task.fit_config()["model_version"], 1);
  EXPECT_EQ(message_of<StateError>([&] { task.start_round(devices(6)); }),
            "task 'keyboard': round 2 is open");
}

TEST_F(TaskFixture, OpensNoRoundWhenTooFewDevicesCheckedIn) {
  Task task(config(), initial(), make_strategy("fedavg"), clock);
  Selection selection = task.start_round({"only-one"});
  EXPECT_FALSE(selection.ok());
  EXPECT_EQ(selection.shortfall, "1 devices available, at least 2 are needed");
  EXPECT_EQ(task.current_round(), nullptr);
  EXPECT_EQ(message_of<UpdateRefused>([&] {
              task.submit({"only-one", 1, 0, 1, initial()});
            }),
            "update from 'only-one' for round 1: task 'keyboard' has no open round");
}

TEST_F(TaskFixture, RetriesAbandonedRoundsThenFailsByName) {
  Task task(config(2), initial(), make_strategy("fedavg"), clock);
  // One completed round, then abandonments: the retry counter starts afresh after a completion.
  Selection first = task.start_round(devices(4));
  task.submit(update_for(task, first.devices[0], {1, 1, 1}, 1));
  task.submit(update_for(task, first.devices[1], {1, 1, 1}, 1));
  ASSERT_EQ(task.close_round().status, RoundStatus::Completed);

  Update from_abandoned;
  for (size_t attempt = 1; attempt <= 2; ++attempt) {
    Selection selection = task.start_round(devices(4));
    from_abandoned = update_for(task, selection.devices[0], {1, 1, 1}, 1);
    task.submit(from_abandoned);
    clock->advance(61s);
    EXPECT_TRUE(task.round_due());
    EXPECT_EQ(reason_of([&] {
                task.submit(update_for(task, selection.devices[1], {1, 1, 1}, 1));
              }),
              Reason::RoundClosed);
    RoundOutcome outcome = task.close_round();
    EXPECT_EQ(outcome.status, RoundStatus::Abandoned);
    EXPECT_EQ(outcome.reason, "1 of the 2 updates required arrived");
    EXPECT_EQ(outcome.abandoned_in_a_row, attempt);
    EXPECT_EQ(outcome.model_version, 1u);
  }
  // The third attempt has a fresh round id, so the abandoned attempt's update cannot count.
  Selection third = task.start_round(devices(4));
  EXPECT_EQ(task.fit_config()["round_id"], 4);
  EXPECT_EQ(task.fit_config()["model_version"], 1);
  from_abandoned.device_id = third.devices[0];
  EXPECT_EQ(message_of<UpdateRefused>([&] { task.submit(from_abandoned); }),
            "update from '" + third.devices[0] +
                "': round 3 is over, the current round is 4 (a late or replayed update)");
  clock->advance(61s);
  std::string failure =
      "task 'keyboard' failed: the round training model version 1 was abandoned 3 times in a row "
      "(max_retries 2); last, round 4: 0 of the 2 updates required arrived";
  EXPECT_EQ(message_of<TaskFailed>([&] { task.close_round(); }), failure);
  EXPECT_TRUE(task.failed());
  EXPECT_EQ(message_of<TaskFailed>([&] { task.start_round(devices(4)); }), failure);
  // A failed task stays failed across a restart.
  Task restored = Task::restore(config(2), task.checkpoint(), clock);
  EXPECT_EQ(message_of<TaskFailed>([&] { restored.start_round(devices(4)); }), failure);
}

TEST_F(TaskFixture, AnAggregateThatFailsAbandonsTheRound) {
  ModelSpec half({{"w", ScalarType::Half, {1}}});
  Model global{{tensor_from(half.tensors()[0], {0})}};
  TaskConfig settings = config(0);
  Task task(settings, global, make_strategy("fedavgm", {{"server_learning_rate", 3.0}}), clock);
  Selection selection = task.start_round(devices(2));
  for (const DeviceId& device : selection.devices)
    task.submit({device, 1, 0, 1, {{tensor_from(half.tensors()[0], {30000})}}});
  EXPECT_EQ(message_of<TaskFailed>([&] { task.close_round(); }),
            "task 'keyboard' failed: the round training model version 0 was abandoned 1 times in a row "
            "(max_retries "
            "0); last, round 1: fedavgm: tensor 'w' element 0 (index [0]) is not finite in float16 after "
            "aggregation; "
            "the model is left unchanged");
  EXPECT_EQ(task.model_version(), 0u);
}

TEST_F(TaskFixture, ClosesFromAWeightedSum) {
  Task task(config(), initial(), make_strategy("fedavg"), clock);
  Selection selection = task.start_round(devices(4));
  // The data plane's summed contributions [n * w ..., n], read a piece at a time.
  const std::vector<double> sum = {4, 8, 12, 4};
  WeightedSumReader weighted =
      ContributionLayout(initial().spec()).weighted_sum_reader([&](size_t first, std::span<double> out) {
        std::copy_n(sum.begin() + std::ptrdiff_t(first), out.size(), out.begin());
      });
  EXPECT_EQ(weighted.total_weight, 4);
  RoundOutcome outcome =
      task.close_round_from_weighted_sum(weighted, {selection.devices[1], selection.devices[0]});
  EXPECT_EQ(outcome.status, RoundStatus::Completed);
  EXPECT_EQ(outcome.contributors, (std::vector<DeviceId>{selection.devices[0], selection.devices[1]}));
  EXPECT_EQ(read_as<float>(task.global_model().tensors[0].data.get() + 8), 3.0f);

  Task median(config(), initial(), make_strategy("fedmedian"), clock);
  median.start_round(devices(4));
  EXPECT_EQ(
      message_of<Unsupported>([&] { median.close_round_from_weighted_sum(weighted, {}); }),
      "task 'keyboard': fedmedian cannot aggregate from a weighted sum, it needs the individual updates");
}

TEST_F(TaskFixture, ClosesFromTheIndividualUpdates) {
  // The data plane's Values contributions [w ..., n], kept apart and read a range at a time.
  const std::vector<std::vector<double>> kept = {{1, 9, -4, 100}, {3, 2, -5, 1}, {2, 5, 7, 7}};
  auto reader_of = [&](const ContributionLayout& layout, size_t count) {
    return layout.updates_reader(count, [&](size_t update, size_t first, std::span<double> out) {
      std::copy_n(kept[update].begin() + std::ptrdiff_t(first), out.size(), out.begin());
    });
  };
  const ContributionLayout layout(initial().spec(), ContributionKind::Values);
  TaskConfig three = config();
  three.min_updates = 3;
  three.selection.min_devices = 3;
  Task task(three, initial(), make_strategy("fedmedian"), clock);
  Selection selection = task.start_round(devices(4));
  RoundOutcome outcome = task.close_round_from_updates(
      reader_of(layout, 3), {selection.devices[2], selection.devices[0], selection.devices[1]});
  EXPECT_EQ(outcome.status, RoundStatus::Completed);
  for (size_t j = 0; j < 3; ++j)  // the median of each coordinate; example counts play no part
    EXPECT_EQ(read_as<float>(task.global_model().tensors[0].data.get() + 4 * j),
              (std::array<float, 3>{2, 5, -4})[j]);
  EXPECT_EQ(read_as<int64_t>(task.global_model().tensors[1].data.get()), 5);

  // Below Krum's n >= 2f + 3 the task never opens (min_updates), so a round cannot get there
  // with fewer; a reader that fails abandons the round with its reason.
  EXPECT_NE(message_of<ParameterRefused>([&] {
              Task(config(), initial(), make_strategy("krum"), clock);
            }).find("min_updates 2 is below the 3 that krum needs"),
            std::string::npos);
  Task krum(three, initial(), make_strategy("krum"), clock);
  selection = krum.start_round(devices(4));
  UpdatesReader failing{3, [](size_t, const NamedTensor&, int64_t, std::span<double>) -> void {
                          throw Refused("the hub could not read the contributions back: spool gone");
                        }};
  outcome = krum.close_round_from_updates(failing,
                                          {selection.devices[0], selection.devices[1], selection.devices[2]});
  EXPECT_EQ(outcome.status, RoundStatus::Abandoned);
  EXPECT_EQ(outcome.reason, "the hub could not read the contributions back: spool gone");
  EXPECT_EQ(message_of<Refused>([&] {
              krum.start_round(devices(4));
              krum.close_round_from_updates(reader_of(layout, 3), {selection.devices[0]});
            }),
            "task 'keyboard': the updates reader holds 3 updates for 1 contributors");
  EXPECT_EQ(message_of<Unsupported>([&] {
              Task mean(config(), initial(), make_strategy("fedavg"), clock);
              mean.start_round(devices(4));
              mean.close_round_from_updates(reader_of(layout, 2), {});
            }),
            "task 'keyboard': fedavg aggregates from a weighted sum, not from the individual updates");
}

TEST_F(TaskFixture, ResumesFromACheckpointExactly) {
  // Two tasks side by side: one runs on, the other is checkpointed after each round and
  // replaced by a restored copy, as a coordinator killed between rounds would be.
  auto updates_for = [&](const Task& task, const Selection& selection, int round) {
    std::vector<Update> updates;
    for (size_t i = 0; i < 2; ++i)
      updates.push_back(
          update_for(task, selection.devices[i], {0.5L + round, -1.25L * (i + 1), 3.0L / 8}, 7 + int(i)));
    return updates;
  };
  Task steady(config(), initial(), make_strategy("fedadam", {{"tau", 0.01}}), clock);
  std::optional<Task> restarted(std::in_place, config(), initial(), make_strategy("fedadam", {{"tau", 0.01}}),
                                clock);
  for (int round = 0; round < 3; ++round) {
    Selection a = steady.start_round(devices(5)), b = restarted->start_round(devices(5));
    ASSERT_EQ(a.devices, b.devices);
    for (Update& update : updates_for(steady, a, round)) steady.submit(std::move(update));
    for (Update& update : updates_for(*restarted, b, round)) restarted->submit(std::move(update));
    clock->advance(61s);
    steady.close_round();
    restarted->close_round();
    TaskCheckpoint saved = restarted->checkpoint();
    TaskCheckpoint loaded{json::parse(saved.meta.dump()),
                          saved.global_model,
                          {json::parse(saved.strategy.meta.dump()), saved.strategy.tensors}};
    restarted.reset();
    restarted.emplace(Task::restore(config(), loaded, clock));
    EXPECT_TRUE(same_bytes(steady.global_model(), restarted->global_model()));
    EXPECT_EQ(restarted->model_version(), steady.model_version());
  }
  // A round open at the checkpoint is lost, and its id is not reused.
  Selection open = restarted->start_round(devices(5));
  Update late = update_for(*restarted, open.devices[0], {1, 1, 1}, 1);
  Task after_crash = Task::restore(config(), restarted->checkpoint(), clock);
  after_crash.start_round(devices(5));
  EXPECT_EQ(after_crash.fit_config()["round_id"], late.round_id + 1);
  EXPECT_EQ(message_of<ParameterRefused>([&] {
              TaskConfig other = config();
              other.name = "camera";
              Task::restore(other, steady.checkpoint(), clock);
            }),
            "task 'camera': the checkpoint belongs to task \"keyboard\"");
}

TEST_F(TaskFixture, RefusesConfigurationsThatCouldNeverComplete) {
  TaskConfig krum_config = config();
  EXPECT_EQ(message_of<ParameterRefused>([&] {
              Task(krum_config, initial(), make_strategy("krum", {{"f", 1}}), clock);
            }),
            "task 'keyboard': min_updates 2 is below the 5 that krum needs");
  TaskConfig too_few = config();
  too_few.min_updates = 3;
  EXPECT_EQ(
      message_of<ParameterRefused>([&] { Task(too_few, initial(), make_strategy("fedavg"), clock); }),
      "task 'keyboard': selection.min_devices 2 is below min_updates 3, so a round could never complete");
  TaskConfig unnamed = config();
  unnamed.name.clear();
  EXPECT_EQ(message_of<ParameterRefused>([&] { Task(unnamed, initial(), make_strategy("fedavg"), clock); }),
            "task: the name is empty");
  EXPECT_EQ(message_of<ParameterRefused>([&] {
              Task(config(), initial(), make_strategy("fedavg", {{"fit_config", {{"round_id", 1}}}}), clock);
            }),
            "task 'keyboard': the strategy's fit config may not set 'round_id', the task sends it");
}

}  // namespace
}  // namespace tn::federated
