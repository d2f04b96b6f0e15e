// A device's side of a secure aggregation round (RoundConfig.secure_aggregation;
// docs/secure_aggregation.md): its trained update quantised to the round's fixed point, then
// SecAgg+'s stages run by a DeviceSession, each stage's message sent by a SecAggStage call whose
// answer is the next stage's input.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "client/device.h"
#include "federated/secure_aggregation.h"

namespace tn::client {

// One SecAggStage call: the payload signed and sent, the coordinator's answer returned; throws
// what fails it.
using StageCall = std::function<v1::SecAggStageResponse(const v1::SecAggStagePayload& payload)>;

// The trained model's update from `global`, quantised as the round says (quantise_update), its
// stochastic rounding seeded fresh from libsodium.
std::vector<uint32_t> quantised_update(const v1::SecAggRound& round, const federated::Model& global,
                                       const TrainResult& trained);

// The words the device masks: `quantised` with, when the round has distributed DP, its noise share
// added to each coordinate (not the weight word): N_Z(0, sigma^2) draws with the per-device variance
// plan_distributed_noise gives for the round's multiplier and noise_min_devices, seeded fresh from
// libsodium. The noiseless words stay the device's own (RoundReport.quantised).
std::vector<uint32_t> noised_input(const v1::SecAggRound& round, std::vector<uint32_t> quantised);

// Delivers a masked input by another way than SecAggStage (the hub's reduce of the round's data
// plane); throws unless it was delivered whole.
using MaskedInputDelivery = std::function<void(const std::vector<uint32_t>& masked)>;

// The five stages for `input` (quantised_update's words), signing with `sign` (the device's
// registered key). The masked input goes by `deliver_on_plane` when given, then a
// masked_input_on_data_plane message says so; otherwise in masked_input messages. Throws, naming
// the stage, what the session or the coordinator refuses, and an answer that is not the one its
// stage expects.
void run_secure_stages(const v1::RoundConfig& round, const std::vector<uint32_t>& input,
                       federated::secagg::Signer sign, const StageCall& call,
                       const MaskedInputDelivery& deliver_on_plane = {});

}  // namespace tn::client
