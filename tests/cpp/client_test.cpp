// The device client (tn_client) against a hostile coordinator: every size a round announces is
// checked against the device's limits before anything is allocated for it or a connection made;
// and against a scripted one: when the device says its work ended.
#include <grpcpp/server_builder.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stop_token>
#include <string>
#include <vector>

#include "client/device.h"

namespace {

namespace v1 = ::torchnative::federated::v1;
using tn::client::Device;
using tn::client::DeviceOptions;
using tn::client::RoundReport;
using tn::client::TrainResult;
using SteadyClock = std::chrono::steady_clock;

constexpr uint64_t kTebibyte = uint64_t{1} << 40;

// The process's peak resident memory since the last reset_peak_rss(), in bytes (VmHWM).
uint64_t peak_rss() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  ADD_FAILURE() << "no VmHWM in /proc/self/status";
  return 0;
}

void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

uint64_t unix_ms_from_now(std::chrono::milliseconds later) {
  return uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(
                      (std::chrono::system_clock::now() + later).time_since_epoch())
                      .count());
}

// A round as a coordinator would send it, with one float32 tensor of `elements` elements; its
// data plane's store is a port nobody listens on, so a device that went as far as joining would
// wait out the join window (30 s) there.
v1::RoundConfig round_announcing(int64_t elements) {
  v1::RoundConfig round;
  round.set_task_id("task-hostile");
  round.set_round_id(7);
  round.set_deadline_unix_ms(unix_ms_from_now(std::chrono::seconds(60)));
  v1::DataPlane& plane = *round.mutable_data_plane();
  plane.set_store_host("127.0.0.1");
  plane.set_store_port(1);
  plane.set_store_prefix("hostile/");
  plane.set_rank(1);
  plane.set_world_size(2);
  plane.set_join_deadline_unix_ms(unix_ms_from_now(std::chrono::seconds(30)));
  v1::ModelHeader& model = *plane.mutable_model();
  model.set_model_version("task-hostile/0");
  v1::TensorEntry& weight = *model.add_tensors();
  weight.set_name("weight");
  weight.set_dtype(v1::DTYPE_FLOAT32);
  weight.add_shape(elements);
  model.set_total_bytes(uint64_t(elements) * 4);
  model.set_blake2b_256(std::string(32, '\x5a'));
  round.set_model_blake2b_256(model.blake2b_256());
  return round;
}

// A device's options, its key in a directory of its own.
class DeviceKey : public ::testing::Test {
 protected:
  DeviceOptions options() const {
    DeviceOptions options;
    options.server_address = "127.0.0.1:1";  // never called unless a test says otherwise
    options.key_file = key_file_;
    return options;
  }

  void SetUp() override {
    directory_ = std::filesystem::temp_directory_path() / ("client_test-" + std::to_string(getpid()));
    std::filesystem::create_directories(directory_);
    key_file_ = (directory_ / "device.key").string();
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  std::filesystem::path directory_;
  std::string key_file_;
};

class HostileRound : public DeviceKey {
 protected:
  // The device's refusal of `round`, which must come before any training, promptly and with the
  // process's peak memory unchanged but for noise.
  std::string refusal(const v1::RoundConfig& round, const DeviceOptions& options) {
    Device device(options);
    bool trained = false;
    reset_peak_rss();
    const uint64_t peak_before = peak_rss();
    const auto start = SteadyClock::now();
    const RoundReport report =
        device.participate(round, [&](const tn::federated::Model& global, const auto&) {
          trained = true;
          return TrainResult{global, 1, {}};
        });
    EXPECT_LT(SteadyClock::now() - start, std::chrono::seconds(1));
    EXPECT_LT(peak_rss() - peak_before, uint64_t{32} << 20);
    EXPECT_FALSE(trained);
    EXPECT_FALSE(report.contributed);
    EXPECT_EQ(report.round_id, 7u);
    return report.error;
  }
};

TEST_F(HostileRound, AModelOfATebibyteIsRefusedByNameWithoutAllocatingIt) {
  EXPECT_EQ(refusal(round_announcing(int64_t(kTebibyte / 4)), options()),
            "round 7 announces a model of 1099511627776 bytes, above this device's limit of 68719476736");
}

TEST_F(HostileRound, AModelAboveTheDevicesOwnLimitIsRefusedWithoutAllocatingIt) {
  DeviceOptions small = options();
  small.limits.max_total_bytes = uint64_t{1} << 20;
  // 256 MiB: an allocation the machine would grant, and the peak memory would show.
  EXPECT_EQ(refusal(round_announcing(int64_t{64} << 20), small),
            "round 7 announces a model of 268435456 bytes, above this device's limit of 1048576");
}

TEST_F(HostileRound, ATableWhoseTensorsDisagreeWithItsTotalIsRefused) {
  v1::RoundConfig round = round_announcing(int64_t(kTebibyte / 4));
  round.mutable_data_plane()->mutable_model()->set_total_bytes(16);  // the tensor still takes 1 TiB
  EXPECT_EQ(
      refusal(round, options()),
      "round 7: model transfer refused (size too large): tensor 'weight': dtype and shape make more than "
      "the limit of 68719476736 bytes");
}

TEST_F(HostileRound, ADataPlaneOfTooManyRanksOrARankThatIsNotADevicesIsRefused) {
  v1::RoundConfig round = round_announcing(4);
  round.mutable_data_plane()->set_world_size(uint32_t{1} << 31);  // joining allocates per rank
  EXPECT_EQ(refusal(round, options()),
            "round 7 announces a data plane of 2147483648 ranks, above this device's limit of 65536");
  round.mutable_data_plane()->set_world_size(4);
  round.mutable_data_plane()->set_rank(0);
  EXPECT_EQ(refusal(round, options()),
            "round 7 puts this device at rank 0 of a data plane of 4 ranks, rank 0 being the hub's");
  round.mutable_data_plane()->set_rank(4);
  EXPECT_EQ(refusal(round, options()),
            "round 7 puts this device at rank 4 of a data plane of 4 ranks, rank 0 being the hub's");
}

// A secure round as a coordinator would send it: no data plane, the model by FetchModel (from a
// port nobody listens on), distributed DP of multiplier z for sums of m devices.
v1::RoundConfig secure_round(double z, uint32_t m) {
  v1::RoundConfig round;
  round.set_task_id("task-secure");
  round.set_round_id(7);
  round.set_model_version("task-secure/0");
  round.set_deadline_unix_ms(unix_ms_from_now(std::chrono::seconds(60)));
  v1::SecAggRound& secure = *round.mutable_secure_aggregation();
  secure.set_session("task-secure/7");
  secure.set_noise_multiplier(z);
  secure.set_noise_min_devices(m);
  return round;
}

// A device that asked for the data plane is not moved to gRPC unasked by a secure round without
// one, and a secure round's data plane must carry masked words (not weighted values, say).
TEST_F(HostileRound, ASecureRoundIsRefusedByADeviceThatAskedForTheDataPlane) {
  EXPECT_EQ(
      refusal(secure_round(1, 3), options()),
      "round 7 of task task-secure is a secure aggregation round without a data plane (its masked words go "
      "over gRPC alone), and this device asked for the data plane: it takes part in such rounds only when it "
      "checks in with round_transport grpc (torchnative-device --round-transport grpc)");
  v1::RoundConfig weighted = secure_round(1, 3);
  weighted.mutable_data_plane()->set_contribution(v1::CONTRIBUTION_KIND_WEIGHTED);
  EXPECT_EQ(
      refusal(weighted, options()),
      "round 7 of task task-secure is a secure aggregation round whose data plane carries contribution kind "
      "0, not masked words: this device's masked input would be summed as something else");
}

// A device with a noise floor of multiplier 1 for sums of 3 devices adds a share of at least
// 1/sqrt(3) = 0.57735 sensitivities, whatever the coordinator says: a round claiming more devices
// (1/sqrt(5) = 0.447214), a smaller multiplier (0.5/sqrt(3) = 0.288675) or no noise is refused
// before training.
TEST_F(HostileRound, ASecureRoundAskingForLessNoiseThanTheDevicesFloorIsRefusedByName) {
  DeviceOptions floored = options();
  floored.round_transport = v1::ROUND_TRANSPORT_GRPC;
  floored.noise_floor = tn::client::NoiseFloor{1, 3};
  const std::string floor =
      ", below this device's noise floor, multiplier 1 for sums of 3 devices (a share of 0.57735 "
      "sensitivities)";
  EXPECT_EQ(refusal(secure_round(1, 5), floored),
            "round 7 of task task-secure asks each device for noise of multiplier 1 for sums of 5 devices (a "
            "share of 0.447214 sensitivities)" +
                floor);
  EXPECT_EQ(
      refusal(secure_round(0.5, 3), floored),
      "round 7 of task task-secure asks each device for noise of multiplier 0.5 for sums of 3 devices (a "
      "share of 0.288675 sensitivities)" +
          floor);
  v1::RoundConfig noiseless = secure_round(1, 3);
  noiseless.mutable_secure_aggregation()->clear_noise_multiplier();
  EXPECT_EQ(
      refusal(noiseless, floored),
      "round 7 of task task-secure adds no distributed DP noise, below this device's noise floor, multiplier "
      "1 for sums of 3 devices (a share of 0.57735 sensitivities)");
}

// A round asking for at least the floor's share, however split between multiplier and devices
// (2/sqrt(12) = 1/sqrt(3)), is taken part in: the device goes on to fetch the model.
TEST_F(HostileRound, ASecureRoundMeetingTheDevicesNoiseFloorGoesOnToFetchTheModel) {
  DeviceOptions floored = options();
  floored.round_transport = v1::ROUND_TRANSPORT_GRPC;
  floored.noise_floor = tn::client::NoiseFloor{1, 3};
  for (const auto& [z, m] : {std::pair{1.0, 3u}, {2.0, 12u}, {1.0, 1u}}) {
    Device device(floored);
    const RoundReport report = device.participate(secure_round(z, m), [&](const auto& global, const auto&) {
      ADD_FAILURE() << "trained without a model";
      return TrainResult{global, 1, {}};
    });
    EXPECT_FALSE(report.contributed);
    EXPECT_EQ(report.error.find("noise"), std::string::npos) << report.error;
    EXPECT_NE(report.error.find("FetchModel"), std::string::npos) << report.error;
  }
}

// A coordinator that answers the CheckIns of one device with `answers` in turn, then, with none
// left, stops the device; Register gives it an id, and every other call is unimplemented.
class ScriptedCoordinator final : public v1::DeviceService::Service {
 public:
  ScriptedCoordinator(std::vector<v1::NoWork> answers, std::stop_source stop)
      : answers_(std::move(answers)), stop_(std::move(stop)) {}

  grpc::Status Register(grpc::ServerContext*, const v1::RegisterRequest*,
                        v1::RegisterResponse* response) override {
    response->set_device_id("dev-scripted");
    return grpc::Status::OK;
  }

  grpc::Status CheckIn(grpc::ServerContext*, const v1::CheckInRequest*,
                       v1::CheckInResponse* response) override {
    std::lock_guard lock(mutex_);
    if (next_ == answers_.size()) {
      stop_.request_stop();
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the script is over");
    }
    *response->mutable_no_work() = answers_[next_++];
    return grpc::Status::OK;
  }

 private:
  std::mutex mutex_;
  const std::vector<v1::NoWork> answers_;
  size_t next_ = 0;
  std::stop_source stop_;
};

v1::NoWork no_work(uint32_t running_tasks, bool work_ended_while_held = false) {
  v1::NoWork answer;
  answer.set_running_tasks(running_tasks);
  answer.set_work_ended_while_held(work_ended_while_held);
  return answer;
}

class WorkEnd : public DeviceKey {
 protected:
  // How many times a device told `answers` by its CheckIns, one after the other, says its work
  // ended (Device::run's on_work_ended), waiting for the next task (--when-no-task wait).
  int times_said(std::vector<v1::NoWork> answers) {
    std::stop_source stop;
    ScriptedCoordinator coordinator(std::move(answers), stop);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&coordinator);
    const std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    if (!server || port == 0) throw std::runtime_error("the scripted coordinator did not start");
    DeviceOptions device_options = options();
    device_options.server_address = "127.0.0.1:" + std::to_string(port);
    device_options.wait_for_next_task = true;
    int said = 0;
    {
      Device device(device_options);
      device.run(
          [](const auto& global, const auto&) {
            return TrainResult{global, 1, {}};
          },
          stop.get_token(), {}, [&](const tn::client::WorkEnded&) { ++said; });
    }
    server->Shutdown();
    return said;
  }
};

// The coordinator records a task's end before it answers the held CheckIns: a device told by one
// CheckIn that the task it saw running ended can be held by its next one through that same end
// (NoWork.work_ended_while_held). Its wait began with the first answer; the second ends nothing.
// Under load the device daemon said "waiting" twice so (tests/federated/test_device_daemon.py).
TEST_F(WorkEnd, AHoldEndedByAnEndTheDeviceWasAlreadyToldOfDoesNotEndItsWaitAgain) {
  EXPECT_EQ(times_said({no_work(1), no_work(0), no_work(0, true)}), 1);
}

// A device started before its task, held in one CheckIn through the whole task, learns of its end
// only from the hold's answer: that ends its work once.
TEST_F(WorkEnd, ADeviceHeldThroughATaskItNeverSawRunningSaysItsWorkEnded) {
  EXPECT_EQ(times_said({no_work(0), no_work(0, true), no_work(0)}), 1);
}

// Each task the device is told of, once it ends with no other running, ends a wait of its own.
TEST_F(WorkEnd, EachEndOfATaskTheDeviceWasToldOfEndsItsWait) {
  EXPECT_EQ(times_said({no_work(1), no_work(0), no_work(0, true), no_work(2), no_work(1), no_work(0, true)}),
            2);
}

}  // namespace

// Registration and CheckIn retries wait a jittered, exponentially growing time ("full jitter"):
// uniformly in [0, min(maximum, initial * 2^failures)], so devices cut off together come back
// apart, and the ceiling doubles per failure up to the maximum.
TEST(Backoff, WaitsAreUniformUpToACeilingThatDoublesPerFailureUpToTheMaximum) {
  const tn::client::Backoff backoff{std::chrono::milliseconds(200), std::chrono::milliseconds(30'000)};
  std::mt19937_64 random(7);
  for (int failures = 0; failures < 12; ++failures) {
    const int64_t ceiling = std::min<int64_t>(200 << failures, 30'000);
    int64_t least = ceiling, most = 0, sum = 0;
    constexpr int kDraws = 2'000;
    for (int i = 0; i < kDraws; ++i) {
      const int64_t wait = backoff.wait(failures, random).count();
      ASSERT_GE(wait, 0);
      ASSERT_LE(wait, ceiling) << failures;
      least = std::min(least, wait);
      most = std::max(most, wait);
      sum += wait;
    }
    // Spread over the whole range, not one value (the jitter), centred on half the ceiling.
    EXPECT_LT(least, ceiling / 20) << failures;
    EXPECT_GT(most, ceiling - ceiling / 20) << failures;
    EXPECT_NEAR(double(sum) / kDraws, ceiling / 2.0, ceiling * 0.05) << failures;
  }
  // Past 20 doublings (and for a nonsense negative count) the ceiling stays bounded.
  EXPECT_LE(backoff.wait(1'000, random).count(), 30'000);
  EXPECT_LE(backoff.wait(-3, random).count(), 200);
}
