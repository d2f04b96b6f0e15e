// Derivatives of the indexing operators (kernels/indexing.cpp): the gradient goes back to the
// positions the forward read; indices and masks have none.
#include "formulas.h"

namespace tn::autograd {

TN_DERIVATIVE("aten::masked_fill.Scalar", "MaskedFillBackward0", SAVES(1).without_derivative({1}),
              { return {ops::masked_fill(g[0], s.input(1), Scalar(int64_t{0}))}; });
// The 0-d value tensor receives the gradient of every position it filled.
TN_DERIVATIVE("aten::masked_fill.Tensor", "MaskedFillBackward1", SAVES(1).without_derivative({1}), {
  const Tensor& mask = s.input(1);
  Tensor zero = ops::zeros_like(g[0]);
  return {ops::masked_fill(g[0], mask, Scalar(int64_t{0})), none(), ops::sum(ops::where(mask, g[0], zero))};
});
TN_DERIVATIVE("aten::index_select", "IndexSelectBackward0", SAVES(2).without_derivative({2}), {
  int64_t dim = s.args().integer(1);
  return {ops::index_add(ops::zeros(s.input_sizes(0), g[0].dtype()), dim, s.input(2), g[0])};
});
TN_DERIVATIVE("aten::gather", "GatherBackward0", SAVES(2).without_derivative({2}), {
  int64_t dim = s.args().integer(1);
  return {ops::scatter_add(ops::zeros(s.input_sizes(0), g[0].dtype()), dim, s.input(2), g[0])};
});

}  // namespace tn::autograd
