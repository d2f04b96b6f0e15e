// Activation functions: relu relu6 hardtanh threshold leaky_relu elu celu selu silu mish gelu hardsigmoid
// hardswish hardshrink softshrink softplus log_sigmoid glu prelu rrelu.
#include <omp.h>

#include <cmath>
#include <limits>
#include <oneapi/dnnl/dnnl.hpp>

#include "common.h"
#include "core/overlap.h"
#include "settings.h"
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

// float32 and float64 as upstream's silu kernel (x / (1 + exp(-x)) in the storage type);
// bfloat16 and float16 through the double expression.
Tensor silu(const Tensor& x) {
  auto run = [&](auto zero) {
    using T = decltype(zero);
    return cpu_kernel_vec<T>(
        std::array{x}, [](T v) { return v / (T(1) + std::exp(-v)); },
        [](const T* in, T* out, int64_t n) { vml_silu(in, out, n); });
  };
  if (x.dtype() == ScalarType::Double) return run(0.0);
  if (x.dtype() == ScalarType::Float) return run(0.0f);
  return activation(x, "silu_cpu", [](double v) { return v * sigmoid(v); });
}

// silu_ computed into a float32/float64 self whose elements are dense (no temporary, as
// upstream's in-place kernel); any other self as a derived in-place call.
Tensor silu_in_place(const Tensor& self) {
  if ((self.dtype() != ScalarType::Float && self.dtype() != ScalarType::Double) ||
      !is_non_overlapping_and_dense(self))
    return write_in_place(self, "silu", silu(self));
  auto run = [&](auto zero) {
    using T = decltype(zero);
    Tensor out = self;
    cpu_kernel_vec_dense<T, 1>(
        std::array{self}, out, [](T v) { return v / (T(1) + std::exp(-v)); },
        [](const T* in, T* to, int64_t n) { vml_silu(in, to, n); });
  };
  self.dtype() == ScalarType::Double ? run(0.0) : run(0.0f);
  return self;
}

// Upstream's silu_backward kernel: dy s (1 + x (1 - s)) with s = 1 / (1 + exp(-x)), the
// inner 1 + x (1 - s) one FMA in both its lambdas.
Tensor silu_backward(const Tensor& dy, const Tensor& x) {
  ScalarType t = result_type(dy, x);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    return cpu_kernel_vec<T>(
        std::array{dy, x},
        [](T g, T v) {
          T s = T(1) / (T(1) + std::exp(-v));
          return g * s * std::fma(v, T(1) - s, T(1));
        },
        [](const T* g, const T* in, T* out, int64_t n) { vml_silu_backward(g, in, out, n); });
  };
  if (t == ScalarType::Double) return run(0.0);
  if (t == ScalarType::Float) return run(0.0f);
  if (!is_floating(t) || t == ScalarType::Half) dtype_not_implemented("silu_backward_cpu", t);
  return float_binary(dy, x, "silu_backward_cpu", [](double g, double v) {
    double s = sigmoid(v);
    return g * s * (1 + v * (1 - s));
  });
}

// Upstream's hardtanh_backward kernel (float32 and float64 only): the gradient where
// min < x < max, else 0. Its scalar
// lambda (the rows' remainders) tests x <= min || x >= max, which a NaN x passes through;
// its vectorized one masks with min < x && x < max, which a NaN x fails.
Tensor hardtanh_backward(const Tensor& dy, const Tensor& x, const Scalar& min, const Scalar& max) {
  ScalarType t = result_type(dy, x);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    T low = min.to<T>(), high = max.to<T>();
    return cpu_kernel_vec<T>(
        std::array{dy, x}, [=](T g, T v) { return v <= low || v >= high ? T(0) : g; },
        [=](const T* g, const T* in, T* out, int64_t n) { vml_hardtanh_backward(g, in, out, n, low, high); });
  };
  if (t == ScalarType::Double) return run(0.0);
  if (t != ScalarType::Float) dtype_not_implemented("hardshrink_backward_cpu", t);  // upstream's name for it
  return run(0.0f);
}

bool gelu_tanh(const std::optional<std::string>& approximate) {
  std::string name = approximate.value_or("none");
  if (name != "none" && name != "tanh") throw Error("approximate argument must be either none or tanh.");
  return name == "tanh";
}

// Upstream's scalar gelu, in the storage type (libm's erf and tanh); its compiler fused the
// tanh form's x + kappa x^3 into one FMA.
template <typename T>
T gelu_scalar(T x, bool tanh) {
  using C = GeluConstants<T>;
  if (!tanh) return x * T(0.5) * (T(1) + std::erf(x * C::alpha));
  return T(0.5) * x * (T(1) + std::tanh(C::beta * std::fma(C::kappa, x * x * x, x)));
}

// Upstream's scalar gelu gradient dy gelu'(x), in the storage type; in the tanh form its
// compiler fused x + kappa x^3, 1 - t^2 and 1 + 3 kappa x^2 (not the erf form's sum).
template <typename T>
T gelu_backward_scalar(T dy, T x, bool tanh) {
  using C = GeluConstants<T>;
  if (!tanh) {
    T cdf = T(0.5) * (T(1) + std::erf(x * C::alpha));
    T pdf = C::pdf_scale * std::exp(x * x * T(-0.5));
    return dy * (cdf + x * pdf);
  }
  T square = x * x;
  T t = std::tanh(C::beta * std::fma(C::kappa, square * x, x));
  T left_derivative = T(0.5) * (T(1) + t);
  T tanh_derivative = std::fma(-t, t, T(1)),
    inner_derivative = C::beta * std::fma(T(3) * C::kappa, square, T(1));
  return dy * (left_derivative + T(0.5) * x * tanh_derivative * inner_derivative);
}

// Upstream's use_mkldnn for gelu and its gradient: float32 approximate='none' of a contiguous
// input of more than one element is computed by oneDNN's gelu_erf, not GeluKernelImpl.
bool gelu_takes_onednn(const Tensor& x, bool tanh) {
  return !tanh && onednn_usable() && x.dtype() == ScalarType::Float && x.is_contiguous() && x.numel() > 1;
}

// oneDNN's gelu_erf forward (no `dy`) or backward, as ideep's eltwise_forward/backward::compute
// call it (forward_training, alpha = beta = 0), on float32 tensors of x's shape.
Tensor onednn_gelu(const Tensor& x, const std::optional<Tensor>& dy) {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  using dnnl::algorithm, dnnl::memory;
  Shape dense = contiguous_strides(x.sizes());
  memory::desc desc(memory::dims(x.sizes().begin(), x.sizes().end()), memory::data_type::f32,
                    memory::dims(dense.begin(), dense.end()));
  dnnl::eltwise_forward::primitive_desc forward(
      {dnnl::prop_kind::forward_training, algorithm::eltwise_gelu_erf, desc}, engine);
  Tensor out = Tensor::empty(x.sizes(), ScalarType::Float);
  if (out.is_meta()) return out;  // the meta device: the shape and dtype are the result
  Tensor grad = dy ? dy->contiguous() : Tensor();
  memory src(desc, engine, x.data()), result(desc, engine, out.data());
  omp_set_num_threads(intra_op_threads());  // as convolution's oneDNN calls
  dnnl::stream stream(engine);
  if (!dy) {
    dnnl::eltwise_forward(forward).execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, result}});
  } else {
    dnnl::eltwise_backward::primitive_desc backward({algorithm::eltwise_gelu_erf, desc, desc}, engine,
                                                    forward);
    memory diff_dst(desc, engine, grad.data());
    dnnl::eltwise_backward(backward).execute(
        stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, result}});
  }
  stream.wait();
  return out;
}

// gelu as upstream's CPU kernel computes each element: oneDNN where it takes it, else
// GeluKernelImpl's vectorized or scalar lambda (cpu_kernel_vec) for float32 and float64.
Tensor gelu(const Tensor& x, bool tanh) {
  if (gelu_takes_onednn(x, tanh)) return onednn_gelu(x, std::nullopt);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    return cpu_kernel_vec<T>(
        std::array{x}, [=](T v) { return gelu_scalar(v, tanh); },
        [=](const T* in, T* out, int64_t n) { vml_gelu(in, out, n, tanh); });
  };
  if (x.dtype() == ScalarType::Double) return run(0.0);
  if (x.dtype() == ScalarType::Float) return run(0.0f);
  return activation(x, "GeluKernelImpl", [tanh](double v) { return gelu_scalar(v, tanh); });
}

// gelu's gradient as upstream's gelu_backward kernel: oneDNN where its forward takes it, else
// GeluBackwardKernelImpl's lambdas (cpu_kernel_vec over dy and x).
Tensor gelu_backward(const Tensor& dy, const Tensor& x, bool tanh) {
  ScalarType t = result_type(dy, x);
  if (gelu_takes_onednn(x, tanh) && dy.dtype() == ScalarType::Float && dy.sizes() == x.sizes())
    return onednn_gelu(x, dy);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    return cpu_kernel_vec<T>(
        std::array{dy, x}, [=](T g, T v) { return gelu_backward_scalar(g, v, tanh); },
        [=](const T* g, const T* in, T* out, int64_t n) { vml_gelu_backward(g, in, out, n, tanh); });
  };
  if (t == ScalarType::Double) return run(0.0);
  if (t == ScalarType::Float) return run(0.0f);
  if (!is_floating(t)) dtype_not_implemented("GeluBackwardKernelImpl", t);
  return float_binary(dy, x, "GeluBackwardKernelImpl",
                      [tanh](double g, double v) { return gelu_backward_scalar(g, v, tanh); });
}

}  // namespace

TN_KERNEL("aten::relu", {
  const Tensor& x = a.tensor(0);
  if (x.dtype() == ScalarType::Bool) dtype_not_implemented("clamp_min_scalar_cpu", x.dtype());
  return ops::clamp_min(x, Scalar(int64_t{0}));
});
TN_KERNEL("aten::relu_", {
  const Tensor& self = a.tensor(0);
  if (clamp_in_place(self, Scalar(int64_t{0}), std::nullopt)) return self;
  return write_in_place(self, "relu", ops::relu(self));
});
TN_KERNEL("aten::relu6", { return ops::hardtanh(a.tensor(0), Scalar(int64_t{0}), Scalar(int64_t{6})); });
TN_KERNEL("aten::relu6_", {
  const Tensor& self = a.tensor(0);
  if (clamp_in_place(self, Scalar(int64_t{0}), Scalar(int64_t{6}))) return self;
  return write_in_place(self, "relu6", ops::relu6(self));
});
TN_KERNEL("aten::hardtanh_", {
  const Tensor& self = a.tensor(0);
  if (self.dtype() != ScalarType::Bool && clamp_in_place(self, a.scalar(1), a.scalar(2))) return self;
  return write_in_place(self, "hardtanh", ops::hardtanh(self, a.scalar(1), a.scalar(2)));
});
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
    return map_binary<scalar_t>(grad, self, t, [=](c g, c x) { return x <= threshold ? c(0) : g; });
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
TN_KERNEL("aten::silu", { return silu(a.tensor(0)); });
TN_KERNEL("aten::silu_", { return silu_in_place(a.tensor(0)); });
TN_KERNEL("aten::silu_backward", { return silu_backward(a.tensor(0), a.tensor(1)); });
TN_KERNEL("aten::hardtanh_backward",
          { return hardtanh_backward(a.tensor(0), a.tensor(1), a.scalar(2), a.scalar(3)); });
TN_KERNEL("aten::mish", {
  if (a.tensor(0).dtype() == ScalarType::BFloat16) dtype_not_implemented("mish_cpu", ScalarType::BFloat16);
  return activation(a.tensor(0), "mish_cpu", [](double v) { return v * std::tanh(std::log1p(std::exp(v))); });
});
TN_KERNEL("aten::gelu", { return gelu(a.tensor(0), gelu_tanh(a.optional_string(1))); });
TN_KERNEL("aten::gelu_backward",
          { return gelu_backward(a.tensor(0), a.tensor(1), gelu_tanh(a.optional_string(2))); });
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
