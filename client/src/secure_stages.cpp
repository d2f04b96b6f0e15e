#include "client/secure_stages.h"

#include <sodium.h>

#include <map>
#include <stdexcept>
#include <string>

#include "federated/dp_noise.h"
#include "federated/secure_contribution.h"
#include "federated/secure_session.h"
#include "federated/validation.h"
#include "proto/secure_aggregation_messages.h"

namespace tn::client {

namespace {

namespace secagg = federated::secagg;
using secagg::DeviceIndex;
using Next = v1::SecAggStageResponse::NextCase;

secagg::FixedPointParameters fixed_point_of(const v1::SecAggRound& round) {
  secagg::FixedPointParameters parameters;
  parameters.bits = round.bits();
  if (round.has_l2_bound()) parameters.l2_bound = round.l2_bound();
  parameters.range = round.clip_range();
  parameters.levels = round.levels();
  parameters.max_weight = round.max_weight();
  parameters.max_devices = round.max_devices();
  return parameters;
}

// The coordinator's answer to a stage's message, refused unless it is of the kind expected.
const v1::SecAggStageResponse& expect(const v1::SecAggStageResponse& response, Next next, const char* stage) {
  if (response.next_case() != next)
    throw std::runtime_error(std::string("secure round: the coordinator answered the ") + stage +
                             " stage with answer " + std::to_string(int(response.next_case())) +
                             ", not the next stage's input (" + std::to_string(int(next)) + ")");
  return response;
}

}  // namespace

std::vector<uint32_t> quantised_update(const v1::SecAggRound& round, const federated::Model& global,
                                       const TrainResult& trained) {
  if (sodium_init() < 0) throw std::runtime_error("secure round: libsodium could not be initialised");
  secagg::Bytes32 rounding_seed;
  randombytes_buf(rounding_seed.data(), rounding_seed.size());
  return secagg::quantise_update(global, trained.model, trained.num_examples, federated::UpdateLimits{},
                                 fixed_point_of(round), rounding_seed);
}

std::vector<uint32_t> noised_input(const v1::SecAggRound& round, std::vector<uint32_t> quantised) {
  if (!round.has_noise_multiplier()) return quantised;
  const size_t coordinates = quantised.size() - 1;  // the last word is the weight, not noised
  const secagg::DistributedNoise plan = secagg::plan_distributed_noise(
      fixed_point_of(round), coordinates, round.noise_multiplier(), round.noise_min_devices());
  secagg::Bytes32 noise_seed;
  randombytes_buf(noise_seed.data(), noise_seed.size());
  secagg::add_noise_share(std::span(quantised.data(), coordinates), round.bits(), plan.per_device,
                          noise_seed);
  return quantised;
}

void run_secure_stages(const v1::RoundConfig& round, const std::vector<uint32_t>& input, secagg::Signer sign,
                       const StageCall& call, const MaskedInputDelivery& deliver_on_plane) {
  const v1::SecAggRound& secure = round.secure_aggregation();
  if (secure.words_per_message() == 0)
    throw std::runtime_error("secure round: words_per_message 0 leaves no room for the masked input");
  const DeviceIndex me = secure.device_index();
  // No identities yet: its neighbours' come with their keys, and it is sent no others.
  secagg::DeviceSession session(secure.session(), me, std::move(sign), {}, secure.threshold(), secure.bits());
  v1::SecAggStagePayload base;
  base.set_task_id(round.task_id());
  base.set_round_id(round.round_id());

  v1::SecAggStagePayload payload = base;
  *payload.mutable_advertisement() = proto::to_message(session.advertise_keys());
  v1::SecAggStageResponse answer = expect(call(payload), Next::kNeighbourKeys, "advertise keys");
  const secagg::Envelopes sealed = session.share_keys(proto::advertisements_of(answer.neighbour_keys()),
                                                      proto::identities_of(answer.neighbour_keys()));

  payload = base;
  for (v1::SecAggEnvelope& envelope : proto::envelopes_from(me, sealed))
    *payload.mutable_shares()->add_envelopes() = std::move(envelope);
  answer = expect(call(payload), Next::kEnvelopes, "share keys");
  const secagg::Envelopes received = proto::envelopes_for_recipient(
      me, {answer.envelopes().envelopes().begin(), answer.envelopes().envelopes().end()});

  const std::vector<uint32_t> masked = session.masked_input(received, input);
  if (deliver_on_plane) {
    deliver_on_plane(masked);
    payload = base;
    payload.mutable_masked_input_on_data_plane();
    answer = expect(call(payload), Next::kSurvivors, "masked input");
  } else {
    const std::vector<v1::SecAggMaskedInput> chunks =
        proto::masked_input_messages(masked, secure.words_per_message());
    for (size_t i = 0; i < chunks.size(); ++i) {
      payload = base;
      *payload.mutable_masked_input() = chunks[i];
      answer =
          expect(call(payload), i + 1 < chunks.size() ? Next::kChunkTaken : Next::kSurvivors, "masked input");
    }
  }

  payload = base;
  const secagg::UnmaskRequest shown = proto::from_message(answer.survivors());
  *payload.mutable_survivors_signature() = proto::to_message(me, session.consistency_check(shown.survivors));
  answer = expect(call(payload), Next::kUnmaskRequest, "consistency check");

  payload = base;
  *payload.mutable_unmask_response() = proto::to_message(session.unmask(
      proto::from_message(answer.unmask_request()), proto::signatures_of(answer.unmask_request())));
  expect(call(payload), Next::kDone, "unmask");
}

}  // namespace tn::client
