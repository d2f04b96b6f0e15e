#include "federated/secure_contribution.h"

#include <memory>

namespace tn::federated::secagg {

namespace {

using Reason = SecAggRefused::Reason;

// `model`'s aggregated values in `spec`'s layout order, exactly as doubles (a Values layout packs
// them unweighted, checking the model against the spec and the example count against `limits`).
std::vector<double> values_of(const ModelSpec& spec, const Model& model, int64_t examples,
                              const UpdateLimits& limits) {
  const ContributionLayout values(spec, ContributionKind::Values);
  std::vector<double> out(values.elements());
  values.pack(model, examples, limits, out);
  out.resize(values.elements() - 2);  // the count and the tag dropped
  return out;
}

}  // namespace

std::vector<uint32_t> quantise_update(const Model& round_model, const Model& trained, int64_t examples,
                                      const UpdateLimits& limits, const FixedPointParameters& parameters,
                                      const Bytes32& rounding_seed) {
  const ModelSpec spec = round_model.spec();
  std::vector<double> update = values_of(spec, trained, examples, limits);
  const std::vector<double> base = values_of(spec, round_model, 1, UpdateLimits{});
  // quantise refuses by name a difference that is not finite (of finite values, it can overflow).
  for (size_t k = 0; k < update.size(); ++k) update[k] -= base[k];
  return quantise(update, static_cast<uint64_t>(examples), parameters, rounding_seed);
}

WeightedSumReader secure_weighted_sum(const ContributionLayout& layout, const Model& round_model,
                                      std::span<const uint32_t> unmasked_sum, uint32_t contributions,
                                      const FixedPointParameters& parameters) {
  if (layout.kind() != ContributionKind::WeightedSum)
    throw SecAggRefused(Reason::Parameter,
                        "secure contribution: a layout of the Values kind (a robust strategy)");
  if (unmasked_sum.size() != layout.elements())
    throw SecAggRefused(Reason::Parameter, "secure contribution: an unmasked sum of " +
                                               std::to_string(unmasked_sum.size()) +
                                               " words, the layout has " + std::to_string(layout.elements()));
  auto sum = std::make_shared<Dequantised>(dequantise(unmasked_sum, contributions, parameters));
  auto base =
      std::make_shared<std::vector<double>>(values_of(round_model.spec(), round_model, 1, UpdateLimits{}));
  const double weight = static_cast<double>(sum->total_weight);
  return layout.weighted_sum_reader([sum, base, weight](size_t first, std::span<double> out) {
    for (size_t j = 0; j < out.size(); ++j) {
      const size_t k = first + j;
      out[j] = k == base->size() ? weight : weight * (*base)[k] + sum->weighted_sum[k];
    }
  });
}

}  // namespace tn::federated::secagg
