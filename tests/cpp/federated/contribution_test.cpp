// Aggregating from what the hub delivers: the packed contributions' sum and the per-device
// readers, each giving the bits aggregating the individual updates gives.
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
#include "federated/strategy.h"
#include "federated_test_util.h"

namespace tn::federated {
namespace {

// The hub sums the devices' packed contributions in ascending device-id order, as its
// deadline reduce does; the FedAvg family must aggregate that sum to the same bits as the
// individual updates.
TEST(Contribution, HubSumOfPackedUpdatesAggregatesLikeTheUpdates) {
  for (ScalarType dtype : kFloatTypes) {
    SCOPED_TRACE(scalar_type_name(dtype));
    Federation federation = make_federation(dtype, 5000, 5, 900 + uint64_t(dtype));
    ContributionLayout layout(federation.spec);
    std::vector<const Update*> by_id;
    for (const Update& update : federation.updates) by_id.push_back(&update);
    std::sort(by_id.begin(), by_id.end(),
              [](const Update* a, const Update* b) { return a->device_id < b->device_id; });
    std::vector<double> sum(layout.elements(), 0.0), packed(layout.elements());
    for (const Update* update : by_id) {
      layout.pack(update->model, update->num_examples, UpdateLimits{}, packed);
      EXPECT_EQ(layout.check(packed, UpdateLimits{}), std::nullopt);
      for (size_t i = 0; i < sum.size(); ++i) sum[i] = sum[i] + packed[i];
    }
    WeightedSum expected = float64_sums(federation);
    WeightedSum got = layout.weighted_sum(sum);
    EXPECT_EQ(got.total_weight, expected.total_weight);
    EXPECT_TRUE(same_bytes(got.sum, expected.sum));
    for (const char* name : {"fedavg", "fedadam"}) {
      auto from_updates = make_strategy(name, json::object());
      auto from_sum = make_strategy(name, json::object());
      EXPECT_TRUE(same_bytes(from_updates->aggregate(federation.global, federation.updates),
                             from_sum->aggregate_from_weighted_sum(federation.global, got)))
          << name;
    }
  }
}

TEST(Contribution, HubRefusesNonFiniteValuesAndBadCountsByName) {
  Federation federation = make_federation(ScalarType::Float, 10, 1, 77);
  ContributionLayout layout(federation.spec);
  std::vector<double> packed(layout.elements());
  layout.pack(federation.updates[0].model, 3, UpdateLimits{}, packed);
  auto refused = [&](size_t index, double value) {
    std::vector<double> bad = packed;
    bad[index] = value;
    return layout.check(bad, UpdateLimits{}).value_or("accepted");
  };
  EXPECT_EQ(refused(12, std::nan("")), "tensor 'layer.bias' has a non-finite value at index 2");
  EXPECT_NE(refused(0, INFINITY).find("'layer.weight'"), std::string::npos);
  EXPECT_NE(refused(layout.elements() - 1, 0).find("example count"), std::string::npos);
  EXPECT_NE(refused(layout.elements() - 1, 2.5).find("example count"), std::string::npos);
  EXPECT_EQ(layout.check(std::span<const double>(packed).first(3), UpdateLimits{}).value_or("accepted"),
            "the contribution has 3 elements, the layout " + std::to_string(layout.elements()));
  EXPECT_THROW(layout.pack(federation.updates[0].model, 0, UpdateLimits{}, packed), UpdateRefused);
  // Checked in parts, as segments land at the hub: the same verdicts, indices within the tensor.
  std::vector<double> bad = packed;
  bad[12] = std::nan("");
  std::span<const double> all(bad);
  EXPECT_EQ(layout.check_part(0, all.first(11), UpdateLimits{}), std::nullopt);
  EXPECT_EQ(layout.check_part(11, all.subspan(11, 3), UpdateLimits{}).value_or("accepted"),
            "tensor 'layer.bias' has a non-finite value at index 2");
  EXPECT_EQ(layout.check_part(14, all.subspan(14), UpdateLimits{}), std::nullopt);
  bad.back() = -1;
  EXPECT_NE(layout.check_part(14, std::span<const double>(bad).subspan(14), UpdateLimits{})
                .value_or("accepted")
                .find("example count"),
            std::string::npos);
  EXPECT_NE(
      layout.check_part(layout.elements(), all.first(1), UpdateLimits{}).value_or("accepted").find("beyond"),
      std::string::npos);
}

const std::vector<std::pair<std::string, json>> kRobustStrategies = {{"fedmedian", json::object()},
                                                                     {"trimmed_mean", {{"beta", 0.3}}},
                                                                     {"krum", {{"f", 2}}},
                                                                     {"multi_krum", {{"f", 1}, {"m", 3}}}};

// What a hub keeps of the robust strategies' round: each device's packed Values contribution
// [x ..., n, tag], in device-id order, as its deadline reduce leaves them apart.
std::vector<std::vector<double>> packed_values(const Federation& federation,
                                               const ContributionLayout& layout) {
  std::vector<const Update*> by_id;
  for (const Update& update : federation.updates) by_id.push_back(&update);
  std::sort(by_id.begin(), by_id.end(),
            [](const Update* a, const Update* b) { return a->device_id < b->device_id; });
  std::vector<std::vector<double>> packed;
  for (const Update* update : by_id) {
    packed.emplace_back(layout.elements());
    layout.pack(update->model, update->num_examples, UpdateLimits{}, packed.back());
  }
  return packed;
}

// The robust strategies read the packed values a range at a time, chunks cutting tensors
// mid-way or not, and must give the bits of aggregate() on the individual updates.
TEST(Contribution, RobustStrategiesReadingPackedValuesGiveTheBitsOfTheUpdates) {
  for (ScalarType dtype : kFloatTypes) {
    Federation federation = make_federation(dtype, 1000, 7, 950 + uint64_t(dtype));
    ContributionLayout layout(federation.spec, ContributionKind::Values);
    std::vector<std::vector<double>> packed = packed_values(federation, layout);
    for (size_t i = 0; i < packed.size(); ++i) {
      EXPECT_EQ(layout.check(packed[i], UpdateLimits{}), std::nullopt);
      // The values themselves, then the example count and the tag: nothing is weighted.
      EXPECT_EQ(packed[i][0], double(federation.values[i][0][0]));
      EXPECT_EQ(packed[i][packed[i].size() - 2], double(federation.examples[i]));
    }
    // 1000 weight elements, 6 bias, 4 head: 7 and 333 cut tensors mid-way, 4 cuts the bias, 0
    // is the strategies' own chunking.
    for (int64_t chunk : {int64_t{0}, int64_t{1}, int64_t{4}, int64_t{7}, int64_t{333}}) {
      size_t largest_read = 0;
      UpdatesReader reader =
          layout.updates_reader(packed.size(), [&](size_t update, size_t first, std::span<double> out) {
            largest_read = std::max(largest_read, out.size());
            std::copy_n(packed[update].begin() + std::ptrdiff_t(first), out.size(), out.begin());
          });
      reader.chunk_elements = chunk;
      for (const auto& [name, params] : kRobustStrategies) {
        SCOPED_TRACE(name + ", " + scalar_type_name(dtype) + ", chunks of " + std::to_string(chunk));
        largest_read = 0;
        Model expected = make_strategy(name, params)->aggregate(federation.global, federation.updates);
        Model got = make_strategy(name, params)->aggregate_from_updates(federation.global, reader);
        EXPECT_TRUE(same_bytes(expected, got));
        if (chunk > 0) {
          EXPECT_LE(largest_read, size_t(chunk));
        }
      }
    }
  }
}

TEST(Contribution, EachKindIsReadOnlyAsItsOwn) {
  Federation federation = make_federation(ScalarType::Float, 10, 5, 960);
  ContributionLayout weighted(federation.spec), values(federation.spec, ContributionKind::Values);
  EXPECT_EQ(contribution_kind_for(*make_strategy("fedadam")), ContributionKind::WeightedSum);
  for (const auto& [name, params] : kRobustStrategies)
    EXPECT_EQ(contribution_kind_for(*make_strategy(name, params)), ContributionKind::Values) << name;
  EXPECT_EQ(message_of<ParameterRefused>(
                [&] { values.weighted_sum_reader([](size_t, std::span<double> out) { out[0] = 1; }); }),
            "contribution sum: the layout's contributions are values");
  EXPECT_EQ(message_of<ParameterRefused>(
                [&] { weighted.updates_reader(5, [](size_t, size_t, std::span<double>) {}); }),
            "contributions: the layout's contributions are weighted sums");
  // A Values contribution is one element longer (its tag), so one packed as weighted sums (by a
  // device that predates the kinds) cannot pass for values: the hub's reduce refuses its size,
  // and a contribution of the right size without the tag is refused by the check, segment by
  // segment as well as whole.
  EXPECT_EQ(values.elements(), weighted.elements() + 1);
  std::vector<double> packed(values.elements());
  values.pack(federation.updates[0].model, 4, UpdateLimits{}, packed);
  EXPECT_EQ(values.check(packed, UpdateLimits{}), std::nullopt);
  EXPECT_EQ(packed[weighted.elements() - 1], 4.0);  // n follows the values, as in a weighted sum
  packed.back() = 4.0;
  const std::string untagged =
      "the contribution does not end with the values tag: it was not packed as values";
  EXPECT_EQ(values.check(packed, UpdateLimits{}).value_or("accepted"), untagged);
  EXPECT_EQ(values.check_part(packed.size() - 1, std::span<const double>(packed).last(1), UpdateLimits{})
                .value_or("accepted"),
            untagged);
  std::vector<double> as_weighted(weighted.elements());
  weighted.pack(federation.updates[0].model, 4, UpdateLimits{}, as_weighted);
  EXPECT_NE(values.check(as_weighted, UpdateLimits{}).value_or("accepted").find("elements"),
            std::string::npos);
}

TEST(Contribution, UpdatesReadersRefuseWhatDoesNotFitByName) {
  Federation federation = make_federation(ScalarType::Float, 10, 5, 970);
  ContributionLayout layout(federation.spec, ContributionKind::Values);
  std::vector<std::vector<double>> packed = packed_values(federation, layout);
  UpdatesReader reader =
      layout.updates_reader(packed.size(), [&](size_t update, size_t first, std::span<double> out) {
        std::copy_n(packed[update].begin() + std::ptrdiff_t(first), out.size(), out.begin());
      });
  std::vector<double> out(3);
  const NamedTensor& bias = federation.global.tensors[1];
  EXPECT_EQ(message_of<Refused>([&] { reader.read(5, bias, 0, out); }), "contributions: update 5 of 5");
  EXPECT_EQ(message_of<Refused>([&] { reader.read(0, bias, 4, out); }),
            "contributions: elements 4 to 7 lie beyond tensor 'layer.bias'");
  EXPECT_EQ(message_of<Refused>([&] { reader.read(0, federation.global.tensors[3], 0, {}); }),
            "contributions: the model's tensor 'bn.num_batches_tracked' is not in the contribution layout");
  // Krum's n >= 2f + 3 holds for the reader as for the updates.
  EXPECT_EQ(message_of<Refused>([&] {
              make_strategy("krum", {{"f", 2}})->aggregate_from_updates(federation.global, reader);
            }),
            "krum: needs at least 2f+3 = 7 updates, got 5");
  UpdatesReader none{0, reader.read};
  EXPECT_EQ(message_of<Refused>(
                [&] { make_strategy("fedmedian")->aggregate_from_updates(federation.global, none); }),
            "fedmedian: needs at least 1 update, got 0");
  // A read that fails refuses the updates, and the strategy's rounds do not advance.
  UpdatesReader failing{5, [](size_t, const NamedTensor&, int64_t, std::span<double>) {
                          throw Refused("the hub could not read its spool");
                        }};
  auto median = make_strategy("fedmedian");
  EXPECT_EQ(message_of<Refused>([&] { median->aggregate_from_updates(federation.global, failing); }),
            "the hub could not read its spool");
  EXPECT_EQ(median->rounds(), 0u);
  EXPECT_EQ(message_of<Unsupported>(
                [&] { make_strategy("fedavg")->aggregate_from_updates(federation.global, reader); }),
            "fedavg: aggregates from the weighted sum, which needs the example counts");
}

}  // namespace
}  // namespace tn::federated
