// A secure round on the coordinator (secure_round.h) with devices simulated in process: each
// quantises its trained model's update (federated/secure_contribution.h) and runs the stages with
// a DeviceSession; one vanishes after sharing its keys. The strategy's weighted sum is, bit for
// bit, W times the round's model plus step times the survivors' quantised integers summed here
// in int64, W their capped example counts; the contributors are the survivors' ids.
#include "secure_round.h"

#include <gtest/gtest.h>

#include <cstring>

#include "federated/errors.h"
#include "federated/secure_contribution.h"
#include "round_params.h"
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

TEST(SecureRound, TheStrategyReadsTheSurvivorsQuantisedUpdatesUnmasked) {
  const uint32_t n = 6;
  const SecureAggregationParams params = secure_params(n);
  const Model global = float_model({0.5f, -1.0f, 2.0f, 0.0f}, {0.1f, -0.1f});
  const federated::ContributionLayout layout(global.spec());
  std::map<federated::DeviceId, std::string> registry;
  std::map<federated::DeviceId, secagg::IdentityKeys> identities;
  for (uint32_t i = 0; i < n; ++i) {
    const federated::DeviceId id = "device-" + std::string(1, char('f' - i));  // ids not in creation order
    identities[id] = secagg::IdentityKeys::generate();
    registry[id] = std::string(reinterpret_cast<const char*>(identities[id].public_key.data()), 32);
  }
  SecureRound round(params, "t/1", registry, layout);
  const uint32_t threshold = params.graph().threshold;
  std::map<secagg::DeviceIndex, secagg::Bytes32> by_index;
  for (const auto& [id, keys] : identities) by_index[round.index_of(id)] = keys.public_key;
  std::vector<secagg::DeviceSession> devices;
  std::vector<std::vector<uint32_t>> inputs;
  std::vector<uint32_t> weights;
  for (secagg::DeviceIndex d = 0; d < n; ++d) {
    const federated::DeviceId& id = round.devices()[d];
    devices.emplace_back("t/1", d, identities.at(id).signer(), by_index, threshold, params.fixed_point.bits);
    const float step = 0.05f * float(d + 1);  // the last devices' updates are clipped to 0.25
    const Model trained =
        float_model({0.5f + step, -1.0f - step, 2.0f, 0.0f + 2 * step}, {0.1f, -0.1f + step});
    const int64_t examples = 15 * (d + 1);  // above max_weight 40 from the third device on
    inputs.push_back(
        secagg::quantise_update(global, trained, examples, {}, params.fixed_point, secagg::Bytes32{}));
    weights.push_back(std::min<uint32_t>(examples, 40));
  }
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
    session.receive_survivors_signature(d, devices[d].consistency_check(request.survivors));
  const std::map<secagg::DeviceIndex, secagg::Signature> signatures = session.close_consistency_check();
  for (secagg::DeviceIndex d : request.survivors)
    session.receive_unmask_response(d, devices[d].unmask(request, signatures));
  const federated::WeightedSumReader reader = round.weighted_sum(global, session.close_unmasking());

  std::vector<federated::DeviceId> survivors;
  std::vector<int64_t> integers(layout.elements() - 1, 0);
  uint64_t total_weight = 0;
  for (secagg::DeviceIndex d = 0; d < n; ++d) {
    if (d == gone) continue;
    survivors.push_back(round.devices()[d]);
    total_weight += weights[d];
    for (size_t k = 0; k < integers.size(); ++k) integers[k] += signed_word(inputs[d][k]);
  }
  EXPECT_EQ(round.contributors(), survivors);
  EXPECT_EQ(reader.total_weight, double(total_weight));
  const std::vector<double> base = {0.5, -1.0, 2.0, 0.0, double(0.1f), double(-0.1f)};
  std::vector<double> read(4);
  reader.read(global.tensors[0], 0, read);
  std::vector<double> bias(2);
  reader.read(global.tensors[1], 0, bias);
  read.insert(read.end(), bias.begin(), bias.end());
  for (size_t k = 0; k < read.size(); ++k) {
    const double want = double(total_weight) * base[k] + double(integers[k]) * params.fixed_point.step();
    EXPECT_EQ(std::memcmp(&read[k], &want, sizeof want), 0)
        << "element " << k << ": " << read[k] << " vs " << want;
  }
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

}  // namespace
}  // namespace tn::server
