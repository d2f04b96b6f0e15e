// What one device puts into the round's hub reduce: a flat float64 vector, in one of two kinds
// (ContributionKind) chosen by the task's strategy,
//
//   WeightedSum  [ n * x  for every element of every aggregated tensor, in the model's order ...,  n ]
//   Values       [     x  for every element of every aggregated tensor, in the model's order ...,  n, tag ]
//
// where x is the trained model and n its example count. For the FedAvg family the hub sums the
// WeightedSum contributions of the devices that delivered (ascending rank = device-id order)
// and reads the sum back as a WeightedSum; because each product n * x and each sum is rounded in
// double exactly as the strategies round them, the result has the same bits as aggregating the
// individual updates. The robust strategies (median, trimmed mean, Krum) ignore example counts
// and need each update's x apart: the hub keeps the Values contributions as they landed and
// reads each one's ranges back (UpdatesReader); x converts to double exactly, so again the bits
// are aggregate()'s. Either way n follows the values and is checked. A Values contribution ends
// with a fixed tag, so that one packed as the other kind (by a device that predates
// DataPlane.contribution, which would send weighted values) is one element short and refused
// by the hub's reduce as a frame of the wrong size, never read as values. Integer tensors are not
// sent: the aggregate keeps the global model's values. The layout is fixed by the task's
// ModelSpec, so a contribution carries no names, shapes or dtypes a device could get wrong.
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

enum class ContributionKind { WeightedSum, Values };

// The kind `strategy` aggregates from: WeightedSum when it aggregates from a weighted sum, else
// Values.
ContributionKind contribution_kind_for(const Strategy& strategy);

class ContributionLayout {
 public:
  explicit ContributionLayout(const ModelSpec& spec, ContributionKind kind = ContributionKind::WeightedSum);
  ContributionKind kind() const { return kind_; }
  // Aggregated elements, one for the example count and, for Values, one for the tag.
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

  // Hub side, WeightedSum layouts (ParameterRefused otherwise): the contributors' summed vector
  // as float64 tensors and their total weight.
  WeightedSum weighted_sum(std::span<const double> sum) const;
  // The same for a hub that never holds the summed vector: fold(first, out) fills out with its
  // elements [first, first + out.size()). The total weight is read at once.
  WeightedSumReader weighted_sum_reader(std::function<void(size_t first, std::span<double> out)> fold) const;
  // Hub side, Values layouts (ParameterRefused otherwise): the `count` contributions, numbered in
  // device-id order, as an UpdatesReader; read(update, first, out) fills out with elements
  // [first, first + out.size()) of that contribution.
  UpdatesReader updates_reader(
      size_t count, std::function<void(size_t update, size_t first, std::span<double> out)> read) const;

 private:
  friend class StreamingPacker;
  struct Slot {
    TensorSpec spec;
    size_t offset;  // in elements
  };
  void require_kind(ContributionKind kind, const char* what) const;
  // The layout's slots by tensor name, to find where elements [begin, begin + count) of a model
  // tensor lie in a contribution.
  class SlotIndex;

  std::vector<Slot> slots_;  // aggregated tensors only
  ModelSpec spec_;
  ContributionKind kind_;
  size_t count_index_ = 0;  // where n is
  size_t elements_ = 1;
};

// pack() for a receiver that never holds the trained model whole: the model's bytes (its tensors
// in the layout's spec order) arrive in pieces cut anywhere, even inside an element, and each is
// converted into `out` as it arrives, with the same values, checks and refusals as pack().
class StreamingPacker {
 public:
  // Refuses (UpdateRefused) an example count outside [1, limits.max_examples]; `device` names the
  // sender in refusals. `out` has layout.elements() values and outlives the packer.
  StreamingPacker(const ContributionLayout& layout, std::string device, int64_t num_examples,
                  const UpdateLimits& limits, std::span<double> out);
  // `bytes` of the spec's tensor `tensor`, starting at its byte `offset`; a tensor's pieces come in
  // order and back to back. Refuses (UpdateRefused) a NaN or an infinity, naming the tensor and
  // its index, and a piece out of order or beyond its tensor (Refused).
  void add(size_t tensor, uint64_t offset, std::span<const std::byte> bytes);
  // Every byte has arrived: writes the example count (and the values tag). Refuses (Refused) a
  // model that did not arrive whole.
  void finish();

 private:
  void put(const ContributionLayout::Slot& slot, size_t index, const std::byte* element);

  const ContributionLayout& layout_;
  const std::string device_;
  const double weight_;
  const std::span<double> out_;
  std::vector<std::optional<size_t>> slot_of_tensor_;  // by spec index; integer tensors have none
  std::vector<uint64_t> received_;                     // bytes of each tensor so far
  std::byte carry_[8];                                 // an element split between two pieces
  size_t carry_bytes_ = 0;
};

}  // namespace tn::federated
