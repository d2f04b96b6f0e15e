// Activation functions: relu relu6 hardtanh threshold leaky_relu elu celu selu silu mish gelu hardsigmoid
// hardswish hardshrink softshrink softplus log_sigmoid glu prelu rrelu.
#include <cmath>
#include <limits>

#include "common.h"
#include "typed_ops.h"

namespace tn {

namespace {

// Activations keep the input's floating dtype (integers are refused by name).
template <typename F>
Tensor activation(const Tensor& x, const char* kernel, F f) {
  if (!is_floating(x.dtype())) dtype_not_implemented(kernel, x.dtype());
  return float_unary(x, nullptr, f);
}

// Upstream's scalar elu: exp(x * input_scale) - 1, not expm1, and the coefficients
// formed in the storage type.
template <typename T>
T elu_scalar(T v, T negcoef, T poscoef, T negiptcoef) {
  return v <= T(0) ? (std::exp(v * negiptcoef) - T(1)) * negcoef : v * poscoef;
}

Tensor elu(const Tensor& x, const Scalar& alpha, const Scalar& scale, const Scalar& input_scale) {
  auto run = [&](auto zero) {
    using T = decltype(zero);
    T negcoef = alpha.to<T>() * scale.to<T>(), poscoef = scale.to<T>(), negiptcoef = input_scale.to<T>();
    return cpu_kernel_vec<T>(
        std::array{x}, [=](T v) { return elu_scalar(v, negcoef, poscoef, negiptcoef); },
        [=](const T* in, T* out, int64_t n) { vml_elu(in, out, n, negcoef, poscoef, negiptcoef); });
  };
  if (x.dtype() == ScalarType::Double) return run(0.0);
  if (x.dtype() == ScalarType::Float) return run(0.0f);
  double negcoef = alpha.to_double() * scale.to_double(), poscoef = scale.to_double(),
         negiptcoef = input_scale.to_double();
  return activation(x, "elu_cpu", [=](double v) { return elu_scalar(v, negcoef, poscoef, negiptcoef); });
}

double sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

}  // namespace

TN_KERNEL("aten::relu", {
  const Tensor& x = a.tensor(0);
  if (x.dtype() == ScalarType::Bool) dtype_not_implemented("clamp_min_scalar_cpu", x.dtype());
  return ops::clamp_min(x, Scalar(int64_t{0}));
});
TN_KERNEL("aten::relu6", { return ops::hardtanh(a.tensor(0), Scalar(int64_t{0}), Scalar(int64_t{6})); });
TN_KERNEL("aten::hardtanh", {
  const Tensor& x = a.tensor(0);
  if (x.dtype() == ScalarType::Bool) dtype_not_implemented("hardtanh_cpu", x.dtype());
  if (x.dtype() == ScalarType::Byte && (a.scalar(1).to_double() < 0 || a.scalar(2).to_double() < 0))
    throw Error("cannot do hardtanh on an unsigned type with negative limits");
  return ops::clamp(x, a.optional_scalar(1), a.optional_scalar(2));
});
TN_KERNEL("aten::threshold", {
  double th = a.scalar(1).to_double(), value = a.scalar(2).to_double();
  return float_unary(a.tensor(0), "threshold_cpu", [=](double v) { return v <= th ? value : v; })
      .to(a.tensor(0).dtype());
});
// threshold_backward(grad_output, self, threshold): the gradient where self > threshold, 0 where
// not (a NaN self passes it: upstream's `self <= threshold ? 0 : grad`). relu's and threshold's
// derivative in one loop, not a comparison, a zero tensor and a where.
TN_KERNEL("aten::threshold_backward", {
  const Tensor &grad = a.tensor(0), &self = a.tensor(1);
  ScalarType t = result_type(grad, self);
  if (t == ScalarType::Bool || t == ScalarType::Half) dtype_not_implemented("threshold_cpu", t);
  return TN_DISPATCH_ALL_TYPES(t, "threshold_backward", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    c threshold = c(a.scalar(2).to<scalar_t>());  // in the operands' type, as upstream's kernel
    return map_binary<scalar_t>(grad, self, t, t, [=](c g, c x) { return x <= threshold ? c(0) : g; });
  });
});
TN_KERNEL("aten::leaky_relu", {
  double slope = a.scalar(1).to_double();
  return activation(a.tensor(0), "leaky_relu_cpu", [=](double v) { return v > 0 ? v : v * slope; });
});
TN_KERNEL("aten::elu", { return elu(a.tensor(0), a.scalar(1), a.scalar(2), a.scalar(3)); });
// Upstream's celu and selu are elu with these coefficients.
TN_KERNEL("aten::celu", {
  const Scalar& alpha = a.scalar(1);
  return elu(a.tensor(0), alpha, Scalar(1.0), Scalar(1.0 / alpha.to_double()));
});
TN_KERNEL("aten::selu", {
  return elu(a.tensor(0), Scalar(1.6732632423543772848170429916717),
             Scalar(1.0507009873554804934193349852946), Scalar(1.0));
});
TN_KERNEL("aten::silu",
          { return activation(a.tensor(0), "silu_cpu", [](double v) { return v * sigmoid(v); }); });
TN_KERNEL("aten::mish", {
  if (a.tensor(0).dtype() == ScalarType::BFloat16) dtype_not_implemented("mish_cpu", ScalarType::BFloat16);
  return activation(a.tensor(0), "mish_cpu", [](double v) { return v * std::tanh(std::log1p(std::exp(v))); });
});
TN_KERNEL("aten::gelu", {
  std::string approximate = a.optional_string(1).value_or("none");
  if (approximate != "none" && approximate != "tanh")
    throw Error("approximate argument must be either none or tanh.");
  bool tanh = approximate == "tanh";
  return activation(a.tensor(0), "GeluKernelImpl", [tanh](double v) {
    if (tanh) return 0.5 * v * (1 + std::tanh(std::sqrt(2 / kPi) * (v + 0.044715 * v * v * v)));
    return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
  });
});
TN_KERNEL("aten::hardsigmoid", {
  return activation(a.tensor(0), "hardsigmoid_cpu",
                    [](double v) { return std::min(std::max(v + 3, 0.0), 6.0) / 6; });
});
TN_KERNEL("aten::hardswish", {
  return activation(a.tensor(0), "hardswish_cpu",
                    [](double v) { return v * std::min(std::max(v + 3, 0.0), 6.0) / 6; });
});
TN_KERNEL("aten::hardshrink", {
  double lambd = a.scalar(1).to_double();
  return activation(a.tensor(0), "hardshrink_cpu",
                    [=](double v) { return v >= -lambd && v <= lambd ? 0.0 : v; });
});
TN_KERNEL("aten::softshrink", {
  double lambd = a.scalar(1).to_double();
  return activation(a.tensor(0), "softshrink_cpu", [=](double v) {
    return v > lambd ? v - lambd : v < -lambd ? v + lambd : 0.0;
  });
});
TN_KERNEL("aten::softplus", {
  double beta = a.scalar(1).to_double(), threshold = a.scalar(2).to_double();
  return activation(a.tensor(0), "softplus_cpu", [=](double v) {
    return v * beta > threshold ? v : std::log1p(std::exp(v * beta)) / beta;
  });
});
TN_KERNEL("aten::log_sigmoid", {
  return activation(a.tensor(0), "log_sigmoid_cpu",
                    [](double v) { return std::min(v, 0.0) - std::log1p(std::exp(-std::abs(v))); });
});
TN_KERNEL("aten::glu", {
  const Tensor& x = a.tensor(0);
  if (x.dim() == 0) throw Error("glu does not support scalars because halving size must be even");
  int64_t d = wrap_dim(a.integer(1), x.dim());
  if (x.size(d) % 2 != 0)
    throw Error("Halving dimension must be even, but dimension " + std::to_string(d) + " is size " +
                std::to_string(x.size(d)));
  int64_t half = x.size(d) / 2;
  Tensor first = ops::narrow(x, d, int64_t{0}, half);
  Tensor second = ops::narrow(x, d, half, half);
  return float_binary(first, second, nullptr, [](double p, double q) { return p * sigmoid(q); });
});
TN_KERNEL("aten::prelu", {
  const Tensor& x = a.tensor(0);
  const Tensor& w = a.tensor(1);
  Tensor weight = w;
  if (w.numel() != 1) {
    if (x.dim() < 2 || w.numel() != x.size(1))
      throw Error("Mismatch of parameter numbers and input channel size. Found parameter numbers = " +
                  std::to_string(w.numel()) +
                  " and channel size = " + std::to_string(x.dim() >= 2 ? x.size(1) : 1) + ".");
    Shape shape(size_t(x.dim()), 1);
    shape[1] = w.numel();
    weight = ops::reshape(w, shape);
  }
  return float_binary(x, weight, nullptr, [](double v, double k) { return v > 0 ? v : v * k; });
});
TN_KERNEL("aten::rrelu", {
  if (a.boolean(3))
    throw NotImplemented("torchnative does not implement aten::rrelu with training=True yet (random slopes)");
  double slope = (a.scalar(1).to_double() + a.scalar(2).to_double()) / 2;
  // Upstream's leaky_relu kernel multiplies in float for every type narrower than double.
  if (a.tensor(0).dtype() != ScalarType::Double) slope = double(float(slope));
  return activation(a.tensor(0), "leaky_relu_cpu", [=](double v) { return v > 0 ? v : v * slope; });
});

}  // namespace tn
