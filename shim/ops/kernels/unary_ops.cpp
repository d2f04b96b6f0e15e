// Unary math: abs neg sign sgn, rounding (floor ceil trunc round fix frac), exp/log/trig and the other
// *_vml_cpu functions, special functions (lgamma digamma erfinv i0 sinc logit), nan_to_num, square, positive,
// signbit, angle, rad2deg, isnan/isinf/isfinite/isposinf/isneginf, conj and its kin (of real tensors).
#include <cmath>
#include <limits>

#include "common.h"
#include "typed_ops.h"

namespace tn {

namespace {

template <typename F>
Tensor same_type_unary(const Tensor& a, const char* name, F f) {
  ScalarType t = a.dtype();
  return TN_DISPATCH_ALL_TYPES(t, name, [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    return map_unary<scalar_t>(a, t, [&](c x) -> c { return f(x); });
  });
}

Tensor sign(const Tensor& a) {
  return same_type_unary(a, "sign", [](auto x) -> decltype(x) {
    using c = decltype(x);
    if constexpr (std::is_same_v<c, bool>)
      return x;
    else
      return c((c(0) < x) - (x < c(0)));
  });
}

Tensor round_half_even(const Tensor& a, int64_t decimals, bool with_decimals) {
  if (a.dtype() == ScalarType::Half || a.dtype() == ScalarType::Bool)
    dtype_not_implemented(with_decimals ? "round_cpu" : "round_vml_cpu", a.dtype());
  if (with_decimals && !is_floating(a.dtype())) dtype_not_implemented("round_cpu", a.dtype());
  if (!is_floating(a.dtype())) return a.clone();
  return same_type_unary(a, "round", [decimals](auto x) -> decltype(x) {
    using c = decltype(x);
    if constexpr (is_float_v<c>) {
      if (decimals == 0) return std::nearbyint(x);
      c ten_pow = std::pow(c(10), c(std::abs(decimals)));
      return decimals > 0 ? std::nearbyint(x * ten_pow) / ten_pow : std::nearbyint(x / ten_pow) * ten_pow;
    } else {
      return x;
    }
  });
}

// floor, ceil and trunc: identity on integers (a copy), `fn` on floats; upstream's
// *_vml_cpu kernels have no float16 version and refuse it by that name.
template <typename F>
Tensor rounding_unary(const Tensor& x, const char* name, F fn) {
  // Integers are already whole (a copy); bool and float16 have no kernel upstream.
  if (x.dtype() == ScalarType::Half || x.dtype() == ScalarType::Bool)
    dtype_not_implemented((std::string(name) + "_vml_cpu").c_str(), x.dtype());
  if (!is_floating(x.dtype())) return x.clone();
  return same_type_unary(x, name, [&](auto v) -> decltype(v) {
    if constexpr (is_float_v<decltype(v)>)
      return fn(v);
    else
      return v;
  });
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

// The derivative of digamma, psi'(x) = sum over k >= 0 of 1 / (x + k)^2, in upstream's steps
// (its accuracy, about 1e-9, is what the golden cases compare): below 1/2 by the reflection
// psi'(x) = pi^2 / sin^2(pi x) - psi'(1 - x), accumulated negated; six terms of the series;
// then its asymptotic expansion to the B_6 term.
double trigamma(double x) {
  double sign = 1, sum = 0;
  if (x < 0.5) {
    sign = -1;
    double sine = std::sin(kPi * x);
    sum -= kPi * kPi / (sine * sine);
    x = 1 - x;
  }
  for (int k = 0; k < 6; ++k, x += 1) sum += 1 / (x * x);
  double inverse_square = 1 / (x * x);
  sum += (1 + 1 / (2 * x) +
          inverse_square * (1.0 / 6 - inverse_square * (1.0 / 30 - inverse_square * (1.0 / 42)))) /
         x;
  return sign * sum;
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
      return map_unary<scalar_t>(x, x.dtype(), [=](double v) -> double {
        if (std::isnan(v)) return n;
        if (std::isinf(v)) return v > 0 ? hi : lo;
        return v;
      });
    } else {
      return Tensor();
    }
  });
}

}  // namespace

#define TN_VML_UNARY(NAME, OP, EXPR)                                                                       \
  TN_KERNEL("aten::" NAME, {                                                                               \
    return vml_unary(a.tensor(0), NAME "_vml_cpu", VmlOp::OP, [](auto x) -> decltype(x) { return EXPR; }); \
  });
#define TN_FLOAT_UNARY(NAME, HALF_KERNEL, EXPR) \
  TN_KERNEL("aten::" NAME,                      \
            { return float_unary(a.tensor(0), HALF_KERNEL, [](auto x) -> decltype(x) { return EXPR; }); });
TN_VML_UNARY("exp", Exp, std::exp(x))
TN_FLOAT_UNARY("exp2", nullptr, std::exp2(x))

TN_VML_UNARY("expm1", Expm1, std::expm1(x))
TN_VML_UNARY("log", Log, std::log(x))
TN_VML_UNARY("log2", Log2, std::log2(x))
TN_VML_UNARY("log10", Log10, std::log10(x))
TN_VML_UNARY("log1p", Log1p, std::log1p(x))
// sqrt runs over every parameter in Adam's step: its loop cloned for AVX2's vector root. A float32
// root rounded from double is float's own correctly rounded root, so computing it in float changes
// no bit and lets the clone use 8-float vectors.
TN_KERNEL("aten::sqrt", {
  const Tensor& x = a.tensor(0);
  ScalarType t = float_type(x.dtype());
  if (t == ScalarType::Half) dtype_not_implemented("sqrt_vml_cpu", t);
  return TN_DISPATCH_ALL_TYPES(t, "sqrt", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    if constexpr (std::is_same_v<scalar_t, float>)
      return map_unary<float>(x, t, Cloned{[](double v) -> double { return std::sqrt(float(v)); }});
    else if constexpr (std::is_floating_point_v<compute_t<scalar_t>>)
      return map_unary<scalar_t>(x, t, Cloned{[](double v) -> double { return std::sqrt(v); }});
    else
      return Tensor();
  });
});

// Upstream's rsqrt, vectorized and scalar alike, divides 1 by the square root rounded to the
// storage type: float32 in float, not a double quotient rounded once.
TN_KERNEL("aten::rsqrt", {
  const Tensor& x = a.tensor(0);
  if (float_type(x.dtype()) == ScalarType::Float)
    return float_unary(x, nullptr, [](double v) { return double(1.0f / std::sqrt(float(v))); });
  return float_unary(x, "rsqrt_cpu", [](auto v) -> decltype(v) { return decltype(v)(1) / std::sqrt(v); });
});

TN_VML_UNARY("sin", Sin, std::sin(x))
TN_VML_UNARY("cos", Cos, std::cos(x))
TN_VML_UNARY("tan", Tan, std::tan(x))
TN_VML_UNARY("asin", Asin, std::asin(x))
TN_VML_UNARY("acos", Acos, std::acos(x))
TN_VML_UNARY("atan", Atan, std::atan(x))
TN_FLOAT_UNARY("sinh", "sinh_cpu", std::sinh(x))

TN_FLOAT_UNARY("cosh", "cosh_cpu", std::cosh(x))

TN_VML_UNARY("tanh", Tanh, std::tanh(x))
// float32 and float64 as upstream's sigmoid kernel (its two lambdas); other types through the
// expression in double.
TN_KERNEL("aten::sigmoid", {
  const Tensor& x = a.tensor(0);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    return cpu_kernel_vec<T>(
        std::array{x}, [](T v) { return T(1) / (T(1) + std::exp(-v)); },
        [](const T* in, T* out, int64_t n) { vml_sigmoid(in, out, n); });
  };
  if (x.dtype() == ScalarType::Double) return run(0.0);
  if (x.dtype() == ScalarType::Float) return run(0.0f);
  return float_unary(x, "sigmoid_cpu",
                     [](auto v) -> decltype(v) { return decltype(v)(1) / (decltype(v)(1) + std::exp(-v)); });
});
// sigmoid's gradient from its result y as upstream's kernel: dy (1 - y) y.
TN_KERNEL("aten::sigmoid_backward", {
  const Tensor &dy = a.tensor(0), &y = a.tensor(1);
  ScalarType t = result_type(dy, y);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    return cpu_kernel_vec<T>(
        std::array{dy, y}, [](T g, T v) { return g * (T(1) - v) * v; },
        [](const T* g, const T* in, T* out, int64_t n) { vml_sigmoid_backward(g, in, out, n); });
  };
  if (t == ScalarType::Double) return run(0.0);
  if (t == ScalarType::Float) return run(0.0f);
  if (!is_floating(t)) dtype_not_implemented("sigmoid_backward_cpu", t);
  return float_binary(dy, y, nullptr,
                      [](auto g, auto v) -> decltype(g) { return g * (decltype(g)(1) - v) * v; });
});

TN_VML_UNARY("erf", Erf, std::erf(x))
TN_VML_UNARY("erfc", Erfc, std::erfc(x))
TN_FLOAT_UNARY("reciprocal", nullptr, decltype(x)(1) / x)

#undef TN_FLOAT_UNARY
#undef TN_VML_UNARY

// Conjugation of a real tensor is the tensor itself, as upstream answers for every
// non-complex dtype (the shim has no complex dtypes; a view would change `is`).
TN_KERNEL("aten::conj", { return a.tensor(0); });
TN_KERNEL("aten::conj_physical", { return a.tensor(0); });
TN_KERNEL("aten::resolve_conj", { return a.tensor(0); });
TN_KERNEL("aten::resolve_neg", { return a.tensor(0); });
TN_KERNEL("aten::is_conj", { return (void)a.tensor(0), false; });
TN_KERNEL("aten::is_neg", { return (void)a.tensor(0), false; });
TN_KERNEL("aten::abs", {
  if (a.tensor(0).dtype() == ScalarType::Bool) dtype_not_implemented("abs_cpu", ScalarType::Bool);
  return same_type_unary(a.tensor(0), "abs", [](auto x) -> decltype(x) {
    using c = decltype(x);
    if constexpr (std::is_same_v<c, bool> || std::is_unsigned_v<c>)
      return x;
    else if constexpr (is_float_v<c>)
      return std::abs(x);
    else
      return c(x < 0 ? -x : x);
  });
});
TN_KERNEL("aten::neg", {
  if (a.tensor(0).dtype() == ScalarType::Bool)
    throw Error(
        "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, "
        "use the `~` or `logical_not()` operator instead.");
  return same_type_unary(a.tensor(0), "neg", [](auto x) -> decltype(x) { return decltype(x)(-x); });
});
TN_KERNEL("aten::sign", { return sign(a.tensor(0)); });
TN_KERNEL("aten::floor",
          { return rounding_unary(a.tensor(0), "floor", [](auto x) { return std::floor(x); }); });
TN_KERNEL("aten::ceil", { return rounding_unary(a.tensor(0), "ceil", [](auto x) { return std::ceil(x); }); });
TN_KERNEL("aten::trunc",
          { return rounding_unary(a.tensor(0), "trunc", [](auto x) { return std::trunc(x); }); });
TN_KERNEL("aten::round", { return round_half_even(a.tensor(0), 0, false); });
TN_KERNEL("aten::round.decimals", { return round_half_even(a.tensor(0), a.integer(1), true); });
TN_KERNEL("aten::isnan", {
  return float_predicate(
      a.tensor(0), "isnan", [](auto v) { return std::isnan(v); }, false);
});
TN_KERNEL("aten::isinf", {
  return float_predicate(
      a.tensor(0), "isinf", [](auto v) { return std::isinf(v); }, false);
});
TN_KERNEL("aten::isfinite", {
  return float_predicate(
      a.tensor(0), "isfinite", [](auto v) { return std::isfinite(v); }, true);
});
TN_KERNEL("aten::nan_to_num",
          { return nan_to_num(a.tensor(0), a.optional_real(1), a.optional_real(2), a.optional_real(3)); });
TN_KERNEL("aten::square", { return ops::pow(a.tensor(0), Scalar(int64_t{2})); });
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
    return map_unary<scalar_t>(x, x.dtype(), [](c v) -> bool {
      if constexpr (std::is_floating_point_v<c>)
        return std::signbit(v);
      else if constexpr (std::is_signed_v<c>)
        return v < 0;
      else
        return false;
    });
  });
});
TN_KERNEL("aten::sgn", { return ops::sign(a.tensor(0)); });
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
TN_KERNEL("aten::polygamma", {
  int64_t n = a.integer(0);
  if (n < 0) throw Error("polygamma(n, x) does not support negative n.");
  if (n > 1)
    throw NotImplemented("torchnative implements aten::polygamma for n = 0 and 1 only (got " +
                         std::to_string(n) + ")");
  return float_unary(a.tensor(1), "polygamma", n == 0 ? digamma : trigamma);
});
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
TN_KERNEL("aten::fix", { return ops::trunc(a.tensor(0)); });

}  // namespace tn
