// More elementwise operators: binary float functions (atan2, hypot, copysign, xlogy,
// logaddexp, nextafter, fmin/fmax), shifts, special functions (lgamma, digamma, erfinv,
// i0, sinc, logit), and the activation functions of torch.nn.functional.
#include <cmath>
#include <limits>

#include "common.h"

namespace tn {

namespace {

// Binary on the float result type of both operands (integers promote to the default dtype).
// float32 operands reach `f` as float, so a generic `f` computes in float as upstream's
// scalar kernels do; one taking double computes in double.
template <typename F>
Tensor float_binary(const Tensor& a, const Tensor& b, const char* half_kernel, F f) {
  ScalarType t = float_type(result_type(a, b));
  if (t == ScalarType::Half && half_kernel) dtype_not_implemented(half_kernel, t);
  return TN_DISPATCH_ALL_TYPES(t, "binary", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    if constexpr (std::is_same_v<scalar_t, float>)
      return map_binary<scalar_t>(a, b, t, t,
                                  [&](double x, double y) -> double { return f(float(x), float(y)); });
    else if constexpr (std::is_floating_point_v<compute_t<scalar_t>>)
      return map_binary<scalar_t>(a, b, t, t, [&](double x, double y) -> double { return f(x, y); });
    else
      return Tensor();
  });
}

// Binary on the (not promoted) result type, floats only.
template <typename F>
Tensor floating_only_binary(const Tensor& a, const Tensor& b, const char* kernel, F f) {
  ScalarType t = result_type(a, b);
  if (!is_floating(t) || t == ScalarType::Half) dtype_not_implemented(kernel, t);
  return float_binary(a, b, nullptr, f);
}

// Digamma as upstream computes it: reflection below 0, recurrence up to 10 (exactly
// 10 uses psi(10)), then the asymptotic series with Cephes' coefficients.
double digamma(double x) {
  constexpr double psi_10 = 2.25175258906672110764;
  if (x == 0) return std::copysign(std::numeric_limits<double>::infinity(), -x);
  if (x < 0) {
    if (x == std::trunc(x)) return std::numeric_limits<double>::quiet_NaN();
    double integral;
    double fraction = std::modf(x, &integral);
    return digamma(1 - x) - kPi / std::tan(kPi * fraction);
  }
  double result = 0;
  while (x < 10) {
    result -= 1 / x;
    x += 1;
  }
  if (x == 10) return result + psi_10;
  constexpr double coefficients[] = {8.33333333333333333333E-2, -2.10927960927960927961E-2,
                                     7.57575757575757575758E-3, -4.16666666666666666667E-3,
                                     3.96825396825396825397E-3, -8.33333333333333333333E-3,
                                     8.33333333333333333333E-2};
  double y = 0;
  if (x < 1.0e17) {
    double z = 1.0 / (x * x);
    double p = coefficients[0];
    for (int i = 1; i < 7; ++i) p = p * z + coefficients[i];
    y = z * p;
  }
  return result + std::log(x) - (0.5 / x) - y;
}

// erfinv as upstream computes it: a rational first guess (central and tail forms),
// then two Newton-Raphson steps on erf.
double erfinv(double y) {
  constexpr double a[4] = {0.886226899, -1.645349621, 0.914624893, -0.140543331};
  constexpr double b[4] = {-2.118377725, 1.442710462, -0.329097515, 0.012229801};
  constexpr double c[4] = {-1.970840454, -1.624906493, 3.429567803, 1.641345311};
  constexpr double d[2] = {3.543889200, 1.637067800};
  double y_abs = std::abs(y);
  if (y_abs > 1.0) return std::numeric_limits<double>::quiet_NaN();
  if (y_abs == 1.0) return std::copysign(std::numeric_limits<double>::infinity(), y);
  double x;
  if (y_abs <= 0.7) {
    double z = y * y;
    double num = ((a[3] * z + a[2]) * z + a[1]) * z + a[0];
    double den = (((b[3] * z + b[2]) * z + b[1]) * z + b[0]) * z + 1.0;
    x = y * num / den;
  } else {
    double z = std::sqrt(-std::log((1.0 - y_abs) / 2.0));
    double num = ((c[3] * z + c[2]) * z + c[1]) * z + c[0];
    double den = (d[1] * z + d[0]) * z + 1.0;
    x = std::copysign(num, y) / den;
  }
  x = x - (std::erf(x) - y) / ((2.0 / std::sqrt(kPi)) * std::exp(-x * x));
  x = x - (std::erf(x) - y) / ((2.0 / std::sqrt(kPi)) * std::exp(-x * x));
  return x;
}

// Modified Bessel function of the first kind, order 0, by its power series.
double i0(double x) {
  double term = 1, sum = 1, q = x * x / 4;
  for (int k = 1; k < 500 && term > sum * 1e-17; ++k) {
    term *= q / (double(k) * double(k));
    sum += term;
  }
  return sum;
}

template <bool Left>
Tensor shift(const Tensor& a, const Tensor& b) {
  ScalarType t = result_type(a, b);
  if (!is_integral(t, false)) dtype_not_implemented(Left ? "lshift_cpu" : "rshift_cpu", t);
  return TN_DISPATCH_ALL_TYPES(t, "shift", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    if constexpr (std::is_integral_v<scalar_t> && !std::is_same_v<scalar_t, bool>) {
      // As upstream's build behaves on x86-64: operands promoted to 32 bits (64 for
      // int64) and the shift count masked to that width (a negative count wraps).
      return map_binary<scalar_t>(a, b, t, t, [](scalar_t x, scalar_t y) -> scalar_t {
        using wide_t = std::conditional_t<sizeof(scalar_t) == 8, int64_t, int32_t>;
        using uwide_t = std::make_unsigned_t<wide_t>;
        int count = int(uint64_t(y) & (sizeof(wide_t) * 8 - 1));
        if constexpr (Left)
          return scalar_t(uwide_t(std::make_unsigned_t<scalar_t>(x)) << count);
        else if constexpr (std::is_signed_v<scalar_t>)
          return scalar_t(wide_t(x) >> count);
        else
          return scalar_t(uwide_t(x) >> count);
      });
    } else {
      return Tensor();
    }
  });
}

Tensor nan_to_num(const Tensor& x, std::optional<double> nan, std::optional<double> posinf,
                  std::optional<double> neginf) {
  if (!is_floating(x.dtype())) return x.clone();
  return TN_DISPATCH_ALL_TYPES(x.dtype(), "nan_to_num", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    if constexpr (std::is_floating_point_v<compute_t<scalar_t>> && !std::is_integral_v<scalar_t>) {
      double largest =
          std::is_same_v<scalar_t, Half> ? 65504.0
          : std::is_same_v<scalar_t, BFloat16>
              ? 3.3895313892515355e38
              : double(std::numeric_limits<
                       std::conditional_t<std::is_same_v<scalar_t, double>, double, float>>::max());
      double hi = posinf.value_or(largest), lo = neginf.value_or(-largest), n = nan.value_or(0.0);
      return map_unary<scalar_t>(x, x.dtype(), x.dtype(), [=](double v) -> double {
        if (std::isnan(v)) return n;
        if (std::isinf(v)) return v > 0 ? hi : lo;
        return v;
      });
    } else {
      return Tensor();
    }
  });
}

// Activations keep the input's floating dtype (integers are refused by name).
template <typename F>
Tensor activation(const Tensor& x, const char* kernel, F f) {
  if (!is_floating(x.dtype())) dtype_not_implemented(kernel, x.dtype());
  return float_unary(x, nullptr, f);
}

// Upstream's scalar logaddexp (log of 1 + exp, not log1p), in the storage type.
template <typename T>
T logaddexp(T x, T y) {
  if (std::isinf(x) && x == y) return x;
  T m = std::max(x, y);
  return m + std::log(T(1) + std::exp(-std::abs(x - y)));
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
// x * log(y), 0 where x is 0 unless y is NaN. Upstream's xlogy kernel is scalar only
// (libm), in the storage type.
template <typename T>
T xlogy(T x, T y) {
  return std::isnan(y) ? y : x == 0 ? T(0) : x * std::log(y);
}
const auto xlogy_fn = [](auto x, auto y) { return xlogy(x, y); };

}  // namespace

// fmax/fmin: NaN-ignoring maximum/minimum in the promoted type (integers included). Between
// equal values (+0 and -0) upstream returns the first operand for float and double, and the
// second for float16 and bfloat16 (their kernels compare the other way round).
template <bool Max>
Tensor fminmax(const Tensor& a, const Tensor& b) {
  ScalarType t = result_type(a, b);
  if (t == ScalarType::Bool) dtype_not_implemented(Max ? "fmax_cpu" : "fmin_cpu", t);
  return TN_DISPATCH_ALL_TYPES(t, "fmax", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    constexpr bool ties_to_second = std::is_same_v<scalar_t, Half> || std::is_same_v<scalar_t, BFloat16>;
    return map_binary<scalar_t>(a, b, t, t, [](c x, c y) -> c {
      if constexpr (std::is_floating_point_v<c>) {
        if (std::isnan(x)) return y;
        if (std::isnan(y)) return x;
        bool second_wins = Max ? y > x : y < x;
        if constexpr (ties_to_second) second_wins = second_wins || x == y;
        return second_wins ? y : x;
      } else {
        return Max ? std::max(x, y) : std::min(x, y);
      }
    });
  });
}

TN_KERNEL("aten::fmax", { return fminmax<true>(a.tensor(0), a.tensor(1)); });
TN_KERNEL("aten::fmin", { return fminmax<false>(a.tensor(0), a.tensor(1)); });
TN_KERNEL("aten::atan2", {
  return float_binary(a.tensor(0), a.tensor(1), "atan2_cpu",
                      [](double x, double y) { return std::atan2(x, y); });
});
TN_KERNEL("aten::hypot", {
  return floating_only_binary(a.tensor(0), a.tensor(1), "hypot_cpu",
                              [](double x, double y) { return std::hypot(x, y); });
});
TN_KERNEL("aten::copysign.Tensor", {
  return float_binary(a.tensor(0), a.tensor(1), nullptr,
                      [](double x, double y) { return std::copysign(x, y); });
});
TN_KERNEL("aten::copysign.Scalar", {
  return float_binary(a.tensor(0), scalar_arg(a, 1), nullptr,
                      [](double x, double y) { return std::copysign(x, y); });
});
TN_KERNEL("aten::logaddexp", {
  const Tensor &x = a.tensor(0), &y = a.tensor(1);
  ScalarType t = result_type(x, y);
  if (t == ScalarType::Double)
    return cpu_kernel_vec<double>(
        std::array{x, y}, logaddexp<double>,
        [](const double* p, const double* q, double* o, int64_t n) { vml_logaddexp(p, q, o, n); });
  if (t == ScalarType::Float)
    return cpu_kernel_vec<float>(
        std::array{x, y}, logaddexp<float>,
        [](const float* p, const float* q, float* o, int64_t n) { vml_logaddexp(p, q, o, n); });
  return floating_only_binary(x, y, "logaddexp_cpu", logaddexp<double>);
});
TN_KERNEL("aten::logaddexp2", {
  return floating_only_binary(a.tensor(0), a.tensor(1), "logaddexp2_cpu", [](double x, double y) {
    if (std::isinf(x) && x == y) return x;
    double m = std::max(x, y);
    return m + std::log1p(std::exp2(-std::abs(x - y))) / std::log(2.0);
  });
});
TN_KERNEL("aten::nextafter", {
  ScalarType t = result_type(a.tensor(0), a.tensor(1));
  if (!is_floating(t)) dtype_not_implemented("nextafter_cpu", t);
  return TN_DISPATCH_ALL_TYPES(t, "nextafter", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, double>) {
      Tensor x = a.tensor(0).to(t), y = a.tensor(1).to(t);
      Shape shape = broadcast_shapes(x.sizes(), y.sizes());
      Tensor out = Tensor::empty(shape, t);
      const scalar_t *px = x.template data_as<scalar_t>(), *py = y.template data_as<scalar_t>();
      scalar_t* po = out.template data_as<scalar_t>();
      // In the storage type: the next representable float32 is not the next double.
      strided_loop<3>(
          shape, {out.strides(), broadcast_strides(x, shape), broadcast_strides(y, shape)},
          [&](const std::array<int64_t, 3>& o) { po[o[0]] = std::nextafter(px[o[1]], py[o[2]]); });
      return out;
    } else {
      dtype_not_implemented("nextafter_cpu", t);
      return Tensor();
    }
  });
});
TN_KERNEL("aten::xlogy.Tensor", { return float_binary(a.tensor(0), a.tensor(1), nullptr, xlogy_fn); });
TN_KERNEL("aten::xlogy.Scalar_Other",
          { return float_binary(a.tensor(0), scalar_arg(a, 1), nullptr, xlogy_fn); });
TN_KERNEL("aten::xlogy.Scalar_Self",
          { return float_binary(scalar_arg(a, 0), a.tensor(1), nullptr, xlogy_fn); });
TN_KERNEL("aten::bitwise_left_shift.Tensor", { return shift<true>(a.tensor(0), a.tensor(1)); });
TN_KERNEL("aten::bitwise_left_shift.Tensor_Scalar", { return shift<true>(a.tensor(0), scalar_arg(a, 1)); });
TN_KERNEL("aten::bitwise_left_shift.Scalar_Tensor", { return shift<true>(scalar_arg(a, 0), a.tensor(1)); });
TN_KERNEL("aten::bitwise_right_shift.Tensor", { return shift<false>(a.tensor(0), a.tensor(1)); });
TN_KERNEL("aten::bitwise_right_shift.Tensor_Scalar", { return shift<false>(a.tensor(0), scalar_arg(a, 1)); });
TN_KERNEL("aten::bitwise_right_shift.Scalar_Tensor", { return shift<false>(scalar_arg(a, 0), a.tensor(1)); });
TN_KERNEL("aten::__lshift__.Tensor", { return shift<true>(a.tensor(0), a.tensor(1)); });
TN_KERNEL("aten::__lshift__.Scalar", { return shift<true>(a.tensor(0), scalar_arg(a, 1)); });
TN_KERNEL("aten::__rshift__.Tensor", { return shift<false>(a.tensor(0), a.tensor(1)); });
TN_KERNEL("aten::__rshift__.Scalar", { return shift<false>(a.tensor(0), scalar_arg(a, 1)); });
TN_KERNEL("aten::nan_to_num",
          { return nan_to_num(a.tensor(0), a.optional_real(1), a.optional_real(2), a.optional_real(3)); });
TN_KERNEL("aten::square", {
  return call_tensor_op("aten::pow", "Tensor_Scalar", {a.tensor(0), Scalar(int64_t{2})});
});
TN_KERNEL("aten::positive", {
  const Tensor& x = a.tensor(0);
  if (x.dtype() == ScalarType::Bool) throw Error("The `+` operator, on a bool tensor is not supported.");
  return x;
});
TN_KERNEL("aten::signbit", {
  const Tensor& x = a.tensor(0);
  return TN_DISPATCH_ALL_TYPES(x.dtype(), "signbit", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    return map_unary<scalar_t>(x, x.dtype(), ScalarType::Bool, [](c v) -> bool {
      if constexpr (std::is_floating_point_v<c>)
        return std::signbit(v);
      else if constexpr (std::is_signed_v<c>)
        return v < 0;
      else
        return false;
    });
  });
});
TN_KERNEL("aten::sgn", { return call_tensor_op("aten::sign", "", {a.tensor(0)}); });
TN_KERNEL("aten::isposinf", {
  return float_predicate(
      a.tensor(0), "isposinf", [](auto v) { return std::isinf(v) && v > 0; }, false);
});
TN_KERNEL("aten::isneginf", {
  return float_predicate(
      a.tensor(0), "isneginf", [](auto v) { return std::isinf(v) && v < 0; }, false);
});
TN_KERNEL("aten::sinc", {
  return float_unary(a.tensor(0), "sinc_cpu",
                     [](double v) { return v == 0 ? 1.0 : std::sin(kPi * v) / (kPi * v); });
});
TN_KERNEL("aten::rad2deg",
          { return float_unary(a.tensor(0), nullptr, [](double v) { return v * (180.0 / kPi); }); });
TN_KERNEL("aten::deg2rad",
          { return float_unary(a.tensor(0), nullptr, [](double v) { return v * (kPi / 180.0); }); });
TN_KERNEL("aten::logit", {
  auto eps = a.optional_real(1);
  return float_unary(a.tensor(0), "logit_cpu", [eps](double v) {
    if (eps) v = std::clamp(v, *eps, 1 - *eps);
    return std::log(v / (1 - v));
  });
});
TN_KERNEL("aten::lgamma", {
  return vml_unary(a.tensor(0), "lgamma_vml_cpu", VmlOp::Lgamma, [](double v) { return std::lgamma(v); });
});
TN_KERNEL("aten::digamma", { return float_unary(a.tensor(0), "digamma", digamma); });
TN_KERNEL("aten::erfinv", { return float_unary(a.tensor(0), "erfinv_vml_cpu", erfinv); });
TN_KERNEL("aten::i0", {
  return float_unary(a.tensor(0), "i0_vml_cpu", [](double v) {
    return std::isinf(v) ? std::numeric_limits<double>::quiet_NaN() : i0(v);
  });
});
TN_KERNEL("aten::atanh",
          { return float_unary(a.tensor(0), "atanh_cpu", [](double v) { return std::atanh(v); }); });
TN_KERNEL("aten::asinh",
          { return float_unary(a.tensor(0), "asinh_cpu", [](double v) { return std::asinh(v); }); });
TN_KERNEL("aten::acosh",
          { return float_unary(a.tensor(0), "acosh_cpu", [](double v) { return std::acosh(v); }); });
TN_KERNEL("aten::angle", {
  return float_unary(a.tensor(0), nullptr, [](double v) { return std::isnan(v) ? v : v < 0 ? kPi : 0.0; });
});
TN_KERNEL("aten::frac", {
  const Tensor& x = a.tensor(0);
  if (!is_floating(x.dtype())) dtype_not_implemented("frac_cpu", x.dtype());
  return float_unary(x, nullptr, [](double v) { return v - std::trunc(v); });
});
TN_KERNEL("aten::relu", {
  const Tensor& x = a.tensor(0);
  if (x.dtype() == ScalarType::Bool) dtype_not_implemented("clamp_min_scalar_cpu", x.dtype());
  return call_tensor_op("aten::clamp_min", "", {x, Scalar(int64_t{0})});
});
TN_KERNEL("aten::relu6", {
  return call_tensor_op("aten::hardtanh", "", {a.tensor(0), Scalar(int64_t{0}), Scalar(int64_t{6})});
});
TN_KERNEL("aten::hardtanh", {
  const Tensor& x = a.tensor(0);
  if (x.dtype() == ScalarType::Bool) dtype_not_implemented("hardtanh_cpu", x.dtype());
  return call_tensor_op("aten::clamp", "", {x, a[1], a[2]});
});
TN_KERNEL("aten::threshold", {
  double th = a.scalar(1).to_double(), value = a.scalar(2).to_double();
  return float_unary(a.tensor(0), "threshold_cpu", [=](double v) { return v <= th ? value : v; })
      .to(a.tensor(0).dtype());
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
  Tensor first = call_tensor_op("aten::narrow", "", {x, d, int64_t{0}, half});
  Tensor second = call_tensor_op("aten::narrow", "", {x, d, half, half});
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
    weight = call_tensor_op("aten::reshape", "", {w, shape});
  }
  return float_binary(x, weight, nullptr, [](double v, double k) { return v > 0 ? v : v * k; });
});
TN_KERNEL("aten::rrelu", {
  if (a.boolean(3))
    throw NotImplemented("torchnative does not implement aten::rrelu with training=True yet (random slopes)");
  double slope = (a.scalar(1).to_double() + a.scalar(2).to_double()) / 2;
  return activation(a.tensor(0), "leaky_relu_cpu", [=](double v) { return v > 0 ? v : v * slope; });
});
TN_KERNEL("aten::heaviside", {
  const Tensor &x = a.tensor(0), &values = a.tensor(1);
  if (x.dtype() != values.dtype())
    throw Error("heaviside is not yet implemented for tensors with different dtypes");
  ScalarType t = x.dtype();
  return TN_DISPATCH_ALL_TYPES(t, "heaviside", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    return map_binary<scalar_t>(x, values, t, t, [](c v, c h) -> c { return v == c(0) ? h : c(v > c(0)); });
  });
});
TN_KERNEL("aten::float_power.Tensor_Tensor", {
  return call_tensor_op("aten::pow", "Tensor_Tensor",
                        {a.tensor(0).to(ScalarType::Double), a.tensor(1).to(ScalarType::Double)});
});
TN_KERNEL("aten::float_power.Tensor_Scalar", {
  return call_tensor_op("aten::pow", "Tensor_Tensor",
                        {a.tensor(0).to(ScalarType::Double), scalar_tensor(Scalar(a.scalar(1).to_double()))});
});
TN_KERNEL("aten::float_power.Scalar", {
  return call_tensor_op("aten::pow", "Tensor_Tensor",
                        {scalar_tensor(Scalar(a.scalar(0).to_double())), a.tensor(1).to(ScalarType::Double)});
});
TN_KERNEL("aten::fix", { return call_tensor_op("aten::trunc", "", {a.tensor(0)}); });
TN_KERNEL("aten::ldexp.Tensor", {
  Tensor scale = call_tensor_op("aten::pow", "Scalar", {Scalar(int64_t{2}), a.tensor(1)});
  return call_tensor_op("aten::mul", "Tensor", {a.tensor(0), scale});
});

}  // namespace tn
