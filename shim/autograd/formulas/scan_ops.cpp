// Derivatives of the scans (kernels/scan_ops.cpp).
#include <limits>

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

// logcumsumexp: the reversed log-cumulative sums of the gradient's positive and negative parts
// (each as a log, the other set to the lowest number), shifted by the input less the result
// (upstream's logcumsumexp_backward).
TN_DERIVATIVE("aten::logcumsumexp", "LogcumsumexpBackward0", SAVES_RESULT(0), {
  const Tensor& grad = g[0];
  if (grad.dim() == 0 || grad.numel() == 0) return {grad};
  int64_t dim = s.args().integer(1);
  double lowest = grad.dtype() == ScalarType::Double ? std::numeric_limits<double>::lowest()
                                                     : double(std::numeric_limits<float>::lowest());
  auto reversed = [&](const Tensor& t) {
    return ops::flip(ops::logcumsumexp(ops::flip(t, {dim}), dim), {dim});
  };
  Tensor log_abs = ops::log(ops::abs(grad));
  Tensor floor = ops::full_like(grad, Scalar(lowest));
  auto part = [&](const Tensor& sign_holds) {
    Tensor log_part = ops::where(sign_holds, log_abs, floor);
    return ops::exp(ops::add(reversed(ops::sub(log_part, s.result())), s.input(0)));
  };
  return {ops::sub(part(ops::gt(grad, Scalar(int64_t{0}))), part(ops::lt(grad, Scalar(int64_t{0}))))};
});

// cumprod without zeros: the reversed cumulative sum of result * g, over the input. With a
// zero in the input that quotient is undefined and upstream takes another path; refused by
// name until it is written.
TN_DERIVATIVE("aten::cumprod", "CumprodBackward0", SAVES_RESULT(0), {
  const Tensor& grad = g[0];
  Tensor x = ops::to(s.input(0), grad.dtype());
  int64_t dim = wrap_dim(s.args().integer(1), std::max<int64_t>(x.dim(), 1));
  if (x.numel() <= 1 || x.size(dim) == 1) return {grad};
  if (ops::any(ops::eq(x, Scalar(int64_t{0}))).item().to_int() != 0)
    throw NotImplemented("torchnative has no derivative for aten::cumprod yet at an input with zeros");
  Tensor weighted = ops::mul(s.result(), grad);
  Tensor reversed_sum = ops::flip(ops::cumsum(ops::flip(weighted, {dim}), dim), {dim});
  return {ops::div(reversed_sum, x)};
});

}  // namespace tn::autograd
