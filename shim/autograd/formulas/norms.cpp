// Derivatives of the vector norms (kernels/norms.cpp), from the input and the norm.
#include <cmath>
#include <limits>

#include "formulas.h"

namespace tn::autograd {

namespace {
// d||x||_p / dx, in upstream's order of operations (so float32 rounds alike): p = 1 sgn(x),
// p = 2 x / ||x||, p = inf the extremes of |x| (and NaNs) sharing the gradient, other p
// sgn(x) |x|^(p-1) / ||x||^(p-1); 0 where the norm is 0. p = 0 (a count) has no gradient:
// None, as upstream's.
IValue norm_grad(const Saved& s, const Tensor& grad, double p,
                 const std::optional<std::vector<int64_t>>& dims, bool keepdim) {
  if (p == 0) return none();
  // In the gradient's dtype: a norm with dtype= differentiates its converted input, as upstream's.
  Tensor x = ops::to(s.input(0), grad.dtype());
  Tensor norm = unsqueeze_reduced(s.result(), x.sizes(), dims, keepdim);
  Tensor g = unsqueeze_reduced(grad, x.sizes(), dims, keepdim);
  Tensor at_zero = ops::eq(norm, Scalar(int64_t{0}));
  if (p == 1) return ops::mul(ops::sgn(x), g);
  if (p == 2) return ops::mul(g, ops::masked_fill(ops::div(x, norm), at_zero, Scalar(int64_t{0})));
  if (std::isinf(p)) {
    Tensor magnitude = ops::abs(x);
    Tensor mask = ops::logical_or(ops::eq(magnitude, norm), ops::isnan(magnitude));
    Tensor count = ops::sum(mask, dims && !dims->empty() ? dims : std::nullopt, true, std::nullopt);
    return ops::mul(ops::sgn(x), ops::mul(ops::div(g, count), mask));
  }
  Tensor magnitude = ops::abs(x);
  if (p < 1) {
    Tensor powered = ops::masked_fill(ops::pow(magnitude, Scalar(p - 1)), ops::eq(x, Scalar(int64_t{0})),
                                      Scalar(int64_t{0}));
    return ops::mul(ops::mul(ops::mul(ops::sgn(x), powered), g), ops::pow(norm, Scalar(1 - p)));
  }
  Tensor scaled_x = p < 2 ? ops::mul(ops::sgn(x), ops::pow(magnitude, Scalar(p - 1)))
                          : ops::mul(x, ops::pow(magnitude, Scalar(p - 2)));
  Tensor scale = ops::masked_fill(ops::div(g, ops::pow(norm, Scalar(p - 1))), at_zero, Scalar(int64_t{0}));
  return ops::mul(scaled_x, scale);
}

double p_or_two(const Saved& s, size_t i) {
  auto p = s.args().optional_scalar(i);
  return p ? p->to_double() : 2.0;
}
}  // namespace

TN_DERIVATIVE("aten::linalg_vector_norm", "LinalgVectorNormBackward0", SAVES_RESULT(0), {
  return {
      norm_grad(s, g[0], s.args().scalar(1).to_double(), s.args().optional_int_list(2), s.args().boolean(3))};
});
TN_DERIVATIVE("aten::norm.Scalar", "NormBackward0", SAVES_RESULT(0),
              { return {norm_grad(s, g[0], s.args().scalar(1).to_double(), std::nullopt, false)}; });
TN_DERIVATIVE("aten::norm.ScalarOpt_dim", "NormBackward1", SAVES_RESULT(0), {
  return {norm_grad(s, g[0], p_or_two(s, 1), s.args().optional_int_list(2), s.args().boolean(3))};
});
TN_DERIVATIVE("aten::norm.ScalarOpt_dtype", "NormBackward2", SAVES_RESULT(0),
              { return {norm_grad(s, g[0], p_or_two(s, 1), std::nullopt, false)}; });
TN_DERIVATIVE("aten::norm.ScalarOpt_dim_dtype", "NormBackward3", SAVES_RESULT(0), {
  return {norm_grad(s, g[0], p_or_two(s, 1), s.args().optional_int_list(2), s.args().boolean(3))};
});

TN_DERIVATIVE("aten::frobenius_norm", "FrobeniusNormBackward0", SAVES_RESULT(0),
              { return {norm_grad(s, g[0], 2.0, std::nullopt, false)}; });
TN_DERIVATIVE("aten::frobenius_norm.dim", "FrobeniusNormBackward0", SAVES_RESULT(0),
              { return {norm_grad(s, g[0], 2.0, s.args().int_list(1), s.args().boolean(2))}; });

}  // namespace tn::autograd
