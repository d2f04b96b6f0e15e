// Loss functions: mse, l1, smooth_l1, huber, soft_margin, binary_cross_entropy(_with_logits), kl_div,
// nll_loss, cross_entropy.
#include "loss.h"

#include <bit>
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
      return map_binary<scalar_t>(x, t, type,
                                  [&](double a, double b) -> double { return f(float(a), float(b)); });
    else if constexpr (std::is_floating_point_v<compute_t<scalar_t>>)
      return map_binary<scalar_t>(x, t, type, [&](double a, double b) -> double { return f(a, b); });
    else
      return Tensor();
  });
  if (!loss.defined()) dtype_not_implemented("loss", type);
  return reduce(loss, reduction);
}

// nll_loss's samples: the input's rows with its class dim last (a 1-d input is one row), and
// their targets in the same order.
struct NllSamples {
  Tensor rows;     // (samples, classes), contiguous
  Tensor targets;  // (samples,), contiguous int64
  int64_t classes = 0;
  int64_t count() const { return targets.numel(); }
};

NllSamples nll_samples(const Tensor& x, const Tensor& target) {
  if (x.dim() < 1) throw Error("input tensor should be 1D or more");
  if (target.dtype() != ScalarType::Long)
    throw Error("expected scalar type Long but found " + std::string(upstream_type_name(target.dtype())));
  Tensor input = x.dim() == 1 ? ops::unsqueeze(x, int64_t{0}) : x;
  Tensor tgt = x.dim() == 1 ? ops::unsqueeze(target, int64_t{0}) : target;
  int64_t classes = input.size(1);
  Tensor rows = ops::reshape(ops::movedim(input, int64_t{1}, int64_t{-1}), Shape{-1, classes}).contiguous();
  Tensor targets = ops::reshape(tgt, Shape{-1}).contiguous();
  if (rows.size(0) != targets.numel())
    throw Error("Expected input batch_size (" + std::to_string(input.size(0)) +
                ") to match target batch_size (" + std::to_string(tgt.size(0)) + ").");
  return {rows, targets, classes};
}

// The class of sample i, or -1 when ignored.
int64_t nll_class(const NllSamples& samples, int64_t i, int64_t ignore_index) {
  int64_t c = samples.targets.data_as<int64_t>()[i];
  if (c == ignore_index) return -1;
  if (c < 0 || c >= samples.classes) throw IndexError("Target " + std::to_string(c) + " is out of bounds.");
  return c;
}

// What upstream's arithmetic on T computes in: c10's Half and BFloat16 compute in float and round
// each result back (T(...) here).
template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Upstream's reduced nll_loss in the storage type T: each kept sample's -x[t] w[t] (and w[t])
// goes into the first of 8 partial sums; after sample i, each level whose block of
// 2^(power (j + 1)) samples i starts is added into the next and cleared (a cascade sum that
// keeps long sums accurate); the levels are added in order at the end. The loss and the total
// weight (the count of kept samples without weights).
template <typename T>
std::pair<T, T> nll_loss_sums(const NllSamples& samples, const T* weight, int64_t ignore_index) {
  constexpr int levels = 8;
  int64_t n = samples.count();
  int64_t power = std::max<int64_t>(4, n <= 2 ? 1 : std::bit_width(uint64_t(n - 1)) / levels), ignored = 0;
  int64_t mask = (int64_t{1} << power) - 1;
  T loss[levels] = {}, weights[levels] = {};
  const T* x = samples.rows.data_as<T>();
  for (int64_t i = 0; i < n; ++i) {
    int64_t c = nll_class(samples, i, ignore_index);
    if (c < 0) {
      ++ignored;
      continue;
    }
    T value = x[i * samples.classes + c];
    loss[0] = weight ? T(loss[0] - T(value * weight[c])) : T(loss[0] - value);
    if (weight) weights[0] = T(weights[0] + weight[c]);
    for (int j = 0; j + 1 < levels && (i & (mask << (j * power))) == 0; ++j) {
      loss[j + 1] = T(loss[j + 1] + loss[j]), weights[j + 1] = T(weights[j + 1] + weights[j]);
      loss[j] = weights[j] = T(Acc<T>(0));
    }
  }
  T total_loss = T(Acc<T>(0)), total_weight = T(Acc<T>(0));
  for (int j = 0; j < levels; ++j)
    total_loss = T(total_loss + loss[j]), total_weight = T(total_weight + weights[j]);
  return {total_loss, weight ? total_weight : T(Acc<T>(n - ignored))};
}

// Runs f(tag) for the floating dtypes upstream's nll_loss kernels take; refuses the others.
template <typename F>
void nll_dispatch(const Tensor& x, F f) {
  ScalarType t = x.dtype();
  if (!is_floating(t))
    dtype_not_implemented(x.dim() <= 2 ? "nll_loss_out_frame" : "nll_loss2d_forward_out_frame", t);
  TN_DISPATCH_ALL_TYPES(t, "nll_loss", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    if constexpr (!std::is_integral_v<scalar_t>) f(tag_);
  });
}

std::optional<Tensor> contiguous_weight(const std::optional<Tensor>& weight, ScalarType type) {
  if (!weight) return std::nullopt;
  return weight->to(type).contiguous();
}

Tensor nll_loss(const Tensor& x, const Tensor& target, const std::optional<Tensor>& weight, int64_t reduction,
                int64_t ignore_index) {
  NllSamples samples = nll_samples(x, target);
  std::optional<Tensor> w = contiguous_weight(weight, x.dtype());
  Tensor out = Tensor::empty(reduction == 0 ? samples.targets.sizes() : Shape{}, x.dtype());
  if (!out.is_meta())  // the meta device: the shape is the result
    nll_dispatch(x, [&](auto tag_) {
      using T = TN_TYPE(tag_);
      const T* wd = w ? w->template data_as<T>() : nullptr;
      T* o = out.template data_as<T>();
      if (reduction == 0) {
        const T* x = samples.rows.template data_as<T>();
        for (int64_t i = 0; i < samples.count(); ++i) {
          int64_t c = nll_class(samples, i, ignore_index);
          o[i] = c < 0 ? T(Acc<T>(0))
                       : T(-Acc<T>(x[i * samples.classes + c]) * (wd ? Acc<T>(wd[c]) : Acc<T>(1)));
        }
        return;
      }
      if (samples.count() == 0) {
        *o = T(reduction == 1 ? std::numeric_limits<Acc<T>>::quiet_NaN() : Acc<T>(0));
        return;
      }
      auto [loss, total_weight] = nll_loss_sums<T>(samples, wd, ignore_index);
      *o = reduction == 1 ? T(loss / total_weight) : loss;
    });
  if (reduction != 0) return out;
  return out.view_as_strided(target.sizes(), contiguous_strides(target.sizes()), 0);
}

}  // namespace

Tensor nll_loss_backward(const Tensor& grad, const Tensor& input, const Tensor& target,
                         const std::optional<Tensor>& weight, int64_t reduction, int64_t ignore_index) {
  NllSamples samples = nll_samples(input, target);
  std::optional<Tensor> w = contiguous_weight(weight, input.dtype());
  Tensor g = grad.to(input.dtype()).contiguous();
  Tensor rows = ops::zeros({samples.count(), samples.classes}, input.dtype());
  if (!rows.is_meta())  // the meta device: the shape is the result
    nll_dispatch(input, [&](auto tag_) {
      using T = TN_TYPE(tag_);
      const T *wd = w ? w->template data_as<T>() : nullptr, *gd = g.template data_as<T>();
      T* out = rows.template data_as<T>();
      auto weight_of = [wd](int64_t c) { return wd ? Acc<T>(wd[c]) : Acc<T>(1); };
      if (reduction == 0) {
        for (int64_t i = 0; i < samples.count(); ++i)
          if (int64_t c = nll_class(samples, i, ignore_index); c >= 0)
            out[i * samples.classes + c] = T(-weight_of(c) * Acc<T>(gd[i]));
        return;
      }
      if (samples.count() == 0) return;
      T total_weight = nll_loss_sums<T>(samples, wd, ignore_index).second;
      T share = T(-Acc<T>(reduction == 1 ? T(Acc<T>(gd[0]) / Acc<T>(total_weight)) : gd[0]));
      for (int64_t i = 0; i < samples.count(); ++i)
        if (int64_t c = nll_class(samples, i, ignore_index); c >= 0)
          out[i * samples.classes + c] = wd ? T(weight_of(c) * Acc<T>(share)) : share;
    });
  // Back to the input's layout: the rows were its class dim moved last, the rest flattened.
  Tensor batched = input.dim() == 1 ? ops::unsqueeze(input, int64_t{0}) : input;
  Tensor moved = ops::movedim(batched, int64_t{1}, int64_t{-1});
  Tensor shaped = ops::movedim(ops::reshape(rows, moved.sizes()), int64_t{-1}, int64_t{1});
  return ops::reshape(shaped, input.sizes()).contiguous();
}

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
TN_KERNEL("aten::nll_loss_nd",
          { return nll_loss(a.tensor(0), a.tensor(1), a.optional_tensor(2), a.integer(3), a.integer(4)); });
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
    // Upstream sums the products of every element for a reduced loss (not the rows' sums).
    if (reduction == 0)
      return ops::neg(ops::sum(product, std::vector<int64_t>{class_dim}, false, std::nullopt));
    Tensor total = ops::neg(ops::sum(product));
    if (reduction == 2) return total;
    return ops::div(
        total, Scalar(x.dim() == 1 ? int64_t{1}
                                   : x.size(0) * (x.numel() / std::max<int64_t>(x.size(0) * x.size(1), 1))));
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
