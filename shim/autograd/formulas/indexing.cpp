// Derivatives of the indexing operators (kernels/indexing.cpp): the gradient goes back to the
// positions the forward read; indices and masks have none.
#include "common.h"  // broadcast_shapes, as the forward broadcasts the mask
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

// x[indices]: the gradient summed back into the positions read (repeated ones accumulate).
TN_DERIVATIVE("aten::index.Tensor", "IndexBackward0", SAVES(), {
  return {ops::index_put(ops::zeros(s.input_sizes(0), g[0].dtype()), s.args().optional_tensor_list(1), g[0],
                         true)};
});
// x[indices] = values: the overwritten positions of x get no gradient (accumulate: all of it);
// values get what the positions they went to received.
TN_DERIVATIVE("aten::index_put", "IndexPutBackward0", SAVES(), {
  auto indices = s.args().optional_tensor_list(1);
  bool accumulate = s.args().boolean(3);
  Tensor self_grad = accumulate ? g[0] : ops::index_put(g[0], indices, ops::zeros({}, g[0].dtype()), false);
  return {self_grad, none(), ops::index(g[0], indices)};
});
TN_DERIVATIVE("aten::masked_select", "MaskedSelectBackward0", SAVES(1).without_derivative({1}), {
  const Tensor& mask = s.input(1);
  Shape shape = broadcast_shapes(s.input_sizes(0), mask.sizes());
  Tensor spread = ops::zeros(shape, g[0].dtype());
  return {ops::masked_scatter(spread, ops::expand(mask, shape, false), g[0])};
});
// scatter: the overwritten positions of self get no gradient; src gets what its positions did.
TN_DERIVATIVE("aten::scatter.src", "ScatterBackward0", SAVES(2).without_derivative({2}), {
  int64_t dim = s.args().integer(1);
  const Tensor& index = s.input(2);
  return {ops::scatter(g[0], dim, index, Scalar(int64_t{0})), none(), none(),
          ops::gather(g[0], dim, index, false)};
});
TN_DERIVATIVE("aten::scatter.value", "ScatterBackward1", SAVES(2).without_derivative({2}),
              { return {ops::scatter(g[0], s.args().integer(1), s.input(2), Scalar(int64_t{0}))}; });
TN_DERIVATIVE("aten::scatter_add", "ScatterAddBackward0", SAVES(2).without_derivative({2}), {
  return {g[0], none(), none(), ops::gather(g[0], s.args().integer(1), s.input(2), false)};
});
TN_DERIVATIVE("aten::index_add", "IndexAddBackward0", SAVES(2).without_derivative({2}), {
  Tensor source_grad = ops::index_select(g[0], s.args().integer(1), s.input(2));
  return {g[0], none(), none(), ops::mul(source_grad, s.args().scalar(4))};
});
TN_DERIVATIVE("aten::index_copy", "IndexCopyBackward0", SAVES(2).without_derivative({2}), {
  int64_t dim = s.args().integer(1);
  const Tensor& index = s.input(2);
  return {ops::index_fill(g[0], dim, index, Scalar(int64_t{0})), none(), none(),
          ops::index_select(g[0], dim, index)};
});
TN_DERIVATIVE("aten::index_fill.int_Scalar", "IndexFillBackward0", SAVES(2).without_derivative({2}),
              { return {ops::index_fill(g[0], s.args().integer(1), s.input(2), Scalar(int64_t{0}))}; });

// Upstream has no derivative for scatter with a reduction.
TN_NO_DERIVATIVE_UPSTREAM("aten::scatter.reduce", "aten::scatter");
TN_NO_DERIVATIVE_UPSTREAM("aten::scatter.value_reduce", "aten::scatter");
// take(x, index): each gradient element added at the flat position it was taken from (negative
// positions count from the end), in index order as upstream's put_ with accumulate.
TN_DERIVATIVE("aten::take", "TakeBackward0", SAVES(1).without_derivative({1}), {
  const Shape& sizes = s.input_sizes(0);
  int64_t numel = 1;
  for (int64_t size : sizes) numel *= size;
  Tensor index = ops::reshape(s.input(1), Shape{-1});
  index = ops::where(ops::lt(index, Scalar(int64_t{0})), ops::add(index, Scalar(numel)), index);
  Tensor flat = ops::zeros({numel}, g[0].dtype());
  return {ops::reshape(ops::index_add(flat, 0, index, ops::reshape(g[0], Shape{-1})), sizes)};
});
// masked_scatter(x, mask, source): x keeps the gradient where the mask is off; source's first
// elements get the masked ones in order, the rest zero.
TN_DERIVATIVE("aten::masked_scatter", "MaskedScatterBackward0", SAVES(1).without_derivative({1}), {
  const Tensor& mask = s.input(1);
  Stack out{ops::masked_fill(g[0], mask, Scalar(int64_t{0})), none()};
  if (!s.needs_grad(2)) return out;
  const Shape& sizes = s.input_sizes(2);
  int64_t numel = 1;
  for (int64_t size : sizes) numel *= size;
  Tensor selected = ops::masked_select(g[0], mask);
  if (selected.numel() < numel)
    selected = ops::cat({selected, ops::zeros({numel - selected.numel()}, g[0].dtype())}, 0);
  out.push_back(ops::reshape(selected, sizes));
  return out;
});

}  // namespace tn::autograd
