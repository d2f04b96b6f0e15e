// The coordinator's refusals, against a real Coordinator on loopback: each bad request gets the
// status and message that name what is wrong, is counted, and the daemon keeps serving.
#include "server/coordinator.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <random>
#include <streambuf>
#include <thread>

#include "device_board.h"
#include "event_log.h"
#include "nonce_ledger.h"
#include "proto/protocol.h"
#include "proto/signing.h"
#include "round_params.h"
#include "server/hex.h"
#include "state_store_fixture.h"
#include "tasks.h"
#include "torchnative/federated/v1/admin.grpc.pb.h"
#include "torchnative/federated/v1/device.grpc.pb.h"

namespace {

namespace v1 = ::torchnative::federated::v1;
using tn::proto::SigningKey;
using namespace std::chrono_literals;

std::string device_method(const char* name) {
  return "/" + std::string(v1::DeviceService::service_full_name()) + "/" + name;
}

class CoordinatorRefusals : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::temp_directory_path() /
                 ("coordinator_test_" + std::to_string(std::random_device{}()));
    tn::server::CoordinatorConfig config;
    config.listen = "127.0.0.1:0";
    config.http_listen = "";
    config.state_directory = directory_ / "state";
    config.admin_public_keys = {admin_.public_key()};
    coordinator_ = std::make_unique<tn::server::Coordinator>(config);
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(coordinator_->grpc_port()),
                                       grpc::InsecureChannelCredentials());
    devices_ = v1::DeviceService::NewStub(channel);
    admin_stub_ = v1::AdminService::NewStub(channel);
  }

  void TearDown() override {
    coordinator_.reset();
    std::filesystem::remove_all(directory_);
  }

  v1::RegisterRequest registration(const SigningKey& key) {
    v1::RegisterPayload payload;
    payload.set_protocol_version(tn::proto::kProtocolVersion);
    payload.set_public_key(key.public_key());
    v1::RegisterRequest request;
    payload.SerializeToString(request.mutable_payload());
    *request.mutable_auth() = tn::proto::sign_request(device_method("Register"), "", request.payload(), key);
    return request;
  }

  grpc::Status call_register(const v1::RegisterRequest& request, v1::RegisterResponse* response = nullptr) {
    grpc::ClientContext context;
    v1::RegisterResponse ignored;
    return devices_->Register(&context, request, response ? response : &ignored);
  }

  template <typename Request>
  Request signed_request(const char* method, const std::string& key_id, const std::string& payload,
                         const SigningKey& key) {
    Request request;
    request.set_payload(payload);
    *request.mutable_auth() = tn::proto::sign_request(device_method(method), key_id, payload, key);
    return request;
  }

  grpc::Status call_check_in(const v1::CheckInRequest& request) {
    grpc::ClientContext context;
    v1::CheckInResponse response;
    return devices_->CheckIn(&context, request, &response);
  }

  std::filesystem::path directory_;
  SigningKey admin_ = SigningKey::generate();
  std::unique_ptr<tn::server::Coordinator> coordinator_;
  std::unique_ptr<v1::DeviceService::Stub> devices_;
  std::unique_ptr<v1::AdminService::Stub> admin_stub_;
};

void expect_refusal(const grpc::Status& status, grpc::StatusCode code, const std::string& words) {
  EXPECT_EQ(status.error_code(), code) << status.error_message();
  EXPECT_NE(status.error_message().find(words), std::string::npos) << status.error_message();
}

TEST_F(CoordinatorRefusals, RegisterIsIdempotentAndProvesPossessionOfTheKey) {
  SigningKey device = SigningKey::generate();
  v1::RegisterResponse first, second;
  ASSERT_TRUE(call_register(registration(device), &first).ok());
  ASSERT_TRUE(call_register(registration(device), &second).ok());
  EXPECT_EQ(first.device_id(), second.device_id());
  EXPECT_EQ(first.device_id().rfind("dev-", 0), 0u);

  // Signed by another key than the one in the payload.
  v1::RegisterRequest forged = registration(device);
  SigningKey thief = SigningKey::generate();
  *forged.mutable_auth() = tn::proto::sign_request(device_method("Register"), "", forged.payload(), thief);
  expect_refusal(call_register(forged), grpc::StatusCode::UNAUTHENTICATED, "signature does not verify");
}

TEST_F(CoordinatorRefusals, ForgedUnknownReplayedStaleAndMalformedRequestsAreRefusedByName) {
  SigningKey device = SigningKey::generate();
  v1::RegisterResponse registered;
  ASSERT_TRUE(call_register(registration(device), &registered).ok());
  const std::string id = registered.device_id();
  v1::CheckInPayload payload;
  payload.set_protocol_version(tn::proto::kProtocolVersion);
  payload.set_max_wait_ms(1);
  const std::string bytes = payload.SerializeAsString();

  auto valid = signed_request<v1::CheckInRequest>("CheckIn", id, bytes, device);
  ASSERT_TRUE(call_check_in(valid).ok());
  expect_refusal(call_check_in(valid), grpc::StatusCode::UNAUTHENTICATED, "was used before (a replay)");

  auto forged = signed_request<v1::CheckInRequest>("CheckIn", id, bytes, device);
  (*forged.mutable_auth()->mutable_signature())[0] ^= 1;
  expect_refusal(call_check_in(forged), grpc::StatusCode::UNAUTHENTICATED, "signature does not verify");

  auto other_method = signed_request<v1::CheckInRequest>("Heartbeat", id, bytes, device);
  expect_refusal(call_check_in(other_method), grpc::StatusCode::UNAUTHENTICATED, "signature does not verify");

  SigningKey stranger = SigningKey::generate();
  auto unknown = signed_request<v1::CheckInRequest>("CheckIn", "dev-nobody", bytes, stranger);
  expect_refusal(call_check_in(unknown), grpc::StatusCode::UNAUTHENTICATED, "no device is registered");

  v1::CheckInRequest stale;
  stale.set_payload(bytes);
  v1::Auth& auth = *stale.mutable_auth();
  auth.set_key_id(id);
  auth.set_timestamp_unix_ms(1'000'000);  // 1970
  auth.set_nonce(std::string(16, 'n'));
  auth.set_signature(device.sign(tn::proto::signing_bytes(device_method("CheckIn"), auth, bytes)));
  expect_refusal(call_check_in(stale), grpc::StatusCode::UNAUTHENTICATED, "from the server's clock");

  auto malformed = signed_request<v1::CheckInRequest>("CheckIn", id, "\xff\xff\xff", device);
  expect_refusal(call_check_in(malformed), grpc::StatusCode::INVALID_ARGUMENT,
                 "not a valid serialized torchnative.federated.v1.CheckInPayload");

  grpc::ClientContext context;
  v1::SubmitUpdateResponse response;
  auto writer = devices_->SubmitUpdate(&context, &response);
  v1::SubmitUpdateRequest first;
  v1::SubmitUpdateHeader header;
  header.set_task_id("no-such-task");
  header.set_round_id(1);
  first.mutable_signed_header()->set_payload(header.SerializeAsString());
  *first.mutable_signed_header()->mutable_auth() =
      tn::proto::sign_request(device_method("SubmitUpdate"), id, first.signed_header().payload(), device);
  writer->Write(first);
  writer->WritesDone();
  expect_refusal(writer->Finish(), grpc::StatusCode::FAILED_PRECONDITION,
                 "the device was not selected for it, or it has closed (a late or replayed update)");

  // Still serving.
  ASSERT_TRUE(call_check_in(signed_request<v1::CheckInRequest>("CheckIn", id, bytes, device)).ok());
}

TEST_F(CoordinatorRefusals, AdminCallsNeedAConfiguredAdministratorKey) {
  v1::ListDevicesRequest request;
  const std::string method = "/" + std::string(v1::AdminService::service_full_name()) + "/ListDevices";
  SigningKey stranger = SigningKey::generate();
  *request.mutable_auth() =
      tn::proto::sign_request(method, tn::server::to_hex(stranger.public_key()), request.payload(), stranger);
  v1::ListDevicesResponse response;
  grpc::ClientContext refused;
  expect_refusal(admin_stub_->ListDevices(&refused, request, &response), grpc::StatusCode::UNAUTHENTICATED,
                 "is not a configured administrator key");
  *request.mutable_auth() =
      tn::proto::sign_request(method, tn::server::to_hex(admin_.public_key()), request.payload(), admin_);
  grpc::ClientContext accepted;
  EXPECT_TRUE(admin_stub_->ListDevices(&accepted, request, &response).ok());
}

// Read from /proc/self/status.
int threads_of_this_process() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}

// CheckIn is served with gRPC's callback API: 300 CheckIns held at once (from one client thread,
// the asynchronous stub) take no server thread each, and each is answered with no work when its
// wait ends. Only threads are counted, never time.
TEST_F(CoordinatorRefusals, HeldCheckInsTakeNoServerThreadEach) {
  SigningKey device = SigningKey::generate();
  v1::RegisterResponse registered;
  ASSERT_TRUE(call_register(registration(device), &registered).ok());
  v1::CheckInPayload payload;
  payload.set_protocol_version(tn::proto::kProtocolVersion);
  payload.set_max_wait_ms(2000);
  const std::string bytes = payload.SerializeAsString();

  constexpr int kHeld = 300;
  const int threads_before = threads_of_this_process();
  grpc::CompletionQueue completions;
  struct Call {
    grpc::ClientContext context;
    v1::CheckInResponse response;
    grpc::Status status;
  };
  std::vector<std::unique_ptr<Call>> calls;
  for (int i = 0; i < kHeld; ++i) {
    calls.push_back(std::make_unique<Call>());
    Call& call = *calls.back();
    devices_
        ->AsyncCheckIn(&call.context,
                       signed_request<v1::CheckInRequest>("CheckIn", registered.device_id(), bytes, device),
                       &completions)
        ->Finish(&call.response, &call.status, &call);
  }
  // The most threads seen while the calls are held (they are answered after their 2 s wait).
  int most_threads = threads_before;
  int answered = 0;
  while (answered < kHeld) {
    void* tag = nullptr;
    bool ok = false;
    const auto next = completions.AsyncNext(&tag, &ok, std::chrono::system_clock::now() + 10ms);
    most_threads = std::max(most_threads, threads_of_this_process());
    if (next != grpc::CompletionQueue::GOT_EVENT) continue;
    ASSERT_TRUE(ok);
    const Call& call = *static_cast<Call*>(tag);
    EXPECT_TRUE(call.status.ok()) << call.status.error_message();
    EXPECT_TRUE(call.response.has_no_work());
    ++answered;
  }
  EXPECT_LT(most_threads - threads_before, kHeld / 3)
      << "threads before: " << threads_before << ", at most while held: " << most_threads;
}

// Liveness on the board: a device is offered for selection, and listed alive, only while it has
// been heard from within the window; a held CheckIn alone does not keep it so.
TEST(DeviceBoardLiveness, OnlyDevicesHeardFromWithinTheWindowAreOfferedAndAlive) {
  tn::server::DeviceBoard board(200ms);
  auto no_answer = [](std::optional<v1::Assignment>) {};
  board.hold("dev-silent", {}, 10s, no_answer);
  board.hold("dev-heartbeating", {}, 10s, no_answer);
  auto offered = [&] {
    std::vector<std::string> ids;
    board.reserve([&](const std::vector<tn::server::DeviceBoard::Waiting>& available) {
      for (const auto& device : available) ids.push_back(device.id);
      return std::vector<tn::federated::DeviceId>{};
    });
    return ids;
  };
  EXPECT_EQ(offered(),
            (std::vector<std::string>{"dev-heartbeating", "dev-silent"}));  // the CheckIn was heard
  for (int beat = 0; beat < 4; ++beat) {                                    // twice the window
    std::this_thread::sleep_for(100ms);
    board.heard_from("dev-heartbeating", v1::DEVICE_STATE_IDLE);
  }
  EXPECT_EQ(offered(), std::vector<std::string>{"dev-heartbeating"});
  EXPECT_FALSE(board.presence("dev-silent").alive);
  EXPECT_TRUE(board.presence("dev-silent").last_heard.has_value());
  const tn::server::DeviceBoard::Presence heartbeating = board.presence("dev-heartbeating");
  EXPECT_TRUE(heartbeating.alive);
  EXPECT_EQ(heartbeating.last_state, v1::DEVICE_STATE_IDLE);
  EXPECT_FALSE(board.presence("dev-never-heard").last_heard.has_value());
  board.heard_from("dev-silent", v1::DEVICE_STATE_TRAINING);
  EXPECT_EQ(offered(), (std::vector<std::string>{"dev-heartbeating", "dev-silent"}));
  EXPECT_EQ(board.presence("dev-silent").last_state, v1::DEVICE_STATE_TRAINING);
}

}  // namespace

// The end of the work answers every held CheckIn at once with no work, and a CheckIn that looked
// at the tasks before that end (its endings_seen) is not held past it.
TEST(DeviceBoardEndOfWork, EndsEveryHoldAndAnswersACheckInThatLookedBeforeTheEnd) {
  tn::server::DeviceBoard board(10s);
  int answered_without_work = 0;
  auto count = [&](std::optional<v1::Assignment> assignment) {
    if (!assignment) ++answered_without_work;
  };
  const uint64_t looked = board.endings();
  board.hold("dev-a", {}, 60s, count, v1::ROUND_TRANSPORT_DATA_PLANE, looked);
  board.hold("dev-b", {}, 60s, count);
  EXPECT_EQ(board.waiting(), 2u);
  tn::server::DeviceBoard::answer_with_no_work(board.end_of_work());
  EXPECT_EQ(answered_without_work, 2);
  EXPECT_EQ(board.waiting(), 0u);
  EXPECT_EQ(board.endings(), looked + 1);
  board.hold("dev-c", {}, 60s, count, v1::ROUND_TRANSPORT_DATA_PLANE, looked);  // looked before the end
  EXPECT_EQ(answered_without_work, 3);
  board.hold("dev-c", {}, 60s, count, v1::ROUND_TRANSPORT_DATA_PLANE, board.endings());
  EXPECT_EQ(answered_without_work, 3);
  EXPECT_EQ(board.waiting(), 1u);
}

TEST(NonceLedger, ConcurrentRequestsShareSyncsAndEachNonceIsFreshOnce) {
  const auto directory =
      std::filesystem::temp_directory_path() /
      ("tn_nonce_ledger_" + std::to_string(::getpid()) + "_" + std::to_string(std::rand()));
  {
    tn::server::GuardedState state(tn::server::StateStore::open(directory));
    tn::server::NonceLedger ledger(state);
    // Eight signers each use 100 nonces of their own and the same 20 shared ones (as replays
    // of one another would): every own nonce is fresh, each shared one exactly once overall.
    constexpr int kThreads = 8, kOwn = 100, kShared = 20;
    std::vector<int> own_fresh(kThreads, 0);
    std::vector<std::atomic<int>> shared_fresh(kShared);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < kOwn + kShared; ++i) {
          const bool shared = i % 6 == 0 && i / 6 < kShared;
          const std::string nonce = shared ? "shared-" + std::to_string(i / 6)
                                           : "own-" + std::to_string(t) + "-" + std::to_string(i);
          if (ledger.record("signer", nonce, 1000)) {
            if (shared)
              ++shared_fresh[size_t(i / 6)];
            else
              ++own_fresh[size_t(t)];
          }
        }
      });
    for (auto& thread : threads) thread.join();
    int own_total = 0;
    for (int count : own_fresh) own_total += count;
    const int own_expected = kThreads * (kOwn + kShared - kShared);
    EXPECT_EQ(own_total, own_expected);
    for (int i = 0; i < kShared; ++i) EXPECT_EQ(shared_fresh[size_t(i)].load(), 1) << "shared nonce " << i;
    // How many syncs the 960 requests shared (timing-dependent, so reported, not asserted).
    ::testing::Test::RecordProperty("batches", std::to_string(ledger.batches_written()));
    // A nonce the store cannot take is refused alone, before it joins anyone's batch.
    EXPECT_THROW(ledger.record("signer", std::string(2000, 'n'), 1000), tn::server::InvalidArgument);
    EXPECT_TRUE(ledger.record("signer", "after the refusal", 1000));
  }
  // Durable: a store reopened on the same directory knows them.
  tn::server::StateStore reopened = tn::server::StateStore::open(directory);
  EXPECT_FALSE(reopened.record_nonce("signer", "shared-0", 1000));
  EXPECT_FALSE(reopened.record_nonce("signer", "own-7-1", 1000));
  std::filesystem::remove_all(directory);
}

TEST(NonceLedger, CallbacksAnswerEveryRequestOnceWithoutAWaitingThreadAndDestructionAnswersTheRest) {
  const auto directory =
      std::filesystem::temp_directory_path() /
      ("tn_nonce_ledger_callbacks_" + std::to_string(::getpid()) + "_" + std::to_string(std::rand()));
  constexpr int kRequests = 2000;
  std::vector<std::atomic<int>> answers(kRequests);
  std::atomic<int> fresh = 0, errors = 0;
  std::atomic<bool> on_ledger_thread = true;
  const std::thread::id recording_thread = std::this_thread::get_id();
  {
    tn::server::GuardedState state(tn::server::StateStore::open(directory));
    tn::server::NonceLedger ledger(state);
    // One thread records them all without waiting; every tenth nonce repeats the one before it
    // (a replay), so 1,800 are fresh. The ledger is destroyed with answers still owed.
    for (int i = 0; i < kRequests; ++i)
      ledger.record("signer", "nonce-" + std::to_string(i % 10 == 9 ? i - 1 : i), 1000,
                    [&, i](bool is_fresh, std::exception_ptr error) {
                      ++answers[size_t(i)];
                      if (is_fresh) ++fresh;
                      if (error) ++errors;
                      if (std::this_thread::get_id() == recording_thread) on_ledger_thread = false;
                    });
  }
  for (int i = 0; i < kRequests; ++i) ASSERT_EQ(answers[size_t(i)].load(), 1) << "request " << i;
  EXPECT_EQ(fresh.load(), kRequests - kRequests / 10);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_TRUE(on_ledger_thread.load());
  tn::server::StateStore reopened = tn::server::StateStore::open(directory);
  EXPECT_FALSE(reopened.record_nonce("signer", "nonce-1998", 1000));
  EXPECT_TRUE(reopened.record_nonce("signer", "nonce-1999", 1000));  // only ever replayed as 1998
  std::filesystem::remove_all(directory);
}

namespace {

using tn::server::state_test::StateStoreTest;

// Calls `action`, once, on the thread that logs the event `event`, while that thread is in
// log_event (std::cerr's buffer, until it goes): a place in the coordinator's own sequence of
// steps that the test can stop at without a hook in the code under test.
class OnLogged : public std::streambuf {
 public:
  OnLogged(const std::string& event, std::function<void()> action)
      : needle_("\"event\":\"" + event + "\""), action_(std::move(action)), logged_(std::cerr.rdbuf(this)) {}
  ~OnLogged() override { std::cerr.rdbuf(logged_); }
  OnLogged(const OnLogged&) = delete;
  OnLogged& operator=(const OnLogged&) = delete;

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    line_ += traits_type::to_char_type(c);
    return logged_->sputc(traits_type::to_char_type(c));
  }
  std::streamsize xsputn(const char* text, std::streamsize count) override {
    line_.append(text, size_t(count));
    return logged_->sputn(text, count);
  }
  // log_event flushes each line (std::cerr is unit-buffered besides).
  int sync() override {
    if (action_ && line_.find(needle_) != std::string::npos) std::exchange(action_, {})();
    line_.clear();
    return logged_->pubsync();
  }

 private:
  const std::string needle_;
  std::function<void()> action_;
  std::streambuf* const logged_;
  std::string line_;
};

// A coordinator's task loop and the board, on a store holding task "mnist", running.
class TaskEnd : public StateStoreTest {
 protected:
  void SetUp() override {
    StateStoreTest::SetUp();
    tn::server::StateStore store = open();
    tn::server::RoundParams params;
    params.devices_per_round = 2;
    params.min_updates = 1;
    params.round_timeout = std::chrono::minutes(1);
    tn::server::TaskDefinition task = definition("mnist");
    task.round_params = params.to_json();
    store.create_task(task, small_model());
    state_.emplace(std::move(store));
  }

  tn::server::CoordinatorConfig config_;
  std::optional<tn::server::GuardedState> state_;
  tn::server::Metrics metrics_;
  tn::server::UpdateInboxes inboxes_;
  tn::server::SecureExchanges secure_exchanges_;
};

// A device told by one CheckIn that its task ended (answered from the store: no task running) and
// checking in again must not be held through that same end: the end it was told of must already
// be in the board's endings() its next CheckIn reads (and so not reported as
// NoWork.work_ended_while_held, which the device counts as a task it saw running). The test looks
// at the board and the store as a CheckIn does where the task loop logs task_stopped, after the
// store has the end and before the held CheckIns are answered: the two CheckIns run there, in
// turn, on the loop's thread. Before the end was counted in the store's critical section, the
// second looked at endings 0, was held, and was answered with the end it had been told of.
TEST_F(TaskEnd, ADeviceToldOfTheEndIsNotHeldThroughItByItsNextCheckIn) {
  std::optional<uint64_t> looked;                 // the endings() the second CheckIn read
  std::optional<bool> answered_ended_while_held;  // its answer, if it had one
  tn::server::DeviceBoard board(std::chrono::seconds(10));
  tn::server::EventLog events(*state_);
  const tn::server::Services services{config_, *state_, board, events, metrics_, inboxes_, secure_exchanges_};
  bool told_of_the_end = false;
  // In place before the task loop starts and logs, and after it has been joined.
  OnLogged at_task_stopped("task_stopped", [&] {
    // The first CheckIn names the task it took part in (DeviceServiceImpl::work_already_ended).
    const std::vector<tn::server::TaskRecord> stored =
        state_->with([](tn::server::StateStore& store) { return store.list_tasks(); });
    told_of_the_end = stored.size() == 1 && stored[0].state == tn::server::TaskState::Stopped;
    // The second, new to the work, reads the board's endings() and is held.
    looked = board.endings();
    board.hold(
        "dev-a", {}, std::chrono::minutes(1),
        [&](std::optional<v1::Assignment> assignment) {
          if (!assignment) answered_ended_while_held = board.endings() != *looked;
        },
        v1::ROUND_TRANSPORT_DATA_PLANE, looked);
  });
  tn::server::Tasks tasks(services);
  tasks.resume_all();
  tasks.stop("mnist", "the test stops it");
  tasks.drain_and_join();  // the loop has ended the task and answered the held CheckIns
  ASSERT_TRUE(told_of_the_end) << "the hook did not run where the store has the end";
  EXPECT_EQ(board.endings(), 1u);
  EXPECT_EQ(looked, 1u) << "the second CheckIn read endings() before the end it was told of was counted";
  EXPECT_EQ(answered_ended_while_held, std::nullopt)
      << "held through the end it was told of, and answered work_ended_while_held "
      << answered_ended_while_held.value_or(false);
  EXPECT_EQ(board.waiting(), 1u);  // held still, for the next task
}

}  // namespace
