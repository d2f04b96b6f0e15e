// AdminService's task views (ListTasks, GetTask, ListRounds), against a real Coordinator started
// on a state directory written beforehand with the StateStore: one completed round, then one
// left open as a crash leaves it.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "proto/signing.h"
#include "round_params.h"
#include "server/coordinator.h"
#include "server/hex.h"
#include "state_store_fixture.h"
#include "torchnative/federated/v1/admin.grpc.pb.h"

namespace {

namespace v1 = ::torchnative::federated::v1;
using namespace tn::server::state_test;
using tn::proto::SigningKey;

constexpr int64_t kRoundOneMs = 4'000;  // how long the completed round took, by the store's clock

class AdminTaskViews : public StateStoreTest {
 protected:
  void SetUp() override {
    StateStoreTest::SetUp();
    {
      StateStore store = open();
      populate(store);
    }
    tn::server::CoordinatorConfig config;
    config.listen = "127.0.0.1:0";
    config.http_listen = "";
    config.state_directory = directory_;
    config.admin_public_keys = {admin_.public_key()};
    coordinator_ = std::make_unique<tn::server::Coordinator>(config);
    admin_stub_ = v1::AdminService::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(coordinator_->grpc_port()), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    coordinator_.reset();
    StateStoreTest::TearDown();
  }

  virtual void populate(StateStore& store) { populate_with_a_resumable_task(store); }

  // Devices a, b and c; task "mnist" (2 devices a round, 5 rounds planned): round 1 completed in
  // kRoundOneMs, round 2 open when the store closes.
  void populate_with_a_resumable_task(StateStore& store) {
    for (int i = 0; i < 3; ++i) store.register_device(std::string(1, char('a' + i)), public_key(i), {});
    tn::server::RoundParams params;
    params.devices_per_round = 2;
    params.min_updates = 1;
    params.round_timeout = std::chrono::minutes(1);
    TaskDefinition task = definition("mnist");
    task.round_params = params.to_json();
    store.create_task(task, small_model());
    store.begin_round("mnist", {1, 0, {"a", "b"}, now_ms_ + 60'000});
    now_ms_ += kRoundOneMs;
    store.close_round("mnist", 1, completed({"a"}, {"b"}, small_model(2), 1));
    store.begin_round("mnist", {2, 1, {"a", "c"}, now_ms_ + 60'000});
    store.append_events({{1, now_ms_, "EVENT_KIND_TASK_CREATED", "mnist", 0, "", "fedavg"},
                         {2, now_ms_, "EVENT_KIND_ROUND_STARTED", "mnist", 2, "", "2 devices"}});
  }

  // `payload` in a request signed by the administrator for `method`.
  template <typename Request>
  Request signed_request(const char* method, const google::protobuf::Message& payload) {
    Request request;
    payload.SerializeToString(request.mutable_payload());
    const std::string path = "/" + std::string(v1::AdminService::service_full_name()) + "/" + method;
    *request.mutable_auth() =
        tn::proto::sign_request(path, tn::server::to_hex(admin_.public_key()), request.payload(), admin_);
    return request;
  }

  template <typename Request, typename Response>
  grpc::Status call(const char* method, const google::protobuf::Message& payload,
                    grpc::Status (v1::AdminService::Stub::*rpc)(grpc::ClientContext*, const Request&,
                                                                Response*),
                    Response& response) {
    grpc::ClientContext context;
    return (admin_stub_.get()->*rpc)(&context, signed_request<Request>(method, payload), &response);
  }

  v1::GetTaskResponse get_task(const std::string& id) {
    v1::GetTaskPayload payload;
    payload.set_task_id(id);
    v1::GetTaskResponse response;
    grpc::Status status = call("GetTask", payload, &v1::AdminService::Stub::GetTask, response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  // GetTask once the resumed task's loop waits for devices (its first look at the board may
  // come after the coordinator starts serving).
  v1::GetTaskResponse get_task_once_waiting(const std::string& id) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    v1::GetTaskResponse response = get_task(id);
    while (response.task().current_round().state() != v1::ROUND_STATE_WAITING_FOR_DEVICES &&
           std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      response = get_task(id);
    }
    return response;
  }

  // GetTask once the task's loop has ended it (or after 30 s, still running).
  v1::GetTaskResponse get_task_once_ended(const std::string& id) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    v1::GetTaskResponse response = get_task(id);
    while (response.task().state() == v1::TASK_STATE_RUNNING && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      response = get_task(id);
    }
    return response;
  }

  SigningKey admin_ = SigningKey::generate();
  std::unique_ptr<tn::server::Coordinator> coordinator_;
  std::unique_ptr<v1::AdminService::Stub> admin_stub_;
};

TEST_F(AdminTaskViews, GetTaskSaysWhereTheTaskStands) {
  const v1::GetTaskResponse response = get_task_once_waiting("mnist");
  const v1::TaskInfo& task = response.task();
  EXPECT_EQ(task.task_id(), "mnist");
  EXPECT_EQ(task.strategy(), "fedavg");
  EXPECT_EQ(task.state(), v1::TASK_STATE_RUNNING);  // resumed, waiting for devices
  EXPECT_EQ(task.rounds_planned(), 5u);
  EXPECT_EQ(task.rounds_completed(), 1u);
  EXPECT_EQ(task.devices_per_round(), 2u);
  EXPECT_EQ(task.latest_model_version(), "mnist/1");
  EXPECT_EQ(task.mean_completed_round_ms(), uint64_t(kRoundOneMs));
  EXPECT_FALSE(task.has_privacy());  // a task without central DP
  // No device checks in: the task waits to start round 3, which is not recorded yet.
  const v1::RoundInfo& current = task.current_round();
  EXPECT_EQ(current.state(), v1::ROUND_STATE_WAITING_FOR_DEVICES);
  EXPECT_EQ(current.round_id(), 3u);
  EXPECT_EQ(current.input_model_version(), "mnist/1");
  EXPECT_EQ(current.selected_devices_size(), 0);
  EXPECT_GT(current.started_unix_ms(), 0u);

  ASSERT_EQ(response.rounds_size(), 2);
  EXPECT_EQ(std::vector<std::string>(response.rounds(1).selected_devices().begin(),
                                     response.rounds(1).selected_devices().end()),
            (std::vector<std::string>{"a", "c"}));
  const v1::RoundInfo& first = response.rounds(0);
  EXPECT_EQ(first.state(), v1::ROUND_STATE_COMPLETED);
  EXPECT_EQ(first.output_model_version(), "mnist/1");
  EXPECT_EQ(first.contributors_size(), 1);
  EXPECT_EQ(first.missing_size(), 1);
  EXPECT_EQ(first.closed_unix_ms() - first.started_unix_ms(), uint64_t(kRoundOneMs));
}

// The round the restart cut off says so, and the task goes on under the next round number.
TEST_F(AdminTaskViews, ARoundCutOffByARestartIsInterrupted) {
  const v1::GetTaskResponse response = get_task_once_waiting("mnist");
  ASSERT_EQ(response.rounds_size(), 2);
  EXPECT_EQ(response.rounds(1).state(), v1::ROUND_STATE_INTERRUPTED);
  EXPECT_EQ(response.rounds(1).output_model_version(), "");
  EXPECT_EQ(response.rounds(1).contributors_size(), 0);
  EXPECT_EQ(response.task().current_round().round_id(), 3u);
  EXPECT_EQ(response.task().state(), v1::TASK_STATE_RUNNING);
}

// A stop wakes a task loop that waits for devices: the task is stopped at once, not when the
// loop next looks (up to 250 ms later before: this test, catching the loop at the start of its
// wait, found it stopped after 251-254 ms).
TEST_F(AdminTaskViews, StopTaskEndsATaskWaitingForDevicesAtOnce) {
  ASSERT_EQ(get_task_once_waiting("mnist").task().current_round().state(),
            v1::ROUND_STATE_WAITING_FOR_DEVICES);
  v1::StopTaskPayload payload;
  payload.set_task_id("mnist");
  payload.set_reason("enough");
  v1::StopTaskResponse stopped;
  const auto asked = std::chrono::steady_clock::now();
  const grpc::Status status = call("StopTask", payload, &v1::AdminService::Stub::StopTask, stopped);
  ASSERT_TRUE(status.ok()) << status.error_message();
  v1::GetTaskResponse response = get_task("mnist");
  while (response.task().state() == v1::TASK_STATE_RUNNING &&
         std::chrono::steady_clock::now() - asked < std::chrono::seconds(5)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    response = get_task("mnist");
  }
  const auto took = std::chrono::steady_clock::now() - asked;
  EXPECT_EQ(response.task().state(), v1::TASK_STATE_STOPPED);
  EXPECT_EQ(response.task().state_reason(), "enough");
  EXPECT_LT(took, std::chrono::milliseconds(100))
      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
}

TEST_F(AdminTaskViews, ListTasksListsEveryTaskAndGetTaskRefusesAnUnknownOne) {
  v1::ListTasksResponse listed;
  ASSERT_TRUE(call("ListTasks", v1::ListTasksPayload(), &v1::AdminService::Stub::ListTasks, listed).ok());
  ASSERT_EQ(listed.tasks_size(), 1);
  EXPECT_EQ(listed.tasks(0).task_id(), "mnist");
  EXPECT_EQ(listed.tasks(0).rounds_completed(), 1u);

  v1::GetTaskPayload payload;
  payload.set_task_id("nope");
  v1::GetTaskResponse response;
  const grpc::Status status = call("GetTask", payload, &v1::AdminService::Stub::GetTask, response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(status.error_message().find("no task 'nope'"), std::string::npos) << status.error_message();
}

// StreamEvents with after_sequence replays what the store kept from before the start.
TEST_F(AdminTaskViews, StreamEventsReplaysStoredEventsAfterASequence) {
  v1::StreamEventsPayload payload;
  payload.set_after_sequence(1);
  grpc::ClientContext context;
  auto reader =
      admin_stub_->StreamEvents(&context, signed_request<v1::StreamEventsRequest>("StreamEvents", payload));
  v1::Event event;
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.sequence(), 2u);
  EXPECT_EQ(event.kind(), v1::EVENT_KIND_ROUND_STARTED);
  EXPECT_EQ(event.round_id(), 2u);
  EXPECT_EQ(event.message(), "2 devices");
  context.TryCancel();
  reader->Finish();
}

// Two central DP tasks written to the store with completed rounds: "dp-going" (2 rounds of a
// budget that allows many more) and "dp-spent" (3 rounds, whose budget a fourth would pass).
class CentralDpTaskViews : public AdminTaskViews {
 protected:
  void populate(StateStore& store) override {
    for (int i = 0; i < 3; ++i) store.register_device(std::string(1, char('a' + i)), public_key(i), {});
    add_dp_task(store, "dp-going", 1e6, 2);
    add_dp_task(store, "dp-spent", 2.3, 3);
  }

  void add_dp_task(StateStore& store, const std::string& id, double epsilon_budget, uint64_t rounds) {
    tn::server::RoundParams params;
    params.devices_per_round = 2;
    params.min_available_devices = 2;
    params.min_updates = 1;
    params.round_timeout = std::chrono::minutes(1);
    params.central_dp = tn::server::CentralDpParams{4.0, 1.0, 1e-5, epsilon_budget, std::nullopt};
    TaskDefinition task = definition(id);
    task.round_params = params.to_json();
    task.rounds_planned = 10;
    store.create_task(task, small_model());
    for (uint64_t round = 1; round <= rounds; ++round) {
      store.begin_round(id, {round, round - 1, {"a", "b"}, now_ms_ + 60'000});
      store.close_round(id, round, completed({"a", "b"}, {}, small_model(float(round + 1)), round));
    }
  }
};

// Epsilon at delta 1e-5 after R rounds of the Gaussian mechanism at z 4: min over the orders of
// R alpha / 32 + log(1e5) / (alpha - 1), worked out by hand over TF Privacy's usual orders: for
// R = 2 the best is alpha 15 (14 and 16 give 1.7606 and 1.7675), for R = 3 alpha 12 (11 and 13
// give 2.1825 and 2.1782); R = 4 gives 2.524 (alpha 10.6), past the budget 2.3.
const double kEpsilonTwoRounds = 2 * 15 / 32.0 + std::log(1e5) / 14;
const double kEpsilonThreeRounds = 3 * 12 / 32.0 + std::log(1e5) / 11;

// What GetTask says of a task (central or distributed DP alike) charged two rounds at z 4, still
// running with a budget it is far from.
void expect_two_rounds_charged(const v1::TaskInfo& task) {
  EXPECT_EQ(task.state(), v1::TASK_STATE_RUNNING);
  EXPECT_NEAR(task.privacy().epsilon(), kEpsilonTwoRounds, 1e-12);
  EXPECT_EQ(task.privacy().order(), 15.0);
  EXPECT_EQ(task.privacy().rounds_charged(), 2u);
  EXPECT_EQ(task.privacy().delta(), 1e-5);
  EXPECT_EQ(task.privacy().epsilon_budget(), 1e6);
}

// ... and of one whose fourth round would pass its budget of 2.3: stopped after three, naming it.
void expect_stopped_before_round_four(const v1::TaskInfo& task) {
  EXPECT_EQ(task.state(), v1::TASK_STATE_STOPPED);
  EXPECT_NE(task.state_reason().find("the privacy budget: round 4 would take epsilon from 2.17"),
            std::string::npos)
      << task.state_reason();
  EXPECT_NE(task.state_reason().find("past the budget 2.3"), std::string::npos) << task.state_reason();
  EXPECT_NEAR(task.privacy().epsilon(), kEpsilonThreeRounds, 1e-12);
  EXPECT_EQ(task.rounds_completed(), 3u);
}

TEST_F(CentralDpTaskViews, GetTaskReportsTheAccountantsEpsilonForTheCompletedRounds) {
  expect_two_rounds_charged(get_task_once_waiting("dp-going").task());
}

TEST_F(CentralDpTaskViews, ATaskWhoseNextRoundWouldPassItsBudgetStopsSayingSo) {
  expect_stopped_before_round_four(get_task_once_ended("dp-spent").task());
}

// A secure aggregation task written to the store as CreateTask would write it (its round
// parameters from a CreateTaskHeader), on a coordinator started with no device checked in: the
// task runs and waits for its devices.
class SecureAggregationTaskViews : public AdminTaskViews {
 protected:
  void populate(StateStore& store) override {
    for (int i = 0; i < 3; ++i) store.register_device(std::string(1, char('a' + i)), public_key(i), {});
    v1::CreateTaskHeader header;
    header.set_strategy("fedavg");
    header.set_rounds(5);
    header.mutable_selection()->set_devices_per_round(3);
    header.set_min_available_devices(3);
    header.set_min_updates(2);
    header.set_round_timeout_ms(60'000);
    header.mutable_secure_aggregation()->set_clip_range(1.0);
    header.mutable_secure_aggregation()->set_max_weight(10);
    TaskDefinition task = definition("secure");
    task.round_params = tn::server::RoundParams::from_header(header, "secure").to_json();
    store.create_task(task, small_model());
  }
};

TEST_F(SecureAggregationTaskViews, ASecureTaskRunsAndWaitsForItsDevices) {
  const v1::TaskInfo task = get_task_once_waiting("secure").task();
  EXPECT_EQ(task.state(), v1::TASK_STATE_RUNNING);
  EXPECT_EQ(task.current_round().state(), v1::ROUND_STATE_WAITING_FOR_DEVICES);
  EXPECT_EQ(task.current_round().round_id(), 1u);
  EXPECT_EQ(task.rounds_completed(), 0u);
}

// Two distributed DP tasks written to the store as CreateTask writes them (round parameters from
// a CreateTaskHeader, the noise planned for the 4-coordinate model), with completed secure rounds:
// "ddp-going" (2 rounds, a budget of 1e6) and "ddp-spent" (3 rounds, budget 2.3). The calibration
// makes each share's variance exact: step 2^-10 (1,024 levels of a range 1), C 1, d 4, so the
// sensitivity is 1024 + 2 = 1026 quantised units and a share (4 x 1026)^2 / 2 = 8,421,408, an
// integer the sampler holds as it is; min_updates 2 shares then carry standard deviation
// 4 x 1026, the multiplier 4 exactly, and the epsilons are central DP's above at z 4.
class DistributedDpTaskViews : public AdminTaskViews {
 protected:
  void populate(StateStore& store) override {
    for (int i = 0; i < 3; ++i) store.register_device(std::string(1, char('a' + i)), public_key(i), {});
    add_distributed_dp_task(store, "ddp-going", 1e6, 2);
    add_distributed_dp_task(store, "ddp-spent", 2.3, 3);
  }

  void add_distributed_dp_task(StateStore& store, const std::string& id, double epsilon_budget,
                               uint64_t rounds) {
    v1::CreateTaskHeader header;
    header.set_strategy("fedavg");
    header.set_rounds(10);
    header.mutable_selection()->set_devices_per_round(3);
    header.set_min_available_devices(3);
    header.set_min_updates(2);
    header.set_round_timeout_ms(60'000);
    v1::SecureAggregation& secure = *header.mutable_secure_aggregation();
    secure.set_clip_range(1.0);
    secure.set_levels(1024);
    secure.set_max_weight(1);
    v1::DistributedDp& dp = *secure.mutable_distributed_dp();
    dp.set_noise_multiplier(4);
    dp.set_clip_norm(1);
    dp.set_delta(1e-5);
    dp.set_epsilon_budget(epsilon_budget);
    tn::server::RoundParams params = tn::server::RoundParams::from_header(header, id);
    params.secure_aggregation->plan_noise(4, params.min_updates);  // as CreateTask does
    TaskDefinition task = definition(id);
    task.round_params = params.to_json();
    task.rounds_planned = 10;
    store.create_task(task, small_model());
    for (uint64_t round = 1; round <= rounds; ++round) {
      store.begin_round(id, {round, round - 1, {"a", "b", "c"}, now_ms_ + 60'000});
      store.close_round(id, round, completed({"a", "b", "c"}, {}, small_model(float(round + 1)), round));
    }
  }
};

TEST_F(DistributedDpTaskViews, GetTaskReportsTheEpsilonOfTheCompletedSecureRounds) {
  expect_two_rounds_charged(get_task_once_waiting("ddp-going").task());
}

TEST_F(DistributedDpTaskViews, ASecureTaskWhoseNextRoundWouldPassItsBudgetStopsSayingSo) {
  expect_stopped_before_round_four(get_task_once_ended("ddp-spent").task());
}

}  // namespace
