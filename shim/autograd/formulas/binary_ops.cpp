// Derivatives of the binary arithmetic (kernels/binary_ops.cpp). Broadcast inputs get their
// gradient summed back by the engine.
#include "formulas.h"

namespace tn::autograd {

namespace {
Scalar alpha(const Saved& s) { return s.args().scalar(2); }
Tensor times(const Tensor& g, const Scalar& factor) { return ops::mul(g, factor); }

// maximum/minimum: the gradient goes to the operand chosen; ties share it equally, as upstream's.
Stack to_chosen(const Tensor& g, const Tensor& x, const Tensor& y, bool maximum) {
  Tensor half = scaled(g, 0.5), zero = ops::zeros_like(g), tie = ops::eq(x, y);
  Tensor x_chosen = maximum ? ops::gt(x, y) : ops::lt(x, y),
         y_chosen = maximum ? ops::lt(x, y) : ops::gt(x, y);
  return {ops::where(tie, half, ops::where(x_chosen, g, zero)),
          ops::where(tie, half, ops::where(y_chosen, g, zero))};
}
}  // namespace

TN_DERIVATIVE("aten::add.Tensor", "AddBackward0", SAVES(), { return {g[0], times(g[0], alpha(s))}; });
TN_DERIVATIVE("aten::add.Scalar", "AddBackward1", SAVES(), { return {g[0]}; });
TN_DERIVATIVE("aten::sub.Tensor", "SubBackward0", SAVES(), {
  return {g[0], ops::neg(times(g[0], alpha(s)))};
});
TN_DERIVATIVE("aten::sub.Scalar", "SubBackward1", SAVES(), { return {g[0]}; });
TN_DERIVATIVE("aten::rsub.Tensor", "RsubBackward0", SAVES(), {
  return {ops::neg(times(g[0], alpha(s))), g[0]};
});
TN_DERIVATIVE("aten::rsub.Scalar", "RsubBackward1", SAVES(), { return {ops::neg(times(g[0], alpha(s)))}; });
TN_DERIVATIVE("aten::mul.Tensor", "MulBackward0", SAVES(0, 1), {
  return {s.needs_grad(0) ? IValue(ops::mul(g[0], s.input(1))) : none(),
          s.needs_grad(1) ? IValue(ops::mul(g[0], s.input(0))) : none()};
});
TN_DERIVATIVE("aten::mul.Scalar", "MulBackward1", SAVES(), { return {times(g[0], s.args().scalar(1))}; });
TN_DERIVATIVE("aten::div.Tensor", "DivBackward0", SAVES(0, 1), {
  const Tensor& other = s.input(1);
  IValue self_grad = s.needs_grad(0) ? IValue(ops::div(g[0], other)) : none();
  if (!s.needs_grad(1)) return {self_grad};
  return {self_grad, ops::neg(ops::div(ops::mul(g[0], s.input(0)), ops::mul(other, other)))};
});
TN_DERIVATIVE("aten::div.Scalar", "DivBackward1", SAVES(), { return {ops::div(g[0], s.args().scalar(1))}; });
// d/dx x^e = e x^(e-1); an exponent of zero gives zero (not 0 * x^-1, which is nan at 0).
TN_DERIVATIVE("aten::pow.Tensor_Scalar", "PowBackward0", SAVES(0), {
  Scalar e = s.args().scalar(1);
  const Tensor& x = s.input(0);
  if (e.to_double() == 0) return {ops::zeros_like(x)};
  return {ops::mul(times(g[0], e), ops::pow(x, Scalar(e.to_double() - 1)))};
});
TN_DERIVATIVE("aten::pow.Tensor_Tensor", "PowBackward1", SAVES_RESULT(0, 1), {
  const Tensor &x = s.input(0), &e = s.input(1);
  IValue self_grad = s.needs_grad(0)
                         ? IValue(ops::mul(ops::mul(g[0], e), ops::pow(x, ops::sub(e, Scalar(int64_t{1})))))
                         : none();
  if (!s.needs_grad(1)) return {self_grad};
  // x^e log x, taken as 0 where x == 0 and e >= 0 (the limit), as upstream's.
  Tensor at_zero = ops::logical_and(ops::eq(x, Scalar(int64_t{0})), ops::ge(e, Scalar(int64_t{0})));
  Tensor term = ops::where(at_zero, ops::zeros_like(x), ops::mul(s.result(), ops::log(x)));
  return {self_grad, ops::mul(g[0], term)};
});
TN_DERIVATIVE("aten::maximum", "MaximumBackward0", SAVES(0, 1),
              { return to_chosen(g[0], s.input(0), s.input(1), true); });
TN_DERIVATIVE("aten::minimum", "MinimumBackward0", SAVES(0, 1),
              { return to_chosen(g[0], s.input(0), s.input(1), false); });

}  // namespace tn::autograd
