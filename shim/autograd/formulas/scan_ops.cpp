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

// cummax/cummin: each running extreme's gradient to the position it was taken from (several
// outputs may name the same position: summed).
TN_DERIVATIVE("aten::cummax", "CummaxBackward0", SAVES_RESULT(), {
  int64_t dim = s.args().integer(1);
  return {ops::scatter_add(ops::zeros(s.input_sizes(0), g[0].dtype()), dim, s.result(1), g[0])};
});
TN_DERIVATIVE("aten::cummin", "CumminBackward0", SAVES_RESULT(), {
  int64_t dim = s.args().integer(1);
  return {ops::scatter_add(ops::zeros(s.input_sizes(0), g[0].dtype()), dim, s.result(1), g[0])};
});

}  // namespace tn::autograd
