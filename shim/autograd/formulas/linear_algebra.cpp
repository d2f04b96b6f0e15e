// Derivatives of the matrix products (kernels/linear_algebra.cpp).
#include "formulas.h"

namespace tn::autograd {

namespace {
Tensor mT(const Tensor &t) { return ops::transpose(t, -2, -1); }

// matmul's gradients for any ranks: 1-D operands become matrices (a row on the left, a
// column on the right) as in the forward, batch dimensions are summed back by sum_to.
Stack matmul_grads(const Saved &s, const Tensor &grad) {
  const Tensor &x = s.input(0), &y = s.input(1);
  Tensor xm = x.dim() == 1 ? ops::unsqueeze(x, 0) : x, ym = y.dim() == 1 ? ops::unsqueeze(y, 1) : y;
  Tensor g = grad;
  if (x.dim() == 1) g = ops::unsqueeze(g, g.dim() == 0 ? 0 : -1 - int64_t(y.dim() != 1));
  if (y.dim() == 1) g = ops::unsqueeze(g, -1);
  Stack out(2);
  if (s.needs_grad(0)) out[0] = ops::reshape(sum_to(ops::matmul(g, mT(ym)), xm.sizes()), x.sizes());
  if (s.needs_grad(1)) out[1] = ops::reshape(sum_to(ops::matmul(mT(xm), g), ym.sizes()), y.sizes());
  return out;
}
}  // namespace

TN_DERIVATIVE("aten::mm", "MmBackward0", SAVES(0, 1), {
  return {s.needs_grad(0) ? IValue(ops::mm(g[0], mT(s.input(1)))) : none(),
          s.needs_grad(1) ? IValue(ops::mm(mT(s.input(0)), g[0])) : none()};
});
TN_DERIVATIVE("aten::bmm", "BmmBackward0", SAVES(0, 1), {
  return {s.needs_grad(0) ? IValue(ops::bmm(g[0], mT(s.input(1)))) : none(),
          s.needs_grad(1) ? IValue(ops::bmm(mT(s.input(0)), g[0])) : none()};
});
TN_DERIVATIVE("aten::addmm", "AddmmBackward0", SAVES(1, 2), {
  Scalar beta = s.args().scalar(3), alpha = s.args().scalar(4);
  return {s.needs_grad(0) ? IValue(ops::mul(g[0], beta)) : none(),
          s.needs_grad(1) ? IValue(ops::mul(ops::mm(g[0], mT(s.input(2))), alpha)) : none(),
          s.needs_grad(2) ? IValue(ops::mul(ops::mm(mT(s.input(1)), g[0]), alpha)) : none()};
});
TN_DERIVATIVE("aten::baddbmm", "BaddbmmBackward0", SAVES(1, 2), {
  Scalar beta = s.args().scalar(3), alpha = s.args().scalar(4);
  return {s.needs_grad(0) ? IValue(ops::mul(g[0], beta)) : none(),
          s.needs_grad(1) ? IValue(ops::mul(ops::bmm(g[0], mT(s.input(2))), alpha)) : none(),
          s.needs_grad(2) ? IValue(ops::mul(ops::bmm(mT(s.input(1)), g[0]), alpha)) : none()};
});
TN_DERIVATIVE("aten::dot", "DotBackward0", SAVES(0, 1), {
  return {ops::mul(g[0], s.input(1)), ops::mul(g[0], s.input(0))};
});
TN_DERIVATIVE("aten::mv", "MvBackward0", SAVES(0, 1), {
  return {s.needs_grad(0) ? IValue(ops::outer(g[0], s.input(1))) : none(),
          s.needs_grad(1) ? IValue(ops::mv(ops::t(s.input(0)), g[0])) : none()};
});
TN_DERIVATIVE("aten::matmul", "MmBackward0", SAVES(0, 1), { return matmul_grads(s, g[0]); });
// linear(x, w, b) = x w^T + b over any leading dimensions of x.
TN_DERIVATIVE("aten::linear", "AddmmBackward0", SAVES(0, 1), {
  const Tensor &x = s.input(0), &w = s.input(1);
  int64_t out_features = w.dim() == 1 ? 1 : w.size(0);
  Tensor rows = ops::reshape(g[0], {-1, out_features});
  Stack out(3);
  if (s.needs_grad(0))
    out[0] = ops::reshape(ops::matmul(g[0], w.dim() == 1 ? ops::unsqueeze(w, 0) : w), x.sizes());
  if (s.needs_grad(1))
    out[1] = ops::reshape(ops::mm(mT(rows), ops::reshape(x, {-1, x.dim() ? x.size(-1) : 1})), w.sizes());
  if (s.needs_grad(2))
    out[2] = ops::reshape(ops::sum(rows, std::vector<int64_t>{0}, false, std::nullopt), s.input_sizes(2));
  return out;
});

// vdot of real vectors is dot.
TN_DERIVATIVE("aten::vdot", "DotBackward0", SAVES(0, 1), {
  return {ops::mul(g[0], s.input(1)), ops::mul(g[0], s.input(0))};
});
// outer(u, v) = u v^T: u gets g v, v gets g^T u.
TN_DERIVATIVE("aten::outer", "MulBackward0", SAVES(0, 1), {
  return {ops::mv(g[0], s.input(1)), ops::mv(ops::t(g[0]), s.input(0))};
});
TN_DERIVATIVE("aten::addmv", "AddmvBackward0", SAVES(1, 2), {
  Scalar beta = s.args().scalar(3), alpha = s.args().scalar(4);
  return {ops::mul(g[0], beta), ops::mul(ops::outer(g[0], s.input(2)), alpha),
          ops::mul(ops::mv(ops::t(s.input(1)), g[0]), alpha)};
});
TN_DERIVATIVE("aten::addr", "AddrBackward0", SAVES(1, 2), {
  Scalar beta = s.args().scalar(3), alpha = s.args().scalar(4);
  return {ops::mul(g[0], beta), ops::mul(ops::mv(g[0], s.input(2)), alpha),
          ops::mul(ops::mv(ops::t(g[0]), s.input(1)), alpha)};
});
// trace: the gradient on the diagonal.
TN_DERIVATIVE("aten::trace", "TraceBackward0", SAVES(), {
  Tensor whole = ops::zeros(s.input_sizes(0), g[0].dtype());
  Tensor diagonal = ops::diagonal(whole, 0, 0, 1);
  ops::copy_(diagonal, ops::expand(g[0], diagonal.sizes(), false), false);
  return {whole};
});

// addbmm(self, b1, b2, beta, alpha) = beta self + alpha sum_i b1_i b2_i.
TN_DERIVATIVE("aten::addbmm", "AddbmmBackward0", SAVES(1, 2), {
  Scalar beta = s.args().scalar(3), alpha = s.args().scalar(4);
  const Shape &b1 = s.input_sizes(1), &b2 = s.input_sizes(2);
  Tensor spread = ops::expand(ops::unsqueeze(g[0], 0), {b1[0], b1[1], b2[2]}, false);
  return {s.needs_grad(0) ? IValue(ops::mul(g[0], beta)) : none(),
          s.needs_grad(1) ? IValue(ops::mul(ops::bmm(spread, mT(s.input(2))), alpha)) : none(),
          s.needs_grad(2) ? IValue(ops::mul(ops::bmm(mT(s.input(1)), spread), alpha)) : none()};
});
// cross(a, b): a gets cross(b, g), b gets cross(g, a).
TN_DERIVATIVE("aten::linalg_cross", "LinalgCrossBackward0", SAVES(0, 1), {
  int64_t dim = s.args().integer(2);
  return {s.needs_grad(0) ? IValue(ops::linalg_cross(s.input(1), g[0], dim)) : none(),
          s.needs_grad(1) ? IValue(ops::linalg_cross(g[0], s.input(0), dim)) : none()};
});

// _trilinear's gradient for each input is _trilinear again, the gradient taking that input's
// place, its expand dims becoming the summed ones and the summed ones the gradient's expand dims.
TN_DERIVATIVE("aten::_trilinear", "TrilinearBackward0", SAVES(0, 1, 2), {
  auto a = s.args();
  std::vector<std::vector<int64_t>> expand{a.int_list(3), a.int_list(4), a.int_list(5)};
  std::vector<int64_t> sumdim = a.int_list(6);
  Stack out(3);
  for (size_t i = 0; i < 3; ++i) {
    if (!s.needs_grad(i)) continue;
    std::vector<Tensor> inputs{s.input(0), s.input(1), s.input(2)};
    std::vector<std::vector<int64_t>> dims = expand;
    inputs[i] = g[0];
    dims[i] = sumdim;
    out[i] = ops::_trilinear(inputs[0], inputs[1], inputs[2], dims[0], dims[1], dims[2], expand[i], 1);
  }
  return out;
});
// bilinear is upstream's _trilinear(rows1, W, rows2, [1, 3], [0], [1, 2], [2, 3]) plus the bias:
// the same gradients, over the rows.
TN_DERIVATIVE("aten::bilinear", "TrilinearBackward0", SAVES(0, 1, 2), {
  const Tensor &x1 = s.input(0), &x2 = s.input(1), &w = s.input(2);
  Tensor rows1 = ops::reshape(x1, {-1, w.size(1)}), rows2 = ops::reshape(x2, {-1, w.size(2)});
  Tensor grad = ops::reshape(g[0], {-1, w.size(0)});
  Stack out(4);
  if (s.needs_grad(0))
    out[0] = ops::reshape(ops::_trilinear(grad, w, rows2, {2, 3}, {0}, {1, 2}, {1, 3}, 1), x1.sizes());
  if (s.needs_grad(1))
    out[1] = ops::reshape(ops::_trilinear(rows1, w, grad, {1, 3}, {0}, {2, 3}, {1, 2}, 1), x2.sizes());
  if (s.needs_grad(2)) out[2] = ops::_trilinear(rows1, grad, rows2, {1, 3}, {2, 3}, {1, 2}, {0}, 1);
  if (s.needs_grad(3))
    out[3] = ops::reshape(ops::sum(grad, std::vector<int64_t>{0}, false, std::nullopt), s.input_sizes(3));
  return out;
});

}  // namespace tn::autograd
