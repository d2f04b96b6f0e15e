#include "federated/contribution.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "federated/errors.h"
#include "numeric.h"

namespace tn::federated {

namespace {

// Converts one stored element to double, for the dtypes strategies compute on.
double element_as_double(ScalarType dtype, const std::byte* data, size_t index) {
  switch (dtype) {
    case ScalarType::Float: {
      float v;
      std::memcpy(&v, data + index * sizeof v, sizeof v);
      return v;
    }
    case ScalarType::Double: {
      double v;
      std::memcpy(&v, data + index * sizeof v, sizeof v);
      return v;
    }
    case ScalarType::Half: {
      Half v;
      std::memcpy(&v, data + index * sizeof v, sizeof v);
      return double(float(v));
    }
    case ScalarType::BFloat16: {
      BFloat16 v;
      std::memcpy(&v, data + index * sizeof v, sizeof v);
      return double(float(v));
    }
    default:
      throw Unsupported(std::string("contribution: dtype ") + upstream_type_name(dtype) +
                        " is not aggregated");
  }
}

// Ends a Values contribution ("TNVL"); any fixed value would do, it only has to be the one both
// sides expect.
constexpr double kValuesTag = 0x544e564c;

}  // namespace

ContributionKind contribution_kind_for(const Strategy& strategy) {
  return strategy.aggregates_from_weighted_sum() ? ContributionKind::WeightedSum : ContributionKind::Values;
}

class ContributionLayout::SlotIndex {
 public:
  SlotIndex(const std::vector<Slot>& slots, const char* what) : what_(what) {
    for (const Slot& slot : slots) slots_.emplace(slot.spec.name, slot);
  }

  // Where elements [begin, begin + count) of the model's `tensor` start in a contribution;
  // refuses (Refused) a tensor the layout does not hold and a range beyond it.
  size_t offset(const NamedTensor& tensor, int64_t begin, size_t count) const {
    auto found = slots_.find(tensor.name);
    if (found == slots_.end() || found->second.spec != tensor.spec())
      throw Refused(std::string(what_) + ": the model's tensor '" + tensor.name +
                    "' is not in the contribution layout");
    if (begin < 0 || count > size_t(tensor.numel() - std::min(begin, tensor.numel())))
      throw Refused(std::string(what_) + ": elements " + std::to_string(begin) + " to " +
                    std::to_string(begin + int64_t(count)) + " lie beyond tensor '" + tensor.name + "'");
    return found->second.offset + size_t(begin);
  }

 private:
  std::unordered_map<std::string, Slot> slots_;
  const char* what_;
};

ContributionLayout::ContributionLayout(const ModelSpec& spec, ContributionKind kind)
    : spec_(spec), kind_(kind) {
  size_t offset = 0;
  for (const TensorSpec& tensor : spec.tensors()) {
    if (!is_aggregated(tensor.dtype)) continue;
    slots_.push_back({tensor, offset});
    offset += size_t(tensor.numel());
  }
  count_index_ = offset;
  elements_ = offset + (kind == ContributionKind::Values ? 2 : 1);
}

void ContributionLayout::pack(const Model& trained, int64_t num_examples, const UpdateLimits& limits,
                              std::span<double> out) const {
  if (out.size() != elements_)
    throw ParameterRefused("contribution: buffer of " + std::to_string(out.size()) +
                           " elements, the layout has " + std::to_string(elements_));
  // The same checks the hub applies to a whole update, so a device learns of its own bad update.
  Update update{"this device", 0, 0, num_examples, trained};
  validate_update(update, spec_, 0, 0, limits);
  const double weight = double(num_examples);
  const bool weighted = kind_ == ContributionKind::WeightedSum;
  for (const Slot& slot : slots_) {
    const NamedTensor* tensor = trained.find(slot.spec.name);
    const auto* bytes = tensor->data.get();
    for (size_t i = 0; i < size_t(slot.spec.numel()); ++i) {
      const double x = element_as_double(slot.spec.dtype, bytes, i);
      out[slot.offset + i] = weighted ? weight * x : x;
    }
  }
  out[count_index_] = weight;
  if (kind_ == ContributionKind::Values) out[count_index_ + 1] = kValuesTag;
}

std::optional<std::string> ContributionLayout::check(std::span<const double> contribution,
                                                     const UpdateLimits& limits) const {
  if (contribution.size() != elements_)
    return "the contribution has " + std::to_string(contribution.size()) + " elements, the layout " +
           std::to_string(elements_);
  return check_part(0, contribution, limits);
}

std::optional<std::string> ContributionLayout::check_part(size_t first, std::span<const double> part,
                                                          const UpdateLimits& limits) const {
  if (first > elements_ || part.size() > elements_ - first)
    return "elements " + std::to_string(first) + " to " + std::to_string(first + part.size()) +
           " lie beyond the layout's " + std::to_string(elements_);
  const size_t end = first + part.size();
  // The slot holding `first`: the last one that starts at or before it.
  auto slot = std::upper_bound(slots_.begin(), slots_.end(), first,
                               [](size_t element, const Slot& s) { return element < s.offset; });
  if (slot != slots_.begin()) --slot;
  for (; slot != slots_.end() && slot->offset < end; ++slot) {
    const size_t from = std::max(first, slot->offset),
                 to = std::min(end, slot->offset + size_t(slot->spec.numel()));
    for (size_t i = from; i < to; ++i)
      if (!std::isfinite(part[i - first]))
        return "tensor '" + slot->spec.name + "' has a non-finite value at index " +
               std::to_string(i - slot->offset);
  }
  if (first <= count_index_ && count_index_ < end) {
    double weight = part[count_index_ - first];
    if (!(weight >= 1) || weight > double(limits.max_examples) || weight != std::floor(weight))
      return "example count " + std::to_string(weight) + " is not an integer in [1, " +
             std::to_string(limits.max_examples) + "]";
  }
  if (kind_ == ContributionKind::Values && first <= count_index_ + 1 && count_index_ + 1 < end &&
      !(part[count_index_ + 1 - first] == kValuesTag))
    return "the contribution does not end with the values tag: it was not packed as values";
  return std::nullopt;
}

void ContributionLayout::require_kind(ContributionKind kind, const char* what) const {
  if (kind_ != kind)
    throw ParameterRefused(std::string(what) + ": the layout's contributions are " +
                           (kind_ == ContributionKind::WeightedSum ? "weighted sums" : "values"));
}

WeightedSum ContributionLayout::weighted_sum(std::span<const double> sum) const {
  require_kind(ContributionKind::WeightedSum, "contribution sum");
  if (sum.size() != elements_)
    throw ParameterRefused("contribution sum of " + std::to_string(sum.size()) +
                           " elements, the layout has " + std::to_string(elements_));
  WeightedSum result;
  result.total_weight = sum[count_index_];
  for (const Slot& slot : slots_) {
    auto bytes = std::as_bytes(sum.subspan(slot.offset, size_t(slot.spec.numel())));
    result.sum.tensors.push_back(copy_tensor(slot.spec.name, ScalarType::Double, slot.spec.shape, bytes));
  }
  return result;
}

WeightedSumReader ContributionLayout::weighted_sum_reader(
    std::function<void(size_t first, std::span<double> out)> fold) const {
  require_kind(ContributionKind::WeightedSum, "contribution sum");
  double total_weight = 0;
  fold(count_index_, {&total_weight, 1});
  auto read = [index = SlotIndex(slots_, "contribution sum"), fold = std::move(fold)](
                  const NamedTensor& tensor, int64_t begin, std::span<double> out) {
    fold(index.offset(tensor, begin, out.size()), out);
  };
  return {std::move(read), total_weight};
}

UpdatesReader ContributionLayout::updates_reader(
    size_t count, std::function<void(size_t update, size_t first, std::span<double> out)> read) const {
  require_kind(ContributionKind::Values, "contributions");
  auto read_tensor = [index = SlotIndex(slots_, "contributions"), count, read = std::move(read)](
                         size_t update, const NamedTensor& tensor, int64_t begin, std::span<double> out) {
    if (update >= count)
      throw Refused("contributions: update " + std::to_string(update) + " of " + std::to_string(count));
    read(update, index.offset(tensor, begin, out.size()), out);
  };
  return {count, std::move(read_tensor)};
}

StreamingPacker::StreamingPacker(const ContributionLayout& layout, std::string device, int64_t num_examples,
                                 const UpdateLimits& limits, std::span<double> out)
    : layout_(layout), device_(std::move(device)), weight_(double(num_examples)), out_(out) {
  if (num_examples < 1 || num_examples > limits.max_examples)
    throw UpdateRefused(UpdateRefused::Reason::BadExamples,
                        "update from '" + device_ + "': example count " + std::to_string(num_examples) +
                            " is not in [1, " + std::to_string(limits.max_examples) + "]");
  if (out.size() != layout.elements_)
    throw ParameterRefused("contribution: buffer of " + std::to_string(out.size()) +
                           " elements, the layout has " + std::to_string(layout.elements_));
  const std::vector<TensorSpec>& tensors = layout.spec_.tensors();
  slot_of_tensor_.resize(tensors.size());
  received_.resize(tensors.size());
  for (size_t slot = 0, tensor = 0; tensor < tensors.size(); ++tensor)
    if (slot < layout.slots_.size() && layout.slots_[slot].spec.name == tensors[tensor].name)
      slot_of_tensor_[tensor] = slot++;
}

void StreamingPacker::add(size_t tensor, uint64_t offset, std::span<const std::byte> bytes) {
  const std::vector<TensorSpec>& tensors = layout_.spec_.tensors();
  if (tensor >= tensors.size() || offset != received_[tensor] ||
      bytes.size() > tensors[tensor].nbytes() - received_[tensor])
    throw Refused("contribution: bytes " + std::to_string(offset) + " to " +
                  std::to_string(offset + bytes.size()) + " of tensor " + std::to_string(tensor) +
                  " arrived out of order or beyond it");
  received_[tensor] += bytes.size();
  if (!slot_of_tensor_[tensor]) return;  // not aggregated: the global's values stay
  const ContributionLayout::Slot& slot = layout_.slots_[*slot_of_tensor_[tensor]];
  const size_t element = element_size(slot.spec.dtype);
  size_t used = 0;
  if (carry_bytes_ > 0) {  // the rest of an element the previous piece began
    used = std::min(element - carry_bytes_, bytes.size());
    std::memcpy(carry_ + carry_bytes_, bytes.data(), used);
    carry_bytes_ += used;
    if (carry_bytes_ < element) return;
    put(slot, size_t((offset + used) / element) - 1, carry_);
    carry_bytes_ = 0;
  }
  for (; bytes.size() - used >= element; used += element)
    put(slot, size_t((offset + used) / element), &bytes[used]);
  carry_bytes_ = bytes.size() - used;
  std::memcpy(carry_, bytes.data() + used, carry_bytes_);
}

void StreamingPacker::put(const ContributionLayout::Slot& slot, size_t index, const std::byte* element) {
  const double x = element_as_double(slot.spec.dtype, element, 0);
  if (!std::isfinite(x))
    throw UpdateRefused(UpdateRefused::Reason::NonFinite,
                        "update from '" + device_ + "': tensor '" + slot.spec.name + "' element " +
                            std::to_string(index) + " (index " +
                            detail::index_str(slot.spec.shape, int64_t(index)) + ") is " +
                            (std::isnan(x) ? "NaN" : "infinite"));
  out_[slot.offset + index] = layout_.kind_ == ContributionKind::WeightedSum ? weight_ * x : x;
}

void StreamingPacker::finish() {
  const std::vector<TensorSpec>& tensors = layout_.spec_.tensors();
  for (size_t tensor = 0; tensor < tensors.size(); ++tensor)
    if (received_[tensor] != tensors[tensor].nbytes())
      throw Refused("contribution: tensor '" + tensors[tensor].name + "' arrived with " +
                    std::to_string(received_[tensor]) + " of its " +
                    std::to_string(tensors[tensor].nbytes()) + " bytes");
  out_[layout_.count_index_] = weight_;
  if (layout_.kind_ == ContributionKind::Values) out_[layout_.count_index_ + 1] = kValuesTag;
}

}  // namespace tn::federated
