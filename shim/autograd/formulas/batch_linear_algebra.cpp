// Derivatives of the square-matrix functions (kernels/batch_linear_algebra.cpp). Real dtypes
// only (the adjoint is the transpose); A^{-T} x is solved rather than inverted, as upstream's.
#include "formulas.h"

namespace tn::autograd {

namespace {
Tensor mT(const Tensor& t) { return ops::transpose(t, -2, -1); }

// A^{-T} times one number per matrix (d det, d log|det|).
Tensor scaled_inverse_transpose(const Tensor& A, const Tensor& per_matrix) {
  if (A.numel() == 0) return ops::zeros_like(A);
  Tensor scale = ops::unsqueeze(ops::unsqueeze(per_matrix, -1), -1);
  Tensor scaled_identity = ops::mul(scale, ops::eye(A.size(-1), A.dtype()));
  return ops::linalg_solve(mT(A), ops::expand(scaled_identity, A.sizes(), false), true);
}

// inv(A): -A^{-T} g A^{-T}.
Stack inverse_grad(const Saved& s, const Grads& g) {
  Tensor inverse_t = mT(s.result());
  return {ops::neg(ops::matmul(inverse_t, ops::matmul(g[0], inverse_t)))};
}
}  // namespace

TN_DERIVATIVE("aten::linalg_inv", "LinalgInvExBackward0", SAVES_RESULT(), { return inverse_grad(s, g); });
TN_DERIVATIVE("aten::inverse", "LinalgInvExBackward0", SAVES_RESULT(), { return inverse_grad(s, g); });
namespace {
// det(A): g det A^{-T}; none for empty matrices, as upstream's node gives.
IValue det_grad(const Saved& s, const Grads& g) {
  if (s.input(0).numel() == 0) return none();
  return scaled_inverse_transpose(s.input(0), ops::mul(g[0], s.result()));
}
}  // namespace
TN_DERIVATIVE("aten::linalg_det", "LinalgDetBackward0", SAVES_RESULT(0), { return {det_grad(s, g)}; });
TN_DERIVATIVE("aten::det", "LinalgDetBackward0", SAVES_RESULT(0), { return {det_grad(s, g)}; });
// slogdet(A) = (sign, log|det|): the sign is piecewise constant; log|det| gets g A^{-T}.
TN_DERIVATIVE("aten::linalg_slogdet", "LinalgSlogdetBackward0", SAVES(0),
              { return {scaled_inverse_transpose(s.input(0), g[1])}; });
TN_DERIVATIVE("aten::slogdet", "LinalgSlogdetBackward0", SAVES(0),
              { return {scaled_inverse_transpose(s.input(0), g[1])}; });
// solve(A, B) = X with A X = B (left): B gets A^{-T} g, A gets -(A^{-T} g) X^T; a vector B
// (1-D, or A's shape without its last dim) as one column.
TN_DERIVATIVE("aten::linalg_solve", "LinalgSolveExBackward0", SAVES_RESULT(0), {
  const Tensor &A = s.input(0), &X = s.result();
  bool vector = X.dim() == A.dim() - 1;
  auto as_matrix = [&](const Tensor& t) { return vector ? ops::unsqueeze(t, -1) : t; };
  Tensor gB = ops::linalg_solve(mT(A), as_matrix(g[0]), true);
  Stack out{s.needs_grad(0) ? IValue(ops::neg(ops::matmul(gB, mT(as_matrix(X))))) : none()};
  out.push_back(vector ? ops::squeeze(gB, -1) : gB);
  return out;
});

// cholesky(A) = L (Murray 2016, arXiv:1602.07527): Phi = tril(L^T gL) with its diagonal halved
// and mirrored, then A's gradient is L^-T Phi L^-1 (both solves as general ones: the shim has no
// triangular solve yet). upper=True works on the transposes.
TN_DERIVATIVE("aten::linalg_cholesky", "LinalgCholeskyExBackward0", SAVES_RESULT(), {
  bool upper = s.args().boolean(1);
  Tensor L = upper ? mT(s.result()) : s.result(), gL = upper ? mT(g[0]) : g[0];
  Tensor phi = ops::tril(ops::matmul(mT(L), gL), 0);
  phi = ops::mul(ops::add(phi, mT(ops::tril(phi, -1))), Scalar(0.5));
  Tensor left_solved = ops::linalg_solve(mT(L), phi, true);
  return {mT(ops::linalg_solve(mT(L), mT(left_solved), true))};
});

}  // namespace tn::autograd
