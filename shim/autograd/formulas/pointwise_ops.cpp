// Derivatives of clamp, where, lerp and addcmul/addcdiv (kernels/pointwise_ops.cpp).
#include "formulas.h"

namespace tn::autograd {

namespace {
// The gradient passes where the input was inside the bounds (bounds included).
Tensor inside(const Tensor& g, const Tensor& x, const std::optional<Scalar>& low,
              const std::optional<Scalar>& high) {
  Tensor pass = ops::ones_like(x, ScalarType::Bool);
  if (low) pass = ops::logical_and(pass, ops::ge(x, *low));
  if (high) pass = ops::logical_and(pass, ops::le(x, *high));
  return ops::where(pass, g, ops::zeros_like(g));
}

// Bounds given as tensors: the input's gradient where it was inside them; a bound's where it
// was the value taken (below min, or above max; where min > max, max wins), as upstream's.
Stack clamp_tensor_grad(const Saved& s, const Tensor& g) {
  const Tensor& x = s.input(0);
  Tensor zero = ops::zeros({}, g.dtype());
  bool low = s.input_defined(1), high = s.input_defined(2);
  Tensor pass = ops::ones_like(x, ScalarType::Bool);
  if (low) pass = ops::logical_and(pass, ops::ge(x, s.input(1)));
  if (high) pass = ops::logical_and(pass, ops::le(x, s.input(2)));
  Stack out{ops::where(pass, g, zero), none(), none()};
  if (low) {
    Tensor taken = ops::lt(x, s.input(1));
    if (high) taken = ops::logical_and(taken, ops::lt(s.input(1), s.input(2)));
    out[1] = ops::where(taken, g, zero);
  }
  if (high) {
    Tensor taken = ops::gt(x, s.input(2));
    if (low) taken = ops::logical_or(taken, ops::lt(s.input(2), s.input(1)));
    out[2] = ops::where(taken, g, zero);
  }
  return out;
}
}  // namespace

TN_DERIVATIVE("aten::clamp", "ClampBackward1", SAVES(0), {
  return {inside(g[0], s.input(0), s.args().optional_scalar(1), s.args().optional_scalar(2))};
});
TN_DERIVATIVE("aten::clip", "ClampBackward1", SAVES(0), {
  return {inside(g[0], s.input(0), s.args().optional_scalar(1), s.args().optional_scalar(2))};
});
TN_DERIVATIVE("aten::clamp.Tensor", "ClampBackward0", SAVES(0, 1, 2), { return clamp_tensor_grad(s, g[0]); });
TN_DERIVATIVE("aten::clip.Tensor", "ClampBackward0", SAVES(0, 1, 2), { return clamp_tensor_grad(s, g[0]); });
TN_DERIVATIVE("aten::clamp_min", "ClampMinBackward0", SAVES(0),
              { return {inside(g[0], s.input(0), s.args().scalar(1), std::nullopt)}; });
TN_DERIVATIVE("aten::clamp_max", "ClampMaxBackward0", SAVES(0),
              { return {inside(g[0], s.input(0), std::nullopt, s.args().scalar(1))}; });
TN_DERIVATIVE("aten::where.self", "WhereBackward0", SAVES(0).without_derivative({0}), {
  const Tensor& condition = s.input(0);
  Tensor zero = ops::zeros_like(g[0]);
  return {none(), ops::where(condition, g[0], zero), ops::where(condition, zero, g[0])};
});
TN_DERIVATIVE("aten::where.ScalarOther", "WhereBackward0", SAVES(0).without_derivative({0}), {
  return {none(), ops::where(s.input(0), g[0], ops::zeros_like(g[0]))};
});
TN_DERIVATIVE("aten::where.ScalarSelf", "WhereBackward0", SAVES(0).without_derivative({0}), {
  return {none(), none(), ops::where(s.input(0), ops::zeros_like(g[0]), g[0])};
});

// lerp = self + weight (end - self).
TN_DERIVATIVE("aten::lerp.Scalar", "LerpBackward0", SAVES(), {
  double w = s.args().real(2);
  return {ops::mul(g[0], Scalar(1 - w)), ops::mul(g[0], Scalar(w))};
});
TN_DERIVATIVE("aten::lerp.Tensor", "LerpBackward1", SAVES(0, 1, 2), {
  const Tensor& w = s.input(2);
  return {ops::mul(g[0], ops::rsub(w, Scalar(int64_t{1}))), ops::mul(g[0], w),
          ops::mul(g[0], ops::sub(s.input(1), s.input(0)))};
});
// self + value t1 t2 and self + value t1 / t2.
TN_DERIVATIVE("aten::addcmul", "AddcmulBackward0", SAVES(1, 2), {
  Scalar value = s.args().scalar(3);
  return {g[0], ops::mul(g[0], ops::mul(s.input(2), value)), ops::mul(g[0], ops::mul(s.input(1), value))};
});
TN_DERIVATIVE("aten::addcdiv", "AddcdivBackward0", SAVES(1, 2), {
  Scalar value = s.args().scalar(3);
  const Tensor &t1 = s.input(1), &t2 = s.input(2);
  // value / t2 is t2's reciprocal times value in upstream's C++.
  return {g[0], ops::mul(g[0], ops::mul(ops::reciprocal(t2), value)),
          ops::mul(ops::neg(g[0]), ops::div(ops::mul(t1, value), ops::mul(t2, t2)))};
});

}  // namespace tn::autograd
