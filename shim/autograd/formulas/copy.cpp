// Derivatives of the copies and conversions (kernels/copy.cpp): the gradient passes through,
// and the engine casts it back to the input's dtype. A conversion that returned its input
// itself records nothing (record.cpp).
#include "formulas.h"

namespace tn::autograd {

#define TN_PASSING_DERIVATIVE(OP, NODE) TN_DERIVATIVE(OP, NODE, SAVES(), { return {g[0]}; })
TN_PASSING_DERIVATIVE("aten::clone", "CloneBackward0");
TN_PASSING_DERIVATIVE("aten::contiguous", "CloneBackward0");
TN_PASSING_DERIVATIVE("aten::_to_copy", "ToCopyBackward0");
TN_PASSING_DERIVATIVE("aten::to.dtype", "ToCopyBackward0");
TN_PASSING_DERIVATIVE("aten::to.dtype_layout", "ToCopyBackward0");
TN_PASSING_DERIVATIVE("aten::to.device", "ToCopyBackward0");
TN_PASSING_DERIVATIVE("aten::type_as", "ToCopyBackward0");
#undef TN_PASSING_DERIVATIVE
// to(other): other gives only a dtype.
TN_DERIVATIVE("aten::to.other", "ToCopyBackward0", SAVES(), { return {g[0], none()}; });
// copy_(self, src): self's old value is overwritten; src's gradient is what reaches self.
TN_DERIVATIVE("aten::copy_", "CopyBackwards", SAVES(), { return {ops::zeros_like(g[0]), g[0]}; });
// zero_ and fill_ overwrite self likewise; fill_'s 0-d value tensor reaches every element.
TN_DERIVATIVE("aten::zero_", "ZeroBackward0", SAVES(), { return {ops::zeros_like(g[0])}; });
TN_DERIVATIVE("aten::fill_.Scalar", "FillBackward2", SAVES(), { return {ops::zeros_like(g[0])}; });
TN_DERIVATIVE("aten::fill_.Tensor", "FillBackward3", SAVES(), {
  return {ops::zeros_like(g[0]), ops::sum(g[0])};
});

}  // namespace tn::autograd
