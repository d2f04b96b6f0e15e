// What the pooling derivatives (autograd/formulas/pooling.cpp) share with their kernels
// (kernels/pooling.cpp): the windows over the last two or three dims of the input, a 2-D
// pooling being a 3-D one of depth 1.
#pragma once

#include <array>
#include <optional>

#include "ops.h"

namespace tn {

// Per spatial dim: depth, height, width (depth 1, its kernel 1, for a 2-D pooling).
using Dims3 = std::array<int64_t, 3>;

// An average pooling's windows and what each output divides its sum by.
struct AvgPoolWindows {
  Dims3 kernel, stride, padding;
  bool count_include_pad;
  std::optional<int64_t> divisor_override;
};

// The gradients of the poolings over the last `spatial` (2 or 3) dims of an input of
// `input_sizes`, in grad's dtype: each output's gradient divided over its window (average),
// or added at the flat index (over those dims) its forward chose (max).
Tensor avg_pool_backward(const Tensor& grad, const Shape& input_sizes, int spatial,
                         const AvgPoolWindows& windows);
Tensor adaptive_avg_pool_backward(const Tensor& grad, const Shape& input_sizes, int spatial);
Tensor max_pool_backward(const Tensor& grad, const Tensor& indices, const Shape& input_sizes, int spatial);

}  // namespace tn
