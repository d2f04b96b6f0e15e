// Distances: pairwise_distance, cdist, cosine_similarity.
#include <cmath>
#include <limits>

#include "common.h"
#include "core/autograd_mode.h"
#include "typed_ops.h"

namespace tn {

namespace {

Tensor p_distance(const Tensor& diff, double p, int64_t dim, bool keepdim) {
  return ops::linalg_vector_norm(diff, Scalar(p), std::vector<int64_t>{dim}, keepdim, std::nullopt);
}

}  // namespace

TN_KERNEL("aten::pairwise_distance", {
  Tensor diff = ops::add(ops::sub(a.tensor(0), a.tensor(1)), float_number(a.real(3)));
  int64_t dim = std::max(a.tensor(0).dim(), a.tensor(1).dim()) - 1;
  return p_distance(diff, a.real(2), std::max<int64_t>(dim, 0), a.boolean(4));
});
TN_KERNEL("aten::cdist", {
  const Tensor &x1 = a.tensor(0), &x2 = a.tensor(1);
  if (x1.dim() < 2 || x2.dim() < 2)
    throw Error("cdist only supports at least 2D tensors, X1 got: " + std::to_string(x1.dim()) + "D");
  if (x1.size(-1) != x2.size(-1))
    throw Error("X1 and X2 must have the same number of columns. X1: " + std::to_string(x1.size(-1)) +
                " X2: " + std::to_string(x2.size(-1)));
  Tensor diff = ops::sub(ops::unsqueeze(x1, int64_t{-2}), ops::unsqueeze(x2, int64_t{-3}));
  return p_distance(diff, a.real(2), -1, false);
});
TN_KERNEL("aten::cosine_similarity", {
  const Tensor &x1 = a.tensor(0), &x2 = a.tensor(1);
  int64_t dim = a.integer(2);
  double eps = a.real(3);
  // Upstream's steps: each input over its norm, the products summed. The squared norm is
  // clamped at eps^2 without recording, so its gradient passes the clamp unchanged.
  auto norm = [&](const Tensor& x) {
    Tensor squared = ops::sum(ops::pow(x, Scalar(int64_t{2})), std::vector<int64_t>{dim}, true, std::nullopt);
    {
      GradMode::Scope no_grad(false);
      ops::clamp_min_(squared, Scalar(eps * eps));
    }
    return ops::sqrt(squared);
  };
  Tensor product = ops::mul(ops::div(x1, norm(x1)), ops::div(x2, norm(x2)));
  return ops::sum(product, std::vector<int64_t>{dim}, false, std::nullopt);
});

}  // namespace tn
