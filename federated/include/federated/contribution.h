// What one device puts into the round's hub reduce: a flat float64 vector
//
//   [ n * x  for every element of every aggregated tensor, in the model's order ...,  n ]
//
// where x is the trained model and n its example count. The hub sums the contributions of the
// devices that delivered (ascending rank = device-id order) and reads the sum back as a
// WeightedSum, which the FedAvg family aggregates from; because each product n * x and each
// sum is rounded in double exactly as the strategies round them, the result has the same bits
// as aggregating the individual updates. Integer tensors are not sent: the aggregate keeps the
// global model's values. The layout is fixed by the task's ModelSpec, so a contribution
// carries no names, shapes or dtypes a device could get wrong.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "federated/model.h"
#include "federated/strategy.h"
#include "federated/validation.h"

namespace tn::federated {

class ContributionLayout {
 public:
  explicit ContributionLayout(const ModelSpec& spec);
  // Aggregated elements plus one for the example count.
  size_t elements() const { return elements_; }
  size_t bytes() const { return elements_ * sizeof(double); }

  // Device side. Refuses (UpdateRefused) a model that does not match the spec, a non-finite
  // value or an example count outside [1, limits.max_examples], as the hub would.
  void pack(const Model& trained, int64_t num_examples, const UpdateLimits& limits,
            std::span<double> out) const;

  // Hub side, for each contribution before it counts: why it is refused (a non-finite value,
  // naming the tensor and index, or a bad example count), or nothing when it is acceptable.
  std::optional<std::string> check(std::span<const double> contribution, const UpdateLimits& limits) const;
  // The same, for the part of a contribution that starts at element `first` (the hub checks
  // each segment as it lands, dist::ContributionCheck).
  std::optional<std::string> check_part(size_t first, std::span<const double> part,
                                        const UpdateLimits& limits) const;

  // Hub side: the contributors' summed vector as float64 tensors and their total weight.
  WeightedSum weighted_sum(std::span<const double> sum) const;
  // The same for a hub that never holds the summed vector: fold(first, out) fills out with its
  // elements [first, first + out.size()). The total weight is read at once.
  WeightedSumReader weighted_sum_reader(std::function<void(size_t first, std::span<double> out)> fold) const;

 private:
  struct Slot {
    TensorSpec spec;
    size_t offset;  // in elements
  };
  std::vector<Slot> slots_;  // aggregated tensors only
  ModelSpec spec_;
  size_t elements_ = 1;
};

}  // namespace tn::federated
