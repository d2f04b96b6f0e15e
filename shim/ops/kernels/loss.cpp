// Loss functions: mse, l1, smooth_l1, huber, soft_margin, binary_cross_entropy(_with_logits), kl_div,
// nll_loss, cross_entropy.
#include <cmath>
#include <limits>

#include "common.h"
#include "typed_ops.h"

namespace tn {

namespace {

// reduction: 0 none, 1 mean, 2 sum (upstream's Reduction enum).
Tensor reduce(const Tensor& loss, int64_t reduction) {
  if (reduction == 1) return ops::mean(loss);
  if (reduction == 2) return ops::sum(loss);
  return loss;
}

void check_same_size(const Tensor& input, const Tensor& target, const char* name) {
  if (input.sizes() != target.sizes())
    throw Error(std::string(name) + ": input and target sizes must match: " + shape_str(input.sizes()) +
                " vs " + shape_str(target.sizes()));
}

template <typename F>
Tensor pointwise_loss(const Tensor& input, const Tensor& target, int64_t reduction, F f) {
  Tensor x = input, t = target;
  ScalarType type = result_type(x, t);
  Tensor loss = TN_DISPATCH_ALL_TYPES(type, "loss", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    // float32 reaches a generic `f` as float: upstream's loss kernels compute in the
    // storage type, and their sums add exactly those values.
    if constexpr (std::is_same_v<scalar_t, float>)
      return map_binary<scalar_t>(x, t, type, type,
                                  [&](double a, double b) -> double { return f(float(a), float(b)); });
    else if constexpr (std::is_floating_point_v<compute_t<scalar_t>>)
      return map_binary<scalar_t>(x, t, type, type, [&](double a, double b) -> double { return f(a, b); });
    else
      return Tensor();
  });
  if (!loss.defined()) dtype_not_implemented("loss", type);
  return reduce(loss, reduction);
}

}  // namespace

TN_KERNEL("aten::mse_loss", {
  check_same_size(a.tensor(0), a.tensor(1), "mse_loss");
  return pointwise_loss(a.tensor(0), a.tensor(1), a.integer(2),
                        [](auto x, auto t) { return (x - t) * (x - t); });
});
TN_KERNEL("aten::l1_loss", {
  check_same_size(a.tensor(0), a.tensor(1), "l1_loss");
  return pointwise_loss(a.tensor(0), a.tensor(1), a.integer(2),
                        [](auto x, auto t) { return std::abs(x - t); });
});
TN_KERNEL("aten::smooth_l1_loss", {
  double beta = a.real(3);
  if (beta < 0) throw Error("smooth_l1_loss does not support negative values for beta.");
  return pointwise_loss(a.tensor(0), a.tensor(1), a.integer(2), [beta](auto x, auto t) {
    using T = decltype(x);
    T d = std::abs(x - t), b = T(beta), half = T(0.5);
    return beta == 0 ? d : d < b ? half * d * d / b : d - half * b;
  });
});
TN_KERNEL("aten::huber_loss", {
  double delta = a.real(3);
  if (delta <= 0) throw Error("huber_loss does not support non-positive values for delta.");
  return pointwise_loss(a.tensor(0), a.tensor(1), a.integer(2), [delta](auto x, auto t) {
    using T = decltype(x);
    T d = std::abs(x - t), k = T(delta), half = T(0.5);
    return d < k ? half * d * d : k * (d - half * k);
  });
});
TN_KERNEL("aten::soft_margin_loss", {
  const Tensor &x = a.tensor(0), &t = a.tensor(1);
  if (!is_floating(x.dtype()))
    return pointwise_loss(x, t, a.integer(2),
                          [](double v, double w) { return std::log(1 + std::exp(-v * w)); });
  // Upstream's chain of in-place steps in the input's dtype, log(1 + exp(-input * target)),
  // with exp and log through the vml (SLEEF) kernels.
  Tensor product = ops::mul(ops::neg(x), t).to(x.dtype());
  Tensor loss = ops::log(ops::add(ops::exp(product), Scalar(int64_t{1}), Scalar(int64_t{1})));
  return reduce(loss, a.integer(2));
});
TN_KERNEL("aten::binary_cross_entropy", {
  const Tensor &x = a.tensor(0), &t = a.tensor(1);
  check_same_size(x, t, "binary_cross_entropy");
  Tensor loss = pointwise_loss(x, t, 0, [](double p, double y) {
    if (p < 0 || p > 1) throw Error("all elements of input should be between 0 and 1");
    return -(y * std::max(std::log(p), -100.0) + (1 - y) * std::max(std::log1p(-p), -100.0));
  });
  if (auto w = a.optional_tensor(2)) loss = ops::mul(loss, *w);
  return reduce(loss, a.integer(3));
});
// In upstream's steps, each rounded to the dtype: m = max(-x, 0),
// loss = (1 - t) x + c (log(exp(-m) + exp(-x - m)) + m), c = 1 + (pos_weight - 1) t.
TN_KERNEL("aten::binary_cross_entropy_with_logits", {
  const Tensor &x = a.tensor(0), &t = a.tensor(1);
  auto pos_weight = a.optional_tensor(3);
  Tensor m = ops::clamp_min(ops::neg(x), Scalar(0.0));
  Tensor log_sum = ops::log(ops::add(ops::exp(ops::neg(m)), ops::exp(ops::sub(ops::neg(x), m))));
  Tensor loss = ops::mul(ops::rsub(t, float_number(1.0)), x);
  if (pos_weight) {
    Tensor coefficient = ops::add(ops::mul(ops::sub(*pos_weight, float_number(1.0)), t), float_number(1.0));
    loss = ops::add(loss, ops::mul(coefficient, ops::add(log_sum, m)));
  } else {
    loss = ops::add(ops::add(loss, m), log_sum);
  }
  if (auto w = a.optional_tensor(2)) loss = ops::mul(loss, *w);
  return reduce(loss, a.integer(4));
});
TN_KERNEL("aten::kl_div", {
  const Tensor &x = a.tensor(0), &t = a.tensor(1);
  Tensor loss =
      a.boolean(3) ? ops::mul(ops::exp(t), ops::sub(t, x)) : ops::sub(ops::xlogy(t, t), ops::mul(t, x));
  return reduce(loss, a.integer(2));
});
TN_KERNEL("aten::nll_loss_nd", {
  const Tensor& x = a.tensor(0);
  const Tensor& target = a.tensor(1);
  auto weight = a.optional_tensor(2);
  int64_t reduction = a.integer(3), ignore = a.integer(4);
  if (x.dim() < 1) throw Error("input tensor should be 1D or more");
  if (target.dtype() != ScalarType::Long)
    throw Error("expected scalar type Long but found " + std::string(upstream_type_name(target.dtype())));
  bool single = x.dim() == 1;
  Tensor input = single ? ops::unsqueeze(x, int64_t{0}) : x;
  Tensor tgt = single ? ops::unsqueeze(target, int64_t{0}) : target;
  int64_t classes = input.size(1);
  // Class dim last, everything else flattened: (M, C) and (M,).
  Tensor moved = ops::movedim(input, int64_t{1}, int64_t{-1});
  Tensor rows = ops::reshape(moved, Shape{-1, classes}).to(ScalarType::Double).contiguous();
  Tensor t = ops::reshape(tgt, Shape{-1}).contiguous();
  if (rows.size(0) != t.numel())
    throw Error("Expected input batch_size (" + std::to_string(input.size(0)) +
                ") to match target batch_size (" + std::to_string(tgt.size(0)) + ").");
  Tensor w = weight ? weight->to(ScalarType::Double).contiguous() : Tensor();
  Tensor losses = Tensor::empty({t.numel()}, ScalarType::Double);
  double total = 0, total_weight = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t c = t.data_as<int64_t>()[i];
    double l = 0;
    if (c != ignore) {
      if (c < 0 || c >= classes) throw IndexError("Target " + std::to_string(c) + " is out of bounds.");
      double wc = weight ? w.data_as<double>()[c] : 1.0;
      l = -rows.data_as<double>()[i * classes + c] * wc;
      total_weight += wc;
    }
    losses.data_as<double>()[i] = l;
    total += l;
  }
  ScalarType out_type = x.dtype();
  if (reduction == 0)
    return ops::reshape(losses.to(out_type), tgt.sizes())
        .view_as_strided(target.sizes(), contiguous_strides(target.sizes()), 0);
  Tensor result = Tensor::empty({}, ScalarType::Double);
  *result.data_as<double>() = reduction == 2 ? total : total / total_weight;
  return result.to(out_type);
});
TN_KERNEL("aten::cross_entropy_loss", {
  const Tensor& x = a.tensor(0);
  const Tensor& target = a.tensor(1);
  auto weight = a.optional_tensor(2);
  int64_t reduction = a.integer(3), ignore = a.integer(4);
  double smoothing = a.real(5);
  int64_t class_dim = x.dim() == 1 ? 0 : 1;
  Tensor logp = ops::log_softmax(x, class_dim, std::nullopt);
  if (is_floating(target.dtype())) {
    // Class probabilities.
    Tensor t = smoothing > 0 ? ops::add(ops::mul(target, Scalar(1 - smoothing)),
                                        float_number(smoothing / double(x.size(class_dim))))
                             : target;
    Tensor product = ops::mul(logp, t);
    if (weight) product = ops::mul(product, x.dim() == 1 ? *weight : per_channel(*weight, x.dim()));
    Tensor loss = ops::neg(ops::sum(product, std::vector<int64_t>{class_dim}, false, std::nullopt));
    if (reduction == 1)
      return ops::div(
          ops::sum(loss),
          Scalar(x.dim() == 1 ? int64_t{1}
                              : x.size(0) * (x.numel() / std::max<int64_t>(x.size(0) * x.size(1), 1))));
    return reduce(loss, reduction);
  }
  Tensor nll = ops::nll_loss_nd(logp, target, weight, reduction, ignore);
  if (smoothing <= 0) return nll;
  // Label smoothing mixes in the mean negative log-probability over classes.
  Tensor per_class =
      ops::neg(weight ? ops::mul(logp, x.dim() == 1 ? *weight : per_channel(*weight, x.dim())) : logp);
  Tensor smooth = ops::sum(per_class, std::vector<int64_t>{class_dim}, false, std::nullopt);
  Tensor ignored = ops::eq(target, Scalar(ignore));
  smooth = ops::masked_fill(smooth, ignored, Scalar(int64_t{0}));
  if (reduction == 1) {
    if (weight) {
      Tensor wt = ops::masked_fill(
          ops::index_select(*weight, int64_t{0},
                            ops::reshape(ops::clamp_min(target, Scalar(int64_t{0})), Shape{-1})),
          ops::reshape(ignored, Shape{-1}), Scalar(int64_t{0}));
      smooth = ops::div(ops::sum(smooth), ops::sum(wt));
    } else {
      Tensor count = ops::sum(ops::logical_not(ignored));
      smooth = ops::div(ops::sum(smooth), count);
    }
  } else if (reduction == 2) {
    smooth = ops::sum(smooth);
  }
  return ops::add(ops::mul(nll, Scalar(1 - smoothing)),
                  ops::mul(smooth, Scalar(smoothing / double(x.size(class_dim)))));
});

}  // namespace tn
