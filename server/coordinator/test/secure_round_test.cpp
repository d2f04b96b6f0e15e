// A secure round on the coordinator (secure_round.h) with devices simulated in process: each
// quantises its trained model's update (federated/secure_contribution.h) and runs the stages with
// a DeviceSession; one vanishes after sharing its keys. The strategy's weighted sum is, bit for
// bit, W times the round's model plus step times the survivors' quantised integers summed here
// in int64, W their capped example counts; the contributors are the survivors' ids. The same round
// through a SecureExchange (the SecAggStage calls' side) gives the same sum, and its refusals are
// named.
#include "secure_round.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <optional>
#include <set>

#include "federated/errors.h"
#include "federated/secure_contribution.h"
#include "proto/secure_aggregation_messages.h"
#include "round_params.h"
#include "secure_exchange.h"
#include "test_support.h"

namespace tn::server {
namespace {

namespace secagg = federated::secagg;
using federated::Model;

Model float_model(const std::vector<float>& weight, const std::vector<float>& bias) {
  Model model;
  for (const auto& [name, values] : {std::pair{"weight", &weight}, std::pair{"bias", &bias}})
    model.tensors.push_back(federated::copy_tensor(
        name, ScalarType::Float, {int64_t(values->size())},
        {reinterpret_cast<const std::byte*>(values->data()), values->size() * sizeof(float)}));
  return model;
}

SecureAggregationParams secure_params(uint32_t devices) {
  v1::CreateTaskHeader header;
  header.set_strategy("fedavg");
  header.set_rounds(1);
  header.mutable_selection()->set_devices_per_round(devices);
  header.set_min_available_devices(devices);
  header.set_min_updates(devices - 2);
  header.set_round_timeout_ms(1000);
  v1::SecureAggregation& secure = *header.mutable_secure_aggregation();
  secure.set_corrupt_fraction(0.05);
  secure.set_dropout_fraction(0.33);
  secure.set_clip_range(0.25);
  secure.set_max_weight(40);
  return *RoundParams::from_header(header, "t").secure_aggregation;
}

int64_t signed_word(uint32_t word) { return static_cast<int32_t>(word); }  // 32 bits

// `reader` reads, bit for bit, W times `global` plus `step` times the quantised integers of every
// device but `gone` summed in int64, W their capped weights.
void expect_sum_of(const federated::WeightedSumReader& reader, const Model& global,
                   const std::vector<std::vector<uint32_t>>& inputs, const std::vector<uint32_t>& weights,
                   size_t gone, double step) {
  std::vector<int64_t> integers(inputs.front().size() - 1, 0);
  uint64_t total_weight = 0;
  for (size_t d = 0; d < inputs.size(); ++d) {
    if (d == gone) continue;
    total_weight += weights[d];
    for (size_t k = 0; k < integers.size(); ++k) integers[k] += signed_word(inputs[d][k]);
  }
  EXPECT_EQ(reader.total_weight, double(total_weight));
  std::vector<double> base, read;
  for (const federated::NamedTensor& tensor : global.tensors) {
    std::vector<double> values(size_t(tensor.numel()));
    reader.read(tensor, 0, values);
    read.insert(read.end(), values.begin(), values.end());
    const float* data = reinterpret_cast<const float*>(tensor.data.get());
    base.insert(base.end(), data, data + tensor.numel());
  }
  for (size_t k = 0; k < read.size(); ++k) {
    const double want = double(total_weight) * base[k] + double(integers[k]) * step;
    EXPECT_EQ(std::memcmp(&read[k], &want, sizeof want), 0)
        << "element " << k << ": " << read[k] << " vs " << want;
  }
}

// A round of n devices simulated in process: fresh identities (ids not in creation order), the
// coordinator's SecureRound over them, each device's DeviceSession and quantised update of
// `global` (updates growing with the index, the last ones clipped to 0.25; example counts 15 n,
// capped at 40 from the third device on).
struct Simulated {
  explicit Simulated(uint32_t n)
      : params(secure_params(n)),
        global(float_model({0.5f, -1.0f, 2.0f, 0.0f}, {0.1f, -0.1f})),
        layout(global.spec()) {
    std::map<federated::DeviceId, std::string> registry;
    std::map<federated::DeviceId, secagg::IdentityKeys> identities;
    for (uint32_t i = 0; i < n; ++i) {
      const federated::DeviceId id = "device-" + std::string(1, char('f' - i));
      identities[id] = secagg::IdentityKeys::generate();
      registry[id] = std::string(reinterpret_cast<const char*>(identities[id].public_key.data()), 32);
    }
    round = std::make_unique<SecureRound>(params, "t/1", registry, layout);
    std::map<secagg::DeviceIndex, secagg::Bytes32> by_index;
    for (const auto& [id, keys] : identities) by_index[round->index_of(id)] = keys.public_key;
    for (secagg::DeviceIndex d = 0; d < n; ++d) {
      const federated::DeviceId& id = round->devices()[d];
      devices.emplace_back("t/1", d, identities.at(id).signer(), by_index, params.graph().threshold,
                           params.fixed_point.bits);
      const float step = 0.05f * float(d + 1);
      const Model trained =
          float_model({0.5f + step, -1.0f - step, 2.0f, 0.0f + 2 * step}, {0.1f, -0.1f + step});
      const int64_t examples = 15 * (d + 1);
      inputs.push_back(
          secagg::quantise_update(global, trained, examples, {}, params.fixed_point, secagg::Bytes32{}));
      weights.push_back(std::min<uint32_t>(examples, 40));
    }
  }

  const SecureAggregationParams params;
  const Model global;
  const federated::ContributionLayout layout;
  std::unique_ptr<SecureRound> round;
  std::vector<secagg::DeviceSession> devices;
  std::vector<std::vector<uint32_t>> inputs;
  std::vector<uint32_t> weights;
};

TEST(SecureRound, TheStrategyReadsTheSurvivorsQuantisedUpdatesUnmasked) {
  const uint32_t n = 6;
  Simulated simulated(n);
  SecureRound& round = *simulated.round;
  std::vector<secagg::DeviceSession>& devices = simulated.devices;
  const std::vector<std::vector<uint32_t>>& inputs = simulated.inputs;
  secagg::CoordinatorSession& session = round.session();
  for (secagg::DeviceIndex d = 0; d < n; ++d) session.receive_advertisement(devices[d].advertise_keys());
  session.close_advertising();
  for (secagg::DeviceIndex d = 0; d < n; ++d)
    session.receive_shares(d, devices[d].share_keys(session.keys_for(d)));
  session.close_sharing();
  const secagg::DeviceIndex gone = 2;  // after sharing its keys
  for (secagg::DeviceIndex d = 0; d < n; ++d)
    if (d != gone)
      session.receive_masked_input(d, devices[d].masked_input(session.envelopes_for(d), inputs[d]));
  const secagg::UnmaskRequest request = session.close_masking();
  for (secagg::DeviceIndex d : request.survivors)
    session.receive_survivors_signature(d, devices[d].consistency_check(session.view_of(d)));
  session.close_consistency_check();
  for (secagg::DeviceIndex d : request.survivors)
    session.receive_unmask_response(d, devices[d].unmask(session.request_for(d), session.signatures_for(d)));
  const federated::WeightedSumReader reader = round.weighted_sum(simulated.global, session.close_unmasking());

  std::vector<federated::DeviceId> survivors;
  for (secagg::DeviceIndex d = 0; d < n; ++d)
    if (d != gone) survivors.push_back(round.devices()[d]);
  EXPECT_EQ(round.contributors(), survivors);
  expect_sum_of(reader, simulated.global, inputs, simulated.weights, gone,
                simulated.params.fixed_point.step());
}

TEST(SecureRound, ASelectionOtherThanTheTasksAndABadKeyAreRefusedByName) {
  const SecureAggregationParams params = secure_params(6);
  const federated::ContributionLayout layout(float_model({1}, {1}).spec());
  std::map<federated::DeviceId, std::string> five;
  for (int i = 0; i < 5; ++i) five["d" + std::to_string(i)] = std::string(32, char(i));
  EXPECT_NE(tn::test::message_of<federated::ParameterRefused>([&] {
              SecureRound(params, "r", five, layout);
            }).find("5 devices selected, the task's graph and headroom are derived for 6"),
            std::string::npos);
  five["d5"] = std::string(31, 'x');
  EXPECT_NE(tn::test::message_of<federated::ParameterRefused>([&] {
              SecureRound(params, "r", five, layout);
            }).find("device 'd5' has a registered key of 31 bytes"),
            std::string::npos);
}

// A SecAggStage call's answer, once the exchange gave it.
struct Answer {
  std::optional<grpc::Status> status;
  v1::SecAggStageResponse response;
};

std::shared_ptr<Answer> send(SecureExchange& exchange, const federated::DeviceId& device,
                             const v1::SecAggStagePayload& payload) {
  auto answer = std::make_shared<Answer>();
  exchange.take(device, payload,
                {&answer->response, [answer](const grpc::Status& status) { answer->status = status; }});
  return answer;
}

// The stage closes once every device expected sent its message or is gone: at once here.
void close_stage(SecureExchange& exchange, const std::set<federated::DeviceId>& gone = {}) {
  const auto far = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  const std::vector<federated::DeviceId> given_up = exchange.wait(
      far, [&](const federated::DeviceId& device) { return gone.contains(device); },
      std::chrono::milliseconds(1));
  EXPECT_EQ(std::set<federated::DeviceId>(given_up.begin(), given_up.end()), gone);
  exchange.close_stage();
}

TEST(SecureExchange, TheStagesOverItsCallsUnmaskTheSurvivorsSumAndAnswerEachWithTheNextInput) {
  const uint32_t n = 6;
  Simulated simulated(n);
  const std::vector<federated::DeviceId> ids = simulated.round->devices();
  const size_t words = simulated.round->words();
  SecureExchange exchange(std::move(simulated.round), 2);  // masked inputs in messages of 2 words
  std::vector<secagg::DeviceSession>& devices = simulated.devices;
  std::vector<std::shared_ptr<Answer>> answers(n);
  auto expect_answered = [&](v1::SecAggStageResponse::NextCase next, secagg::DeviceIndex skipped) {
    for (secagg::DeviceIndex d = 0; d < n; ++d)
      if (d != skipped) {
        ASSERT_TRUE(answers[d]->status && answers[d]->status->ok()) << d;
        EXPECT_EQ(answers[d]->response.next_case(), next) << d;
      }
  };
  for (secagg::DeviceIndex d = 0; d < n; ++d) {
    v1::SecAggStagePayload payload;
    *payload.mutable_advertisement() = proto::to_message(devices[d].advertise_keys());
    answers[d] = send(exchange, ids[d], payload);
    EXPECT_FALSE(answers[d]->status) << "held until the stage closes";
  }
  close_stage(exchange);
  expect_answered(v1::SecAggStageResponse::kNeighbourKeys, n);
  for (secagg::DeviceIndex d = 0; d < n; ++d) {
    const v1::SecAggNeighbourKeys& keys = answers[d]->response.neighbour_keys();
    v1::SecAggStagePayload payload;
    const secagg::Envelopes sealed =
        devices[d].share_keys(proto::advertisements_of(keys), proto::identities_of(keys));
    for (v1::SecAggEnvelope& envelope : proto::envelopes_from(d, sealed))
      *payload.mutable_shares()->add_envelopes() = std::move(envelope);
    answers[d] = send(exchange, ids[d], payload);
  }
  close_stage(exchange);
  expect_answered(v1::SecAggStageResponse::kEnvelopes, n);
  const secagg::DeviceIndex gone = 2;  // after sharing its keys
  for (secagg::DeviceIndex d = 0; d < n; ++d) {
    if (d == gone) continue;
    const auto& sealed = answers[d]->response.envelopes().envelopes();
    const std::vector<uint32_t> masked = devices[d].masked_input(
        proto::envelopes_for_recipient(d, {sealed.begin(), sealed.end()}), simulated.inputs[d]);
    const std::vector<v1::SecAggMaskedInput> chunks = proto::masked_input_messages(masked, 2);
    ASSERT_EQ(chunks.size(), (words + 1) / 2);
    for (const v1::SecAggMaskedInput& chunk : chunks) {
      v1::SecAggStagePayload payload;
      *payload.mutable_masked_input() = chunk;
      answers[d] = send(exchange, ids[d], payload);
      if (&chunk != &chunks.back()) {
        EXPECT_TRUE(answers[d]->status && answers[d]->response.chunk_taken());
      }
    }
  }
  close_stage(exchange, {ids[gone]});
  expect_answered(v1::SecAggStageResponse::kSurvivors, gone);
  for (secagg::DeviceIndex d = 0; d < n; ++d) {
    if (d == gone) continue;
    const secagg::UnmaskRequest shown = proto::from_message(answers[d]->response.survivors());
    v1::SecAggStagePayload payload;
    *payload.mutable_survivors_signature() =
        proto::to_message(d, devices[d].consistency_check(shown.survivors));
    answers[d] = send(exchange, ids[d], payload);
  }
  close_stage(exchange);
  expect_answered(v1::SecAggStageResponse::kUnmaskRequest, gone);
  for (secagg::DeviceIndex d = 0; d < n; ++d) {
    if (d == gone) continue;
    const v1::SecAggUnmaskRequest& request = answers[d]->response.unmask_request();
    v1::SecAggStagePayload payload;
    *payload.mutable_unmask_response() =
        proto::to_message(devices[d].unmask(proto::from_message(request), proto::signatures_of(request)));
    answers[d] = send(exchange, ids[d], payload);
  }
  close_stage(exchange);
  expect_answered(v1::SecAggStageResponse::kDone, gone);

  std::vector<federated::DeviceId> survivors = ids;
  survivors.erase(survivors.begin() + gone);
  EXPECT_EQ(exchange.contributors(), survivors);
  expect_sum_of(exchange.weighted_sum(simulated.global), simulated.global, simulated.inputs,
                simulated.weights, gone, simulated.params.fixed_point.step());
}

TEST(SecureExchange, MessagesOutOfTheirStageOrFromOutsideTheRoundAreRefusedByNameAndTooFewAbandonIt) {
  Simulated simulated(6);
  const std::vector<federated::DeviceId> ids = simulated.round->devices();
  const uint32_t threshold = simulated.params.graph().threshold;
  SecureExchange exchange(std::move(simulated.round), 2);
  auto refusal = [](const std::shared_ptr<Answer>& answer) {
    EXPECT_TRUE(answer->status && !answer->status->ok());
    return answer->status
               ? std::to_string(int(answer->status->error_code())) + " " + answer->status->error_message()
               : std::string("held");
  };
  v1::SecAggStagePayload shares;
  shares.mutable_shares();
  EXPECT_NE(refusal(send(exchange, ids[0], shares))
                .find("9 SecAggStage from device " + ids[0] +
                      " refused: a share keys message while the round is at its advertise keys stage"),
            std::string::npos);
  v1::SecAggStagePayload advertisement;
  *advertisement.mutable_advertisement() = proto::to_message(simulated.devices[1].advertise_keys());
  EXPECT_NE(refusal(send(exchange, "nobody", advertisement)).find("device 'nobody' is not selected"),
            std::string::npos);
  EXPECT_NE(refusal(send(exchange, ids[0], advertisement))
                .find("3 SecAggStage from device " + ids[0] +
                      " refused: an advertisement for device index 1, this device's is 0"),
            std::string::npos);
  EXPECT_NE(refusal(send(exchange, ids[0], advertisement)).find("left out of the round"), std::string::npos)
      << "a device refused is out of the round";
  std::vector<std::shared_ptr<Answer>> held;
  for (secagg::DeviceIndex d = 1; d < threshold; ++d) {  // t - 1 advertise (device 1's made above)
    if (d > 1)
      *advertisement.mutable_advertisement() = proto::to_message(simulated.devices[d].advertise_keys());
    held.push_back(send(exchange, ids[d], advertisement));
  }
  EXPECT_NE(refusal(send(exchange, ids[1], advertisement)).find("a second one"), std::string::npos);
  std::set<federated::DeviceId> gone(ids.begin() + threshold, ids.end());
  EXPECT_THROW(close_stage(exchange, gone), secagg::SecAggRefused);
  for (const auto& answer : held)
    EXPECT_NE(refusal(answer).find("10 the secure round was abandoned at its advertise keys stage"),
              std::string::npos);
}

}  // namespace
}  // namespace tn::server
