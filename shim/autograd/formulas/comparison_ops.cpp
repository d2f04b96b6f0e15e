// Derivatives of the comparisons (kernels/comparison_ops.cpp). Out of place they return
// booleans, which never require grad; in place they overwrite a floating self with 0 and 1,
// which upstream differentiates as the constant it is: zeros for self and other.
#include "formulas.h"

namespace tn::autograd {

namespace {
Stack zeros_for_self_and_other(const Saved& s, const Grads& g) {
  return {ops::zeros_like(g[0]), ops::zeros(s.input_sizes(1), s.input_dtype(1))};
}
}  // namespace

#define TN_COMPARISON_IN_PLACE(OP, NODE)                                                                 \
  TN_DERIVATIVE("aten::" OP "_.Scalar", NODE "Backward0", SAVES(), { return {ops::zeros_like(g[0])}; }); \
  TN_DERIVATIVE("aten::" OP "_.Tensor", NODE "Backward1", SAVES(), { return zeros_for_self_and_other(s, g); })
TN_COMPARISON_IN_PLACE("eq", "Eq");
TN_COMPARISON_IN_PLACE("ne", "Ne");
TN_COMPARISON_IN_PLACE("lt", "Lt");
TN_COMPARISON_IN_PLACE("le", "Le");
TN_COMPARISON_IN_PLACE("gt", "Gt");
TN_COMPARISON_IN_PLACE("ge", "Ge");
#undef TN_COMPARISON_IN_PLACE

}  // namespace tn::autograd
