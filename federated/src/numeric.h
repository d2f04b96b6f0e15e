// Element access for the aggregated dtypes: reading as double, rounding once back, finding
// non-finite values. Private to the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "federated/model.h"

namespace tn::federated::detail {

// Strategies walk tensors in chunks of this many elements, so their scratch memory stays small
// however large a tensor is.
constexpr int64_t kChunkElements = 1 << 14;
// Strategies that hold every update's chunk at once size their chunks to this many doubles.
constexpr int64_t kScratchDoubles = 1 << 20;

// out[j] = element begin + j of `tensor` (an aggregated dtype), exactly.
void load_as_double(const NamedTensor& tensor, int64_t begin, std::span<double> out);

// Rounds each value once (to nearest, ties to even) to `dtype` and stores it at element
// begin + j of the contiguous buffer `dest`.
void store_rounded(std::span<const double> values, ScalarType dtype, std::byte* dest, int64_t begin);

// Index of the first NaN or infinity among the `numel` elements at `data`, or -1.
int64_t first_non_finite(ScalarType dtype, const std::byte* data, int64_t numel);

// A new tensor of `spec` whose bytes the caller fills before sharing it.
struct NewTensor {
  NamedTensor tensor;
  std::byte* bytes;
};
NewTensor allocate_tensor(const TensorSpec& spec);

// "[3, 7]": the row-major coordinates of flat index `flat` in `shape`.
std::string index_str(const Shape& shape, int64_t flat);

// ceil and floor of factor * count, where a product within rounding noise of an integer counts
// as that integer: 0.1 * 30 is 3.0000000000000004 in double and 0.29 * 100 is
// 28.999999999999996 (neither 0.1 nor 0.29 is representable), and nobody asking for 10% of 30
// devices means 4. The noise is a few units in the last place of the product, so a tolerance
// of 2^-50 relative is generous, yet far below the step between any intended fractions.
size_t ceil_of_product(double factor, size_t count);
size_t floor_of_product(double factor, size_t count);

// Refuses (AggregationFailed) a result element that is not finite in its dtype, naming the
// strategy, the tensor and the index, so no unusable model is ever published.
void refuse_non_finite_result(const std::string& strategy, const NamedTensor& result);

// The result of a strategy that computes every aggregated tensor chunk by chunk in double:
// fill(k, begin, y) writes elements [begin, begin + y.size()) of tensor k (chunks of at most
// `chunk` elements, in ascending order), each rounded once to the tensor's dtype; integer
// tensors keep the global model's values. Refuses a non-finite result as
// refuse_non_finite_result does.
Model map_aggregated_tensors(const std::string& strategy, const Model& global, int64_t chunk,
                             const std::function<void(size_t k, int64_t begin, std::span<double> y)>& fill);

}  // namespace tn::federated::detail
