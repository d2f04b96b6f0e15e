// Derivatives of the vector norms (kernels/norms.cpp), from the input and the norm.
#include <cmath>
#include <limits>

#include "formulas.h"

namespace tn::autograd {

namespace {
// d||x||_p / dx = sgn(x) |x|^(p-1) / ||x||^(p-1); p = 2 is x / ||x||, p = 1 sgn(x), p = inf the
// extremes of |x| sharing the gradient, p = 0 zero; 0 where the norm is 0, as upstream's.
Tensor norm_grad(const Saved& s, const Tensor& grad, double p,
                 const std::optional<std::vector<int64_t>>& dims, bool keepdim) {
  const Tensor& x = s.input(0);
  Tensor norm = expand_reduced(s.result(), x.sizes(), dims, keepdim);
  Tensor g = expand_reduced(grad, x.sizes(), dims, keepdim);
  Tensor zero = ops::zeros_like(g);
  if (p == 0) return zero;
  if (p == 1) return ops::mul(g, ops::sgn(x));
  if (std::isinf(p)) {
    Tensor at_extreme = ops::eq(ops::abs(x), norm);
    auto over = dims && !dims->empty() ? dims : std::nullopt;
    Tensor count = ops::sum(at_extreme, over, true, g.dtype());
    Tensor share = ops::mul(ops::div(g, count), ops::sgn(x));
    return ops::where(at_extreme, share, zero);
  }
  Tensor scaled_x = p == 2 ? x : ops::mul(ops::sgn(x), ops::pow(ops::abs(x), Scalar(p - 1)));
  Tensor denominator = p == 2 ? norm : ops::pow(norm, Scalar(p - 1));
  Tensor out = ops::div(ops::mul(g, scaled_x), denominator);
  return ops::where(ops::eq(norm, Scalar(int64_t{0})), zero, out);
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

TN_DERIVATIVE("aten::frobenius_norm", "FrobeniusNormBackward0", SAVES_RESULT(0),
              { return {norm_grad(s, g[0], 2.0, std::nullopt, false)}; });
TN_DERIVATIVE("aten::frobenius_norm.dim", "FrobeniusNormBackward0", SAVES_RESULT(0),
              { return {norm_grad(s, g[0], 2.0, s.args().int_list(1), s.args().boolean(2))}; });

}  // namespace tn::autograd
