// Normalization layers: batch_norm, layer_norm, group_norm, instance_norm.
#include <cmath>
#include <limits>

#include "common.h"
#include "typed_ops.h"

namespace tn {

namespace {

// Normalizes `x` viewed as (outer, inner) rows: (x - mean) / sqrt(var + eps), biased var.
Tensor normalize_rows(const Tensor& x, int64_t outer, double eps) {
  Tensor rows = ops::reshape(x, Shape{outer, outer ? x.numel() / outer : 0});
  Tensor mean = ops::mean(rows, std::vector<int64_t>{1}, true, std::nullopt);
  Tensor var = ops::var_correction(rows, std::vector<int64_t>{1}, int64_t{0}, true);
  Tensor normalized = ops::div(ops::sub(rows, mean), ops::sqrt(ops::add(var, float_number(eps))));
  return ops::reshape(normalized, x.sizes());
}

// Shape (1, C, 1, ...) for per-channel parameters of an (N, C, ...) input.
Tensor affine(Tensor y, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, int64_t ndim,
              bool channel) {
  if (weight) y = ops::mul(y, channel ? per_channel(*weight, ndim) : *weight);
  if (bias) y = ops::add(y, channel ? per_channel(*bias, ndim) : *bias);
  return y;
}

Tensor batch_norm(const Tensor& input, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                  const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
                  bool training, double momentum, double eps) {
  if (input.dim() < 2) throw Error("batch_norm: expected input with at least 2 dims");
  int64_t channels = input.size(1), nd = input.dim();
  Shape dims{0};
  for (int64_t d = 2; d < nd; ++d) dims.push_back(d);
  Tensor mean, var;
  if (training) {
    int64_t count = input.numel() / std::max<int64_t>(channels, 1);
    if (count <= 1)
      throw Error("Expected more than 1 value per channel when training, got input size " +
                  shape_str(input.sizes()));
    // Upstream's per-channel statistics add in input order in double (not the cascade sum).
    mean = sequential_mean(input, dims, false, input.dtype());
    var = ops::var_correction(input, dims, int64_t{0}, false);
    if (running_mean) {
      running_mean->copy_from(
          ops::add(ops::mul(*running_mean, Scalar(1 - momentum)), ops::mul(mean, Scalar(momentum))));
    }
    if (running_var) {
      Tensor unbiased = ops::mul(var, Scalar(double(count) / double(count - 1)));
      running_var->copy_from(
          ops::add(ops::mul(*running_var, Scalar(1 - momentum)), ops::mul(unbiased, Scalar(momentum))));
    }
  } else {
    if (!running_mean || !running_var)
      throw Error("running_mean and running_var must be defined in evaluation mode");
    mean = *running_mean;
    var = *running_var;
  }
  Tensor invstd = ops::rsqrt(ops::add(var, float_number(eps)));
  Tensor y = ops::mul(ops::sub(input, per_channel(mean, nd)), per_channel(invstd, nd));
  return affine(y, weight, bias, nd, true);
}

}  // namespace

TN_KERNEL("aten::layer_norm", {
  const Tensor& x = a.tensor(0);
  Shape normalized = a.int_list(1);
  int64_t k = int64_t(normalized.size());
  if (k > x.dim() || !std::equal(normalized.begin(), normalized.end(), x.sizes().end() - k))
    throw Error("Given normalized_shape=" + shape_str(normalized) + ", expected input with shape [*, " +
                shape_str(normalized).substr(1) + ", but got input of size" + shape_str(x.sizes()));
  int64_t outer = 1;
  for (int64_t d = 0; d < x.dim() - k; ++d) outer *= x.size(d);
  return affine(normalize_rows(x, outer, a.real(4)), a.optional_tensor(2), a.optional_tensor(3), x.dim(),
                false);
});
TN_KERNEL("aten::batch_norm", {
  return batch_norm(a.tensor(0), a.optional_tensor(1), a.optional_tensor(2), a.optional_tensor(3),
                    a.optional_tensor(4), a.boolean(5), a.real(6), a.real(7));
});
TN_KERNEL("aten::group_norm", {
  const Tensor& x = a.tensor(0);
  int64_t groups = a.integer(1), n = x.size(0), c = x.size(1);
  if (groups <= 0) throw Error("group_norm: num_groups must be positive, but got " + std::to_string(groups));
  if (c % groups != 0)
    throw Error(
        "Expected number of channels in input to be divisible by num_groups, but got input of shape " +
        shape_str(x.sizes()) + " and num_groups=" + std::to_string(groups));
  return affine(normalize_rows(x, n * groups, a.real(4)), a.optional_tensor(2), a.optional_tensor(3), x.dim(),
                true);
});
TN_KERNEL("aten::instance_norm", {
  const Tensor& x = a.tensor(0);
  if (!a.boolean(5)) {
    return batch_norm(x, a.optional_tensor(1), a.optional_tensor(2), a.optional_tensor(3),
                      a.optional_tensor(4), false, a.real(6), a.real(7));
  }
  int64_t n = x.size(0), c = x.size(1);
  return affine(normalize_rows(x, n * c, a.real(7)), a.optional_tensor(1), a.optional_tensor(2), x.dim(),
                true);
});

}  // namespace tn
