// Derivatives of the binary arithmetic (kernels/binary_ops.cpp). Broadcast inputs get their
// gradient summed back by the engine.
#include "formulas.h"

namespace tn::autograd {

namespace {
Scalar alpha(const Saved& s) { return s.args().scalar(2); }
Tensor times(const Tensor& g, const Scalar& factor) { return ops::mul(g, factor); }

// maximum/minimum: the gradient goes to the operand chosen; ties share it equally, and a NaN
// (chosen by neither comparison) passes it to both, as upstream's.
Stack to_chosen(const Tensor& g, const Tensor& x, const Tensor& y, bool maximum) {
  Tensor shared = ops::where(ops::eq(x, y), ops::div(g, Scalar(int64_t{2})), g);
  Tensor x_lost = maximum ? ops::lt(x, y) : ops::gt(x, y), y_lost = maximum ? ops::gt(x, y) : ops::lt(x, y);
  return {ops::masked_fill(shared, x_lost, Scalar(int64_t{0})),
          ops::masked_fill(shared, y_lost, Scalar(int64_t{0}))};
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
  return {self_grad, ops::mul(ops::neg(g[0]), ops::div(ops::div(s.input(0), other), other))};
});
// Rounded division is piecewise constant: no gradient for either operand.
TN_DERIVATIVE("aten::div.Tensor_mode", "DivBackward2", SAVES(0, 1), {
  if (!s.args().optional_string(2))
    return {ops::div(g[0], s.input(1)),
            ops::mul(ops::neg(g[0]), ops::div(ops::div(s.input(0), s.input(1)), s.input(1)))};
  return {ops::zeros_like(g[0]), ops::zeros(s.input_sizes(1), s.input_dtype(1))};
});
TN_DERIVATIVE("aten::div.Scalar", "DivBackward1", SAVES(), { return {ops::div(g[0], s.args().scalar(1))}; });
// d/dx x^e = e x^(e-1); an exponent of zero gives zero (not 0 * x^-1, which is nan at 0).
TN_DERIVATIVE("aten::pow.Tensor_Scalar", "PowBackward0", SAVES(0), {
  Scalar e = s.args().scalar(1);
  const Tensor& x = s.input(0);
  if (e.to_double() == 0) return {ops::zeros_like(x)};
  return {ops::mul(g[0], ops::mul(ops::pow(x, Scalar(e.to_double() - 1)), e))};
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

TN_DERIVATIVE("aten::atan2", "Atan2Backward0", SAVES(0, 1), {
  const Tensor &x = s.input(0), &y = s.input(1);
  Tensor recip = ops::reciprocal(ops::add(ops::mul(x, x), ops::mul(y, y)));
  return {ops::mul(ops::mul(g[0], y), recip), ops::mul(ops::mul(g[0], ops::neg(x)), recip)};
});
TN_DERIVATIVE("aten::hypot", "HypotBackward0", SAVES_RESULT(0, 1), {
  return {ops::div(ops::mul(g[0], s.input(0)), s.result()), ops::div(ops::mul(g[0], s.input(1)), s.result())};
});
// x - trunc(x / y) y and x - floor(x / y) y: the quotient is piecewise constant.
TN_DERIVATIVE("aten::fmod.Tensor", "FmodBackward1", SAVES(0, 1), {
  return {g[0], ops::mul(ops::neg(g[0]), ops::div(s.input(0), s.input(1), std::string("trunc")))};
});
TN_DERIVATIVE("aten::fmod.Scalar", "FmodBackward0", SAVES(), { return {g[0]}; });
TN_DERIVATIVE("aten::remainder.Tensor", "RemainderBackward1", SAVES(0, 1), {
  return {g[0], ops::mul(ops::neg(g[0]), ops::div(s.input(0), s.input(1), std::string("floor")))};
});
TN_DERIVATIVE("aten::remainder.Scalar", "RemainderBackward0", SAVES(), { return {g[0]}; });
namespace {
// copysign's result over self: +-1, and 0 where self is 0 (as upstream's, which has no sign there).
Tensor copysign_self_grad(const Saved& s, const Tensor& g) {
  Tensor ratio = ops::div(s.result(), s.input(0));
  return ops::mul(g, ops::masked_fill(ratio, ops::eq(s.input(0), Scalar(int64_t{0})), Scalar(int64_t{0})));
}
}  // namespace
TN_DERIVATIVE("aten::copysign.Tensor", "CopysignBackward0", SAVES_RESULT(0, 1), {
  return {copysign_self_grad(s, g[0]), ops::zeros(s.input_sizes(1), s.input_dtype(1))};
});
TN_DERIVATIVE("aten::copysign.Scalar", "CopysignBackward1", SAVES_RESULT(0),
              { return {copysign_self_grad(s, g[0])}; });
TN_DERIVATIVE("aten::logaddexp", "LogaddexpBackward0", SAVES(0, 1), {
  const Tensor &x = s.input(0), &y = s.input(1);
  return {ops::div(g[0], ops::add(ops::exp(ops::sub(y, x)), Scalar(int64_t{1}))),
          ops::div(g[0], ops::add(ops::exp(ops::sub(x, y)), Scalar(int64_t{1})))};
});
TN_DERIVATIVE("aten::xlogy.Tensor", "XlogyBackward0", SAVES(0, 1), {
  const Tensor &x = s.input(0), &y = s.input(1);
  // g log y, but 0 where x = 0 and log y is not a number (the limit upstream takes).
  Tensor undefined = ops::logical_and(ops::eq(x, Scalar(int64_t{0})), ops::le(y, Scalar(int64_t{0})));
  return {ops::masked_fill(ops::xlogy(g[0], y), undefined, Scalar(int64_t{0})),
          ops::div(ops::mul(g[0], x), y)};
});
// Upstream has no derivative for floor_divide.
TN_NO_DERIVATIVE_UPSTREAM("aten::floor_divide", "aten::floor_divide");
TN_NO_DERIVATIVE_UPSTREAM("aten::floor_divide.Scalar", "aten::floor_divide");
TN_NO_DERIVATIVE_UPSTREAM("aten::floor_divide_.Tensor", "aten::floor_divide_");
TN_NO_DERIVATIVE_UPSTREAM("aten::floor_divide_.Scalar", "aten::floor_divide_");

// fmax/fmin: the gradient goes to the chosen operand; a NaN in one operand chooses the other.
namespace {
Stack to_chosen_ignoring_nan(const Tensor& g, const Tensor& x, const Tensor& y, bool larger) {
  Tensor x_wins = ops::logical_or(larger ? ops::ge(x, y) : ops::le(x, y), ops::isnan(y));
  Tensor zero = ops::zeros_like(g);
  return {ops::where(x_wins, g, zero), ops::where(x_wins, zero, g)};
}
}  // namespace
TN_DERIVATIVE("aten::fmax", "FmaxBackward0", SAVES(0, 1),
              { return to_chosen_ignoring_nan(g[0], s.input(0), s.input(1), true); });
TN_DERIVATIVE("aten::fmin", "FminBackward0", SAVES(0, 1),
              { return to_chosen_ignoring_nan(g[0], s.input(0), s.input(1), false); });
// xlogy(x, scalar y): g log y, 0 where x = 0 and y <= 0.
TN_DERIVATIVE("aten::xlogy.Scalar_Other", "XlogyBackward2", SAVES(0), {
  Scalar y = s.args().scalar(1);
  Tensor grad = ops::xlogy(g[0], y);
  if (y.to_double() > 0) return {grad};
  return {ops::masked_fill(grad, ops::eq(s.input(0), Scalar(int64_t{0})), Scalar(int64_t{0}))};
});
// Upstream has no derivative for a remainder with a scalar dividend either.
TN_NO_DERIVATIVE_UPSTREAM("aten::remainder.Scalar_Tensor", "aten::remainder");

// Upstream's nextafter node refuses when the backward pass reaches it, as a NotImplementedError.
TN_DERIVATIVE("aten::nextafter", "NextafterBackward0", SAVES(),
              { throw NotImplemented("the derivative for 'nextafter' is not implemented."); });

}  // namespace tn::autograd
