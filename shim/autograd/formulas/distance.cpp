// Derivatives of the distances (kernels/distance.cpp); pairwise_distance and cosine_similarity
// record their parts (record.cpp, kDecomposed).
#include <cmath>

#include "formulas.h"

namespace tn::autograd {

namespace {
// x^e through the general power (a tensor exponent), as upstream's vectorized pow in these
// loops: the tensor-scalar pow takes e = -0.5, 3 or -2 in steps instead.
Tensor general_pow(const Tensor& x, double e) { return ops::pow(x, ops::full_like(x, Scalar(e))); }

// d dist(a_i, b_j) / d a_i for every pair, times g_ij, summed over j in order: upstream's
// _cdist_backward, per p. a (..., P, M), b (..., R, M), g and dist (..., P, R).
Tensor cdist_grad(const Tensor& a, const Tensor& b, const Tensor& g, const Tensor& dist, double p) {
  if (p == 0) return ops::zeros_like(a);
  Tensor diff = ops::sub(ops::unsqueeze(a, -2), ops::unsqueeze(b, -3));  // (..., P, R, M)
  Tensor grad = ops::unsqueeze(g, -1), distance = ops::unsqueeze(dist, -1);
  Tensor zero = ops::zeros_like(diff);
  Tensor at_zero = ops::eq(distance, Scalar(int64_t{0}));
  Tensor term;
  if (p == 1) {
    term = ops::mul(grad, ops::sgn(diff));
  } else if (std::isinf(p)) {
    term = ops::mul(ops::mul(grad, ops::sgn(diff)), ops::eq(ops::abs(diff), distance));
  } else if (p == 2) {
    term = ops::where(at_zero, zero, ops::div(ops::mul(grad, diff), distance));
  } else if (p < 2) {
    Tensor undefined = p < 1 ? ops::logical_or(at_zero, ops::eq(diff, Scalar(int64_t{0}))) : at_zero;
    Tensor value = ops::div(ops::mul(ops::mul(ops::sgn(diff), general_pow(ops::abs(diff), p - 1)), grad),
                            general_pow(distance, p - 1));
    term = ops::where(undefined, zero, value);
  } else {
    Tensor value = ops::div(ops::mul(ops::mul(diff, general_pow(ops::abs(diff), p - 2)), grad),
                            general_pow(distance, p - 1));
    term = ops::where(at_zero, zero, value);
  }
  return ops::sum(term, std::vector<int64_t>{-2}, false, std::nullopt);
}
}  // namespace

// cdist(x1, x2, p, compute_mode): x2's gradient is x1's with the roles swapped.
TN_DERIVATIVE("aten::cdist", "CdistBackward0", SAVES_RESULT(0, 1), {
  const Tensor &x1 = s.input(0), &x2 = s.input(1), &dist = s.result();
  double p = s.args().real(2);
  return {s.needs_grad(0) ? IValue(cdist_grad(x1, x2, g[0], dist, p)) : none(),
          s.needs_grad(1)
              ? IValue(cdist_grad(x2, x1, ops::transpose(g[0], -1, -2), ops::transpose(dist, -1, -2), p))
              : none()};
});

}  // namespace tn::autograd
