// Derivatives of the scans (kernels/scan_ops.cpp).
#include "formulas.h"

namespace tn::autograd {

// Element i of cumsum feeds every later element: its gradient is the sum of the gradients
// from i to the end, a cumulative sum taken backwards.
TN_DERIVATIVE("aten::cumsum", "CumsumBackward0", SAVES(), {
  int64_t dim = s.args().integer(1);
  if (g[0].numel() <= 1 || g[0].size(dim) == 1) return {g[0]};
  return {ops::flip(ops::cumsum(ops::flip(g[0], {dim}), dim), {dim})};
});

}  // namespace tn::autograd
