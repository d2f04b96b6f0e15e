// What convolution's derivative shares with its kernels (kernels/convolution.cpp).
#pragma once

#include "ops.h"

namespace tn {

// Whether aten::convolution_backward computes the gradients of this batched 2-D, not transposed
// convolution: where upstream's backward runs oneDNN (float32, its use_mkldnn rules; not yet for
// channels-last memory), so the derivative calls it there for upstream's bits and speed, and keeps
// its own formula elsewhere.
bool onednn_convolution_backward(const Tensor& grad, const Tensor& input, const Tensor& weight,
                                 const Shape& stride, const Shape& padding, const Shape& dilation,
                                 int64_t groups);

}  // namespace tn
