// dropout and its feature and alpha forms: upstream's _dropout_impl, composed of operators the
// autograd records (record.cpp's kDecomposed), so the gradient is upstream's MulBackward0 (and
// AddBackward0 for alpha dropout) through the same noise.
#include <cmath>
#include <limits>

#include "common.h"
#include "typed_ops.h"

namespace tn {

namespace {

// One draw per (sample, channel) for feature dropout: noise shaped (N, C, 1, ...).
Tensor noise_like(const Tensor& x, bool feature) {
  if (!feature) return Tensor::empty(x.sizes(), x.dtype());
  if (x.dim() < 2) throw Error("Feature dropout requires at least 2 dimensions in the input");
  Shape sizes(size_t(x.dim()), 1);
  sizes[0] = x.size(0);
  sizes[1] = x.size(1);
  return Tensor::empty(sizes, x.dtype());
}

// noise = bernoulli(1 - p); plain dropout is x * noise / (1 - p); alpha dropout keeps SELU's mean
// and variance: x * noise a + (noise - 1) alpha a + alpha a p, a = 1 / sqrt((alpha^2 p + 1)(1 - p)).
Tensor dropout_impl(const Tensor& x, double p, bool train, bool feature, bool alpha_dropout) {
  if (!(p >= 0 && p <= 1))
    throw Error("dropout probability has to be between 0 and 1, but got " + std::to_string(p));
  if (p == 0 || !train || x.numel() == 0) return x;
  if (p == 1) return ops::mul(x, ops::zeros({}, x.dtype()));
  Tensor noise = noise_like(x, feature);
  ops::bernoulli_(noise, 1 - p);
  if (!alpha_dropout) return ops::mul(x, ops::div_(noise, Scalar(1 - p)));
  constexpr double alpha = 1.7580993408473766;  // SELU's alpha times its scale, as upstream's
  double a = 1. / std::sqrt((alpha * alpha * p + 1) * (1 - p));
  Tensor b = ops::add(noise, Scalar(int64_t{-1}), Scalar(int64_t{1}));
  ops::add_(ops::mul_(b, Scalar(alpha * a)), Scalar(alpha * a * p), Scalar(int64_t{1}));
  ops::mul_(noise, Scalar(a));
  return ops::add(ops::mul(x, noise), b, Scalar(int64_t{1}));
}

}  // namespace

TN_KERNEL("aten::dropout", { return dropout_impl(a.tensor(0), a.real(1), a.boolean(2), false, false); });
TN_KERNEL("aten::feature_dropout",
          { return dropout_impl(a.tensor(0), a.real(1), a.boolean(2), true, false); });
TN_KERNEL("aten::alpha_dropout", { return dropout_impl(a.tensor(0), a.real(1), a.boolean(2), false, true); });
TN_KERNEL("aten::feature_alpha_dropout",
          { return dropout_impl(a.tensor(0), a.real(1), a.boolean(2), true, true); });

}  // namespace tn
