// A round's update in secure aggregation (secure_contribution.h): each device's quantised update
// is its clipped, weighted difference from the round's model, rounded to a neighbouring integer;
// the strategy reads W times the round's model plus the dequantised sum, bit for bit as computed
// here from the words the devices produced (their integers summed in int64, not modulo 2^bits).
//
// The models' values are read back with the hub's own WeightedSum pack at weight 1 (1 * x is x),
// not the Values pack quantise_update uses.
#include <gtest/gtest.h>
#include <sodium.h>

#include <algorithm>
#include <cmath>

#include "federated/secure_contribution.h"
#include "federated_test_util.h"
#include "secagg_test_util.h"

namespace tn::federated::secagg {
namespace {

std::vector<double> packed_values(const ContributionLayout& layout, const Model& model) {
  std::vector<double> out(layout.elements());
  layout.pack(model, 1, UpdateLimits{}, out);
  out.pop_back();  // the weight 1
  return out;
}

int64_t signed_word(uint32_t word, unsigned bits) {
  const int64_t value = word;
  return value >= (int64_t{1} << (bits - 1)) ? value - (int64_t{1} << bits) : value;
}

FixedPointParameters parameters(unsigned bits, uint32_t devices) {
  const uint32_t max_weight = 50;
  return {.bits = bits,
          .range = 0.5,
          .levels = largest_levels(bits, devices, max_weight, 0),
          .max_weight = max_weight,
          .max_devices = devices};
}

class SecAggContribution : public testing::TestWithParam<unsigned> {};

TEST_P(SecAggContribution, TheStrategyReadsTheRoundsModelTimesWPlusTheDevicesQuantisedSum) {
  const unsigned bits = GetParam();
  const Federation federation = make_federation(ScalarType::Float, 300, 6, 11);
  const ContributionLayout layout(federation.spec);
  const FixedPointParameters p = parameters(bits, 6);
  const std::vector<double> base = packed_values(layout, federation.global);
  std::vector<uint64_t> modular(layout.elements(), 0);  // the sum the masks leave, modulo 2^bits
  std::vector<int64_t> integers(layout.elements(), 0);  // the same sum, of the decoded integers
  uint64_t total_weight = 0;
  for (const Update& update : federation.updates) {
    const std::vector<uint32_t> words = quantise_update(federation.global, update.model, update.num_examples,
                                                        UpdateLimits{}, p, random_secret());
    ASSERT_EQ(words.size(), layout.elements());
    const uint64_t weight = std::min<uint64_t>(update.num_examples, p.max_weight);
    ASSERT_EQ(words.back(), weight);
    total_weight += weight;
    const std::vector<double> trained = packed_values(layout, update.model);
    for (size_t k = 0; k + 1 < words.size(); ++k) {
      // The integer is floor or ceil of weight * clamp(x - g) / step.
      const long double y = weight *
                            std::clamp<long double>((long double)trained[k] - base[k], -p.range, p.range) /
                            ((long double)p.range / p.levels);
      const int64_t q = signed_word(words[k], bits);
      ASSERT_TRUE(q == std::floor(y) || q == std::ceil(y))
          << "element " << k << ": " << q << " for " << (double)y;
      integers[k] += q;
    }
    for (size_t k = 0; k < words.size(); ++k)
      modular[k] = (modular[k] + words[k]) & ((uint64_t{1} << bits) - 1);
  }
  const std::vector<uint32_t> sum(modular.begin(), modular.end());
  const WeightedSumReader reader = secure_weighted_sum(layout, federation.global, sum, 6, p);
  EXPECT_EQ(reader.total_weight, double(total_weight));
  size_t k = 0, differing = 0;
  for (const NamedTensor& tensor : federation.global.tensors) {
    if (!is_floating(tensor.dtype)) continue;
    std::vector<double> read(size_t(tensor.numel()));
    reader.read(tensor, 0, read);
    for (double value : read) {
      const double want = double(total_weight) * base[k] + double(integers[k]) * p.step();
      differing += std::memcmp(&value, &want, sizeof value) != 0;
      ++k;
    }
  }
  EXPECT_EQ(k, layout.elements() - 1);
  EXPECT_EQ(differing, 0u) << "of " << k;
}

INSTANTIATE_TEST_SUITE_P(Bits, SecAggContribution, testing::Values(32u, 20u));

TEST(SecAggContributionRefusals, WhatCannotBeQuantisedOrDequantisedIsRefusedByName) {
  const Federation federation = make_federation(ScalarType::Float, 7, 3, 5);
  const ContributionLayout layout(federation.spec);
  const FixedPointParameters p = parameters(32, 3);
  const Model& global = federation.global;
  EXPECT_THROW(quantise_update(global, global, 0, UpdateLimits{}, p, random_secret()), UpdateRefused);
  const Federation other = make_federation(ScalarType::Double, 7, 3, 5);
  EXPECT_THROW(quantise_update(global, other.global, 1, UpdateLimits{}, p, random_secret()), UpdateRefused);
  const std::vector<uint32_t> words = quantise_update(global, global, 2, UpdateLimits{}, p, random_secret());
  EXPECT_NE(
      refusal_of([&] {
        secure_weighted_sum(layout, global, std::span(words).first(words.size() - 1), 1, p);
      }).message.find("an unmasked sum of " + std::to_string(words.size() - 1) + " words, the layout has"),
      std::string::npos);
  EXPECT_NE(
      refusal_of([&] { secure_weighted_sum(layout, global, words, 4, p); }).message.find("4 contributions"),
      std::string::npos);
  const ContributionLayout values(federation.spec, ContributionKind::Values);
  std::vector<uint32_t> longer = words;
  longer.push_back(0);
  EXPECT_NE(
      refusal_of([&] { secure_weighted_sum(values, global, longer, 1, p); }).message.find("Values kind"),
      std::string::npos);
}

}  // namespace
}  // namespace tn::federated::secagg
