// What convolution's derivative shares with its kernels (kernels/convolution.cpp).
#pragma once

#include "ops.h"

namespace tn {

// Whether aten::convolution_backward computes the gradients of this (1-D, 2-D or 3-D,
// transposed or not) convolution as upstream's backend does (oneDNN, its slow GEMM kernels, its
// Empty backend): all but channels-last memory, whose nhwc kernels it does not reproduce; the
// derivative keeps its own formula there.
bool convolution_backward_implemented(const Tensor& input, const Tensor& weight);

// padding='same' as upstream's convolution_same (stride 1): `left` on both sides, and where the
// total padding dilation * (kernel - 1) is odd, the input first padded at the end by one more
// (`extra`, 0 or 1 per spatial dim) so that the convolution pads symmetrically.
struct SamePadding {
  Shape left, extra;
  bool symmetric() const;
};
SamePadding same_padding(const Shape& weight_sizes, const Shape& dilation);
// The input as the convolution after padding='same' sees it: padded at the end of its last
// spatial dims by `extra` (itself when symmetric).
Tensor pad_for_same(const Tensor& input, const SamePadding& padding);

}  // namespace tn
