// Derivatives of clamp and where (kernels/pointwise_ops.cpp).
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
}  // namespace

TN_DERIVATIVE("aten::clamp", "ClampBackward1", SAVES(0), {
  return {inside(g[0], s.input(0), s.args().optional_scalar(1), s.args().optional_scalar(2))};
});
TN_DERIVATIVE("aten::clamp_min", "ClampMinBackward0", SAVES(0),
              { return {inside(g[0], s.input(0), s.args().scalar(1), std::nullopt)}; });
TN_DERIVATIVE("aten::clamp_max", "ClampMaxBackward0", SAVES(0),
              { return {inside(g[0], s.input(0), std::nullopt, s.args().scalar(1))}; });
TN_DERIVATIVE("aten::where.self", "WhereBackward0", SAVES(0).without_derivative({0}), {
  const Tensor& condition = s.input(0);
  Tensor zero = ops::zeros_like(g[0]);
  return {none(), ops::where(condition, g[0], zero), ops::where(condition, zero, g[0])};
});

}  // namespace tn::autograd
