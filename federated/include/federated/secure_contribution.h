// A round's update in secure aggregation (issue 20 point 2; docs/secure_aggregation.md): what a
// device quantises and masks, and what the coordinator hands a mean-family strategy once the
// masked words are summed and unmasked.
//
// Device side, the update is the trained model minus the round's model over the contribution
// layout's aggregated elements (integer tensors are not sent), each difference taken in double
// from the two models' values, then quantised with fixed_point.h's quantise: layout.elements()
// words, the last the capped example count. Coordinator side, the unmasked sum of `contributions`
// such vectors dequantises to the weighted update sum S and the total weight W; the strategy
// reads W times the round's model plus S, weight W, so that its weighted mean is the round's
// model plus the weighted mean update, as central DP's sum is handed over (central_dp.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "federated/contribution.h"
#include "federated/fixed_point.h"
#include "federated/validation.h"

namespace tn::federated::secagg {

// The quantised update of `trained` (examples, checked against `limits` as pack() checks them)
// from `round_model`, whose spec `trained` must have: as many words as the WeightedSum layout of
// that spec has elements. Refuses (UpdateRefused) what pack() refuses of either model, and
// (SecAggRefused Parameter) what quantise refuses, among it a difference that is not finite (of
// finite values, it can still overflow).
std::vector<uint32_t> quantise_update(const Model& round_model, const Model& trained, int64_t examples,
                                      const UpdateLimits& limits, const FixedPointParameters& parameters,
                                      const Bytes32& rounding_seed);

// What a mean-family strategy reads from `unmasked_sum`, the sum of `contributions` quantise_update
// vectors for `round_model`, whose WeightedSum layout `layout` is. Refuses (SecAggRefused
// Parameter) a Values layout, a sum of the wrong length and what dequantise refuses, before the
// strategy reads anything.
WeightedSumReader secure_weighted_sum(const ContributionLayout& layout, const Model& round_model,
                                      std::span<const uint32_t> unmasked_sum, uint32_t contributions,
                                      const FixedPointParameters& parameters);

}  // namespace tn::federated::secagg
