#include "secure_exchange.h"

#include <utility>

#include "federated/errors.h"
#include "proto/secure_aggregation_messages.h"

namespace tn::server {

namespace {

namespace secagg = federated::secagg;
using secagg::DeviceIndex;

void answer(SecureExchange::Call& call, const grpc::Status& status) {
  if (call.finish) std::exchange(call.finish, nullptr)(status);
}

}  // namespace

SecureExchange::SecureExchange(std::unique_ptr<SecureRound> round, size_t words_per_message,
                               std::set<federated::DeviceId> on_plane)
    : round_(std::move(round)), words_per_message_(words_per_message) {
  for (DeviceIndex index = 0; index < round_->devices().size(); ++index) expected_.insert(index);
  for (const federated::DeviceId& device : on_plane) on_plane_.insert(round_->index_of(device));
}

SecureExchange::~SecureExchange() {
  for (auto& [index, call] : held_)
    answer(call, grpc::Status(grpc::StatusCode::ABORTED, "the secure round ended before its stage closed"));
}

SecureExchange::Stage SecureExchange::stage_of(const v1::SecAggStagePayload& payload) {
  switch (payload.message_case()) {
    case v1::SecAggStagePayload::kAdvertisement:
      return Stage::AdvertiseKeys;
    case v1::SecAggStagePayload::kShares:
      return Stage::ShareKeys;
    case v1::SecAggStagePayload::kMaskedInput:
    case v1::SecAggStagePayload::kMaskedInputOnDataPlane:
      return Stage::MaskedInput;
    case v1::SecAggStagePayload::kSurvivorsSignature:
      return Stage::ConsistencyCheck;
    case v1::SecAggStagePayload::kUnmaskResponse:
      return Stage::Unmask;
    default:
      return Stage::Done;
  }
}

const char* SecureExchange::name_of(Stage stage) {
  static constexpr const char* kNames[] = {"advertise keys",    "share keys", "masked input",
                                           "consistency check", "unmask",     "done"};
  return kNames[int(stage)];
}

const char* SecureExchange::stage_name() const {
  std::lock_guard lock(mutex_);
  return name_of(stage_);
}

void SecureExchange::take(const federated::DeviceId& device, const v1::SecAggStagePayload& payload,
                          Call call) {
  std::lock_guard lock(mutex_);
  const auto refuse = [&](grpc::StatusCode code, const std::string& why) {
    answer(call, grpc::Status(code, "SecAggStage from device " + device + " refused: " + why));
  };
  DeviceIndex index = 0;
  try {
    index = round_->index_of(device);
  } catch (const federated::Refused& error) {
    return refuse(grpc::StatusCode::FAILED_PRECONDITION, error.what());
  }
  const Stage stage = stage_of(payload);
  if (stage == Stage::Done)
    return refuse(grpc::StatusCode::INVALID_ARGUMENT, "it carries no stage's message");
  // A data-plane device whose words the hub's reduce did not count is out of the round by then;
  // it learns why (hold_plane_delivery answers it), not only that it is out. At any later stage
  // too: the round waits for it no more, so the others' messages can close the masked input stage
  // (and the next ones) before its message, sent once its words went, arrives.
  if (payload.has_masked_input_on_data_plane() && plane_settled_ && on_plane_.contains(index) &&
      !plane_contributors_.contains(index)) {
    hold_plane_delivery(index, call);
    return;
  }
  // Checked here as well as by the session, so that masked input chunks out of their stage, or
  // from a device left out of it, are never kept.
  if (stage != stage_ || !expected_.contains(index) || held_.contains(index))
    return refuse(grpc::StatusCode::FAILED_PRECONDITION,
                  std::string("a ") + name_of(stage) + " message while the round is at its " +
                      name_of(stage_) + " stage, a second one, or one from a device left out of the round");
  try {
    if (!feed(index, payload, call)) return;
  } catch (const federated::Refused& error) {
    expected_.erase(index);  // out of the round: the stage waits for it no more
    chunks_.erase(index);
    arrived_.notify_all();
    return refuse(grpc::StatusCode::INVALID_ARGUMENT, error.what());
  }
  held_[index] = std::move(call);
  arrived_.notify_all();
}

bool SecureExchange::feed(DeviceIndex index, const v1::SecAggStagePayload& payload, Call& call) {
  secagg::CoordinatorSession& session = round_->session();
  switch (payload.message_case()) {
    case v1::SecAggStagePayload::kAdvertisement: {
      const secagg::KeyAdvertisement advertisement = proto::from_message(payload.advertisement());
      if (advertisement.device != index)
        throw federated::ParameterRefused("an advertisement for device index " +
                                          std::to_string(advertisement.device) + ", this device's is " +
                                          std::to_string(index));
      session.receive_advertisement(advertisement);
      return true;
    }
    case v1::SecAggStagePayload::kShares:
      session.receive_shares(index, proto::envelopes_of_sender(index, {payload.shares().envelopes().begin(),
                                                                       payload.shares().envelopes().end()}));
      return true;
    case v1::SecAggStagePayload::kMaskedInputOnDataPlane:
      return hold_plane_delivery(index, call);
    case v1::SecAggStagePayload::kMaskedInput: {
      // Its words go into the hub's reduce: taken here as well, they would be in the sum twice.
      if (on_plane_.contains(index))
        throw federated::ParameterRefused(
            "a masked input message from a device of the round's data plane, whose masked input goes into "
            "the "
            "hub's reduce");
      std::vector<v1::SecAggMaskedInput>& chunks = chunks_[index];
      if (size_t(payload.masked_input().words_size()) > words_per_message_)
        throw federated::ParameterRefused("a masked input message of " +
                                          std::to_string(payload.masked_input().words_size()) +
                                          " words, above the round's " + std::to_string(words_per_message_));
      chunks.push_back(payload.masked_input());
      const uint64_t end = payload.masked_input().offset() + uint64_t(payload.masked_input().words_size());
      if (end < round_->words()) {  // more to come; a gap or an overlap is refused at the end
        call.response->set_chunk_taken(true);
        answer(call, grpc::Status::OK);
        return false;
      }
      const std::vector<uint32_t> masked = proto::masked_input_of(chunks, round_->words());
      chunks_.erase(index);
      session.receive_masked_input(index, masked);
      return true;
    }
    case v1::SecAggStagePayload::kSurvivorsSignature: {
      if (payload.survivors_signature().device_index() != index)
        throw federated::ParameterRefused("a survivors signature for device index " +
                                          std::to_string(payload.survivors_signature().device_index()) +
                                          ", this device's is " + std::to_string(index));
      session.receive_survivors_signature(index, proto::from_message(payload.survivors_signature()));
      return true;
    }
    case v1::SecAggStagePayload::kUnmaskResponse:
      session.receive_unmask_response(index, proto::from_message(payload.unmask_response()));
      return true;
    default:
      return false;  // stage_of refused it
  }
}

bool SecureExchange::hold_plane_delivery(DeviceIndex index, Call& call) {
  if (!on_plane_.contains(index))
    throw federated::ParameterRefused(
        "a masked_input_on_data_plane message from a device that takes part over gRPC: its masked input goes "
        "in masked_input messages");
  if (!plane_settled_ || plane_contributors_.contains(index)) return true;
  answer(call, grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, left_out_answer(index)));
  return false;
}

std::string SecureExchange::left_out_answer(DeviceIndex index) const {
  const auto why = plane_refusals_.find(index);
  return "SecAggStage from device " + round_->devices()[index] +
         " refused: the hub's reduce of the masked inputs did not count this device's" +
         (why == plane_refusals_.end() ? std::string(" (it was not delivered whole in time)")
                                       : ": " + why->second);
}

std::map<federated::DeviceId, std::string> SecureExchange::left_out_answers() const {
  std::lock_guard lock(mutex_);
  std::map<federated::DeviceId, std::string> out;
  for (DeviceIndex index : on_plane_)
    if (plane_settled_ && !plane_contributors_.contains(index))
      out[round_->devices()[index]] = left_out_answer(index);
  return out;
}

std::set<federated::DeviceId> SecureExchange::in_stage() const {
  std::lock_guard lock(mutex_);
  std::set<federated::DeviceId> out;
  for (DeviceIndex index : expected_) out.insert(round_->devices()[index]);
  return out;
}

void SecureExchange::take_masked_sum(const std::set<federated::DeviceId>& contributors,
                                     std::vector<uint32_t> sum,
                                     const std::map<federated::DeviceId, std::string>& why_not) {
  std::lock_guard lock(mutex_);
  std::set<DeviceIndex> senders;
  for (const federated::DeviceId& device : contributors) senders.insert(round_->index_of(device));
  if (!senders.empty()) round_->session().receive_masked_sum(senders, std::move(sum));
  plane_settled_ = true;
  plane_contributors_ = senders;
  for (const auto& [device, why] : why_not) plane_refusals_[round_->index_of(device)] = why;
  for (DeviceIndex index : on_plane_) {
    if (senders.contains(index)) continue;
    expected_.erase(index);  // out of the round: the stage waits for it no more
    if (auto held = held_.find(index); held != held_.end()) {
      hold_plane_delivery(index, held->second);  // answers it with the refusal
      held_.erase(held);
    }
  }
  arrived_.notify_all();
}

std::vector<federated::DeviceId> SecureExchange::wait(
    std::chrono::steady_clock::time_point deadline,
    const std::function<bool(const federated::DeviceId&)>& gone, std::chrono::milliseconds look_every) {
  std::set<DeviceIndex> given_up;
  std::unique_lock lock(mutex_);
  for (;;) {
    bool waiting = false;
    for (DeviceIndex index : expected_) {
      if (held_.contains(index) || given_up.contains(index)) continue;
      if (gone(round_->devices()[index]))
        given_up.insert(index);
      else
        waiting = true;
    }
    if (!waiting || std::chrono::steady_clock::now() >= deadline) break;
    arrived_.wait_until(lock, std::min(deadline, std::chrono::steady_clock::now() + look_every));
  }
  std::vector<federated::DeviceId> out;
  for (DeviceIndex index : given_up) out.push_back(round_->devices()[index]);
  return out;
}

void SecureExchange::close_stage() {
  std::lock_guard lock(mutex_);
  secagg::CoordinatorSession& session = round_->session();
  try {
    switch (stage_) {
      case Stage::AdvertiseKeys:
        session.close_advertising();
        break;
      case Stage::ShareKeys:
        session.close_sharing();
        break;
      case Stage::MaskedInput:
        session.close_masking();
        chunks_.clear();  // of devices whose input stopped short
        break;
      case Stage::ConsistencyCheck:
        session.close_consistency_check();
        break;
      case Stage::Unmask:
        sum_ = session.close_unmasking();
        break;
      case Stage::Done:
        throw federated::ParameterRefused("secure round: every stage is closed already");
    }
  } catch (const std::exception& error) {
    for (auto& [index, call] : held_)
      answer(call,
             grpc::Status(grpc::StatusCode::ABORTED, std::string("the secure round was abandoned at its ") +
                                                         name_of(stage_) + " stage: " + error.what()));
    held_.clear();
    stage_ = Stage::Done;
    throw;
  }
  expected_.clear();
  for (auto& [index, call] : held_) {
    answer_next_stage(index, *call.response);
    answer(call, grpc::Status::OK);
    expected_.insert(index);
  }
  held_.clear();
  stage_ = Stage(int(stage_) + 1);
}

void SecureExchange::answer_next_stage(DeviceIndex index, v1::SecAggStageResponse& response) {
  const secagg::CoordinatorSession& session = round_->session();
  switch (stage_) {
    case Stage::AdvertiseKeys: {  // with their identities: a device is sent no others
      const std::map<DeviceIndex, secagg::KeyAdvertisement> keys = session.keys_for(index);
      std::map<DeviceIndex, secagg::Bytes32> identities;
      for (const auto& [neighbour, advertisement] : keys) identities[neighbour] = session.identity(neighbour);
      *response.mutable_neighbour_keys() = proto::to_message(keys, identities);
      break;
    }
    case Stage::ShareKeys:
      for (v1::SecAggEnvelope& envelope : proto::envelopes_to(index, session.envelopes_for(index)))
        *response.mutable_envelopes()->add_envelopes() = std::move(envelope);
      break;
    case Stage::MaskedInput:  // the view to sign: its neighbourhood's survivors alone
      *response.mutable_survivors() = proto::to_message(secagg::UnmaskRequest{session.view_of(index), {}});
      break;
    case Stage::ConsistencyCheck:
      *response.mutable_unmask_request() =
          proto::to_message(session.request_for(index), session.signatures_for(index));
      break;
    case Stage::Unmask:
    case Stage::Done:
      response.set_done(true);
      break;
  }
}

std::vector<federated::DeviceId> SecureExchange::contributors() const {
  std::lock_guard lock(mutex_);
  return round_->contributors();
}

federated::WeightedSumReader SecureExchange::weighted_sum(const federated::Model& round_model) const {
  std::lock_guard lock(mutex_);
  return round_->weighted_sum(round_model, sum_);
}

void SecureExchanges::open(const std::string& task_id, uint64_t round_id,
                           std::shared_ptr<SecureExchange> exchange) {
  std::lock_guard lock(mutex_);
  exchanges_[{task_id, round_id}] = std::move(exchange);
}

std::shared_ptr<SecureExchange> SecureExchanges::find(const std::string& task_id, uint64_t round_id) const {
  std::lock_guard lock(mutex_);
  const auto found = exchanges_.find({task_id, round_id});
  return found == exchanges_.end() ? nullptr : found->second;
}

void SecureExchanges::remove(const std::string& task_id, uint64_t round_id) {
  std::lock_guard lock(mutex_);
  const auto found = exchanges_.find({task_id, round_id});
  if (found == exchanges_.end()) return;
  closed_[task_id] = {round_id, found->second->left_out_answers()};
  exchanges_.erase(found);
}

std::optional<std::string> SecureExchanges::left_out_answer(const std::string& task_id, uint64_t round_id,
                                                            const federated::DeviceId& device) const {
  std::lock_guard lock(mutex_);
  const auto closed = closed_.find(task_id);
  if (closed == closed_.end() || closed->second.first != round_id) return std::nullopt;
  const auto answer = closed->second.second.find(device);
  if (answer == closed->second.second.end()) return std::nullopt;
  return answer->second;
}

}  // namespace tn::server
