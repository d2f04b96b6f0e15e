// Binary arithmetic and math: add, sub, mul, div and their aliases, remainder, fmod, pow, float_power, atan2,
// hypot, copysign, logaddexp, nextafter, xlogy, heaviside, ldexp, maximum/minimum, fmax/fmin.
#include <cmath>
#include <limits>

#include "common.h"
#include "layout.h"
#include "typed_ops.h"

namespace tn {

namespace {

// Upstream's alpha checks for add and sub.
void check_alpha(ScalarType t, const Scalar& alpha) {
  if (alpha.is_bool() && t != ScalarType::Bool)
    throw Error("Boolean alpha only supported for Boolean results.");
  if (is_integral(t, true) && alpha.is_float())
    throw Error("For integral input tensors, argument alpha must not be a floating point number.");
}

// `into`: an in-place call's self (add_), written directly where map_binary can.
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha, const Tensor* into = nullptr) {
  ScalarType t = result_type(a, b);
  check_alpha(t, alpha);
  return TN_DISPATCH_ALL_TYPES(t, "add", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    c al = scalar_argument<scalar_t>(alpha);
    if constexpr (std::is_same_v<scalar_t, bool>)
      return map_binary<scalar_t>(
          a, b, t, [al](c x, c y) { return x || (al && y); }, into);
    // Upstream's fused y * 1 + x rounds once, as x + y does: the plain sum's loop vectorizes
    // (gradient accumulation, residual connections) where a libm fma call per element would not.
    else if (al == c(1))
      return map_binary<scalar_t>(a, b, t, Cloned{[](c x, c y) -> c { return x + y; }}, into);
    else
      return map_binary<scalar_t>(
          a, b, t, Cloned{[al](c x, c y) -> c { return multiply_add<scalar_t>(al, y, x); }}, into);
  });
}

Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha, const Tensor* into = nullptr) {
  if (a.dtype() == ScalarType::Bool || b.dtype() == ScalarType::Bool)
    throw Error(
        "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
        "`logical_xor()` operator instead.");
  ScalarType t = result_type(a, b);
  check_alpha(t, alpha);
  return TN_DISPATCH_ALL_TYPES(t, "sub", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    c al = scalar_argument<scalar_t>(alpha);
    // Upstream subtracts by adding -alpha * y (for alpha 1 the same bits as x - y, as in add).
    if (al == c(1)) return map_binary<scalar_t>(a, b, t, Cloned{[](c x, c y) -> c { return x - y; }}, into);
    return map_binary<scalar_t>(
        a, b, t, Cloned{[al](c x, c y) -> c { return multiply_add<scalar_t>(c(-al), y, x); }}, into);
  });
}

Tensor mul(const Tensor& a, const Tensor& b, const Tensor* into = nullptr) {
  ScalarType t = result_type(a, b);
  return TN_DISPATCH_ALL_TYPES(t, "mul", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    if constexpr (std::is_same_v<scalar_t, bool>)
      return map_binary<scalar_t>(
          a, b, t, [](c x, c y) { return x && y; }, into);
    else
      return map_binary<scalar_t>(a, b, t, Cloned{[](c x, c y) -> c { return x * y; }}, into);
  });
}

template <typename T>
T floor_div(T x, T y) {
  if constexpr (is_float_v<T>) {
    // Python's floor division on floats, as upstream computes it.
    if (y == 0) return x / y;
    T mod = std::fmod(x, y);
    T div = (x - mod) / y;
    if (mod != 0 && ((y < 0) != (mod < 0))) div -= T(1);
    T floordiv;
    if (div != 0) {
      floordiv = std::floor(div);
      if (div - floordiv > T(0.5)) floordiv += T(1);
    } else {
      floordiv = std::copysign(T(0), x / y);
    }
    return floordiv;
  } else {
    if (y == 0) throw Error("ZeroDivisionError");
    T q = x / y;
    if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
    return q;
  }
}

Tensor div(const Tensor& a, const Tensor& b, const std::optional<std::string>& mode,
           const Tensor* into = nullptr) {
  ScalarType t = result_type(a, b);
  if (!mode) {
    ScalarType f = float_type(t);
    return TN_DISPATCH_ALL_TYPES(f, "div", [&](auto tag_) {
      using scalar_t = TN_TYPE(tag_);
      using c = compute_t<scalar_t>;
      return map_binary<scalar_t>(a, b, f, Cloned{[](c x, c y) -> c { return x / y; }}, into);
    });
  }
  if (*mode != "trunc" && *mode != "floor")
    throw Error("div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '" + *mode +
                "'");
  bool trunc = *mode == "trunc";
  if (t == ScalarType::Bool) dtype_not_implemented(trunc ? "div_trunc_cpu" : "div_floor_cpu", t);
  return TN_DISPATCH_ALL_TYPES(t, "div", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    if constexpr (std::is_same_v<scalar_t, bool>) {
      return Tensor();  // refused above
    } else if constexpr (is_float_v<c>) {
      return map_binary<scalar_t>(
          a, b, t, [trunc](c x, c y) -> c { return trunc ? std::trunc(x / y) : floor_div<c>(x, y); });
    } else {
      return map_binary<scalar_t>(a, b, t, [trunc](c x, c y) -> c {
        if (y == 0) throw Error("ZeroDivisionError");
        return trunc ? c(x / y) : floor_div<c>(x, y);
      });
    }
  });
}

Tensor remainder(const Tensor& a, const Tensor& b) {
  ScalarType t = result_type(a, b);
  return TN_DISPATCH_ALL_TYPES(t, "remainder", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    if constexpr (std::is_same_v<scalar_t, bool>) {
      throw Error("\"remainder_cpu\" not implemented for 'Bool'");
      return Tensor();
    } else if constexpr (is_float_v<c>) {
      return map_binary<scalar_t>(a, b, t, [](c x, c y) -> c {
        c mod = std::fmod(x, y);
        if (mod != 0 && ((y < 0) != (mod < 0))) mod += y;
        return mod;
      });
    } else {
      return map_binary<scalar_t>(a, b, t, [](c x, c y) -> c {
        if (y == 0) throw Error("ZeroDivisionError");
        c mod = x % y;
        if (mod != 0 && ((y < 0) != (mod < 0))) mod += y;
        return mod;
      });
    }
  });
}

Tensor fmod(const Tensor& a, const Tensor& b) {
  ScalarType t = result_type(a, b);
  return TN_DISPATCH_ALL_TYPES(t, "fmod", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    if constexpr (std::is_same_v<scalar_t, bool>) {
      throw Error("\"fmod_cpu\" not implemented for 'Bool'");
      return Tensor();
    } else if constexpr (is_float_v<c>) {
      return map_binary<scalar_t>(a, b, t, [](c x, c y) -> c { return std::fmod(x, y); });
    } else {
      return map_binary<scalar_t>(a, b, t, [](c x, c y) -> c {
        if (y == 0) throw Error("ZeroDivisionError");
        return x % y;
      });
    }
  });
}

template <typename T>
T int_pow(T base, T exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exp % 2 == 0) ? 1 : -1;
    return 0;
  }
  // Products wrap, as upstream's do in practice: in the unsigned form of the promoted type, where
  // wrapping is defined (a signed overflow is undefined behaviour; short operands promote to int).
  using U = std::make_unsigned_t<decltype(T() * T())>;
  auto times = [](T x, T y) { return T(U(x) * U(y)); };
  T result = 1;
  while (exp) {
    if (exp & 1) result = times(result, base);
    exp >>= 1;
    base = times(base, base);
  }
  return result;
}

Tensor pow(const Tensor& a, const Tensor& b) {
  ScalarType t = result_type(a, b);
  // bool ** bool has no kernel upstream; bool ** 2 promotes to int64 before it gets here.
  if (t == ScalarType::Bool) dtype_not_implemented("pow", t);
  return TN_DISPATCH_ALL_TYPES(t, "pow", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    if constexpr (std::is_same_v<scalar_t, bool>) {
      return Tensor();  // refused above
    } else if constexpr (is_float_v<c>) {
      return map_binary<scalar_t>(a, b, t, [](c x, c y) -> c { return std::pow(x, y); });
    } else {
      return map_binary<scalar_t>(a, b, t, [](c x, c y) -> c { return int_pow<c>(x, y); });
    }
  });
}

template <typename F>
Tensor minmax(const Tensor& a, const Tensor& b, F f) {
  ScalarType t = result_type(a, b);
  return TN_DISPATCH_ALL_TYPES(t, "maximum", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    return map_binary<scalar_t>(a, b, t, [&](c x, c y) -> c {
      if constexpr (is_float_v<c>)
        if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<c>::quiet_NaN();
      return f(x, y);
    });
  });
}

// Binary on the (not promoted) result type, floats only.
template <typename F>
Tensor floating_only_binary(const Tensor& a, const Tensor& b, const char* kernel, F f) {
  ScalarType t = result_type(a, b);
  if (!is_floating(t) || t == ScalarType::Half) dtype_not_implemented(kernel, t);
  return float_binary(a, b, nullptr, f);
}

// Upstream's scalar logaddexp (log of 1 + exp, not log1p), in the storage type.
template <typename T>
T logaddexp(T x, T y) {
  if (std::isinf(x) && x == y) return x;
  T m = std::max(x, y);
  return m + std::log(T(1) + std::exp(-std::abs(x - y)));
}

// x * log(y), 0 where x is 0 unless y is NaN. Upstream's xlogy kernel is scalar only
// (libm), in the storage type.
template <typename T>
T xlogy(T x, T y) {
  return std::isnan(y) ? y : x == 0 ? T(0) : x * std::log(y);
}

const auto xlogy_fn = [](auto x, auto y) { return xlogy(x, y); };

// fmax/fmin: NaN-ignoring maximum/minimum in the promoted type (integers included). Between
// equal values (+0 and -0) upstream returns the first operand for float and double, and the
// second for float16 and bfloat16 (their kernels compare the other way round).
template <bool Max>
Tensor fminmax(const Tensor& a, const Tensor& b) {
  ScalarType t = result_type(a, b);
  return TN_DISPATCH_ALL_TYPES(t, "fmax", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    constexpr bool ties_to_second = std::is_same_v<scalar_t, Half> || std::is_same_v<scalar_t, BFloat16>;
    return map_binary<scalar_t>(a, b, t, [](c x, c y) -> c {
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

}  // namespace

TN_KERNEL("aten::add.Tensor", { return add(a.tensor(0), a.tensor(1), a.scalar(2)); });
TN_KERNEL("aten::add.Scalar", { return add(a.tensor(0), scalar_arg(a, 1), a.scalar(2)); });
TN_KERNEL("aten::sub.Tensor", { return sub(a.tensor(0), a.tensor(1), a.scalar(2)); });
TN_KERNEL("aten::sub.Scalar", { return sub(a.tensor(0), scalar_arg(a, 1), a.scalar(2)); });
TN_KERNEL("aten::rsub.Tensor", { return sub(a.tensor(1), a.tensor(0), a.scalar(2)); });
TN_KERNEL("aten::rsub.Scalar", { return sub(scalar_arg(a, 1), a.tensor(0), a.scalar(2)); });
TN_KERNEL("aten::mul.Tensor", { return mul(a.tensor(0), a.tensor(1)); });
// The in-place forms optimizers and models call on every step write self directly when they can
// (an other of self's layout, or one element), as upstream's do: no temporary, one pass.
TN_KERNEL("aten::add_.Tensor", {
  return write_in_place(a.tensor(0), "add", add(a.tensor(0), a.tensor(1), a.scalar(2), &a.tensor(0)));
});
TN_KERNEL("aten::add_.Scalar", {
  return write_in_place(a.tensor(0), "add", add(a.tensor(0), scalar_arg(a, 1), a.scalar(2), &a.tensor(0)));
});
TN_KERNEL("aten::sub_.Tensor", {
  return write_in_place(a.tensor(0), "sub", sub(a.tensor(0), a.tensor(1), a.scalar(2), &a.tensor(0)));
});
TN_KERNEL("aten::sub_.Scalar", {
  return write_in_place(a.tensor(0), "sub", sub(a.tensor(0), scalar_arg(a, 1), a.scalar(2), &a.tensor(0)));
});
TN_KERNEL("aten::mul_.Tensor",
          { return write_in_place(a.tensor(0), "mul", mul(a.tensor(0), a.tensor(1), &a.tensor(0))); });
TN_KERNEL("aten::mul_.Scalar",
          { return write_in_place(a.tensor(0), "mul", mul(a.tensor(0), scalar_arg(a, 1), &a.tensor(0))); });
TN_KERNEL("aten::div_.Tensor", {
  return write_in_place(a.tensor(0), "div", div(a.tensor(0), a.tensor(1), std::nullopt, &a.tensor(0)));
});
TN_KERNEL("aten::div_.Scalar", {
  return write_in_place(a.tensor(0), "div", div(a.tensor(0), scalar_arg(a, 1), std::nullopt, &a.tensor(0)));
});
TN_KERNEL("aten::mul.Scalar", { return mul(a.tensor(0), scalar_arg(a, 1)); });
TN_KERNEL("aten::div.Tensor", { return div(a.tensor(0), a.tensor(1), std::nullopt); });
TN_KERNEL("aten::div.Scalar", { return div(a.tensor(0), scalar_arg(a, 1), std::nullopt); });
TN_KERNEL("aten::div.Tensor_mode", { return div(a.tensor(0), a.tensor(1), a.optional_string(2)); });
TN_KERNEL("aten::div.Scalar_mode", { return div(a.tensor(0), scalar_arg(a, 1), a.optional_string(2)); });
TN_KERNEL("aten::true_divide.Tensor", { return div(a.tensor(0), a.tensor(1), std::nullopt); });
TN_KERNEL("aten::divide.Tensor", { return div(a.tensor(0), a.tensor(1), std::nullopt); });
TN_KERNEL("aten::multiply.Tensor", { return mul(a.tensor(0), a.tensor(1)); });
TN_KERNEL("aten::subtract.Tensor", { return sub(a.tensor(0), a.tensor(1), a.scalar(2)); });
TN_KERNEL("aten::floor_divide", { return div(a.tensor(0), a.tensor(1), std::string("floor")); });
TN_KERNEL("aten::floor_divide.Scalar", { return div(a.tensor(0), scalar_arg(a, 1), std::string("floor")); });
TN_KERNEL("aten::remainder.Tensor", { return remainder(a.tensor(0), a.tensor(1)); });
TN_KERNEL("aten::remainder.Scalar", { return remainder(a.tensor(0), scalar_arg(a, 1)); });
TN_KERNEL("aten::remainder.Scalar_Tensor", { return remainder(scalar_arg(a, 0), a.tensor(1)); });
TN_KERNEL("aten::fmod.Tensor", { return fmod(a.tensor(0), a.tensor(1)); });
TN_KERNEL("aten::fmod.Scalar", { return fmod(a.tensor(0), scalar_arg(a, 1)); });
TN_KERNEL("aten::pow.Tensor_Tensor", { return pow(a.tensor(0), a.tensor(1)); });
namespace {
// Upstream computes x^3 and x^-2 of float and double as products and x^-0.5 as 1 / sqrt(x), each
// step rounded to the dtype, where std::pow would round once.
std::optional<Tensor> pow_in_steps(const Tensor& x, const Scalar& exponent) {
  if (x.dtype() != ScalarType::Float && x.dtype() != ScalarType::Double) return std::nullopt;
  double e = exponent.to_double();
  if (e != 3 && e != -2 && e != -0.5) return std::nullopt;
  return TN_DISPATCH_ALL_TYPES(x.dtype(), "pow", [&](auto tag_) -> std::optional<Tensor> {
    using scalar_t = TN_TYPE(tag_);
    if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, double>) {
      return map_unary<scalar_t>(x, x.dtype(), [e](compute_t<scalar_t> wide) {
        scalar_t v = scalar_t(wide);
        if (e == 3) return compute_t<scalar_t>(scalar_t(v * v) * v);
        if (e == -2) return compute_t<scalar_t>(scalar_t(1) / scalar_t(v * v));
        return compute_t<scalar_t>(scalar_t(1) / std::sqrt(v));
      });
    } else {
      return std::nullopt;
    }
  });
}
}  // namespace

TN_KERNEL("aten::pow.Tensor_Scalar", {
  // Only a negative integer *scalar* exponent of an integer tensor is refused upstream.
  if (is_integral(a.tensor(0).dtype(), false) && !a.scalar(1).is_float() && !a.scalar(1).is_bool() &&
      a.scalar(1).to_int() < 0)
    throw Error("Integers to negative integer powers are not allowed.");
  if (auto stepped = pow_in_steps(a.tensor(0), a.scalar(1))) return *stepped;
  return in_layout_of(pow(a.tensor(0), scalar_arg(a, 1)), {a.tensor(0)});
});
TN_KERNEL("aten::pow.Scalar", { return pow(scalar_arg(a, 0), a.tensor(1)); });
TN_KERNEL("aten::maximum",
          { return minmax(a.tensor(0), a.tensor(1), [](auto x, auto y) { return x < y ? y : x; }); });
TN_KERNEL("aten::minimum",
          { return minmax(a.tensor(0), a.tensor(1), [](auto x, auto y) { return x > y ? y : x; }); });
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
// The neighbour of `from` towards `to` one step of the 16-bit pattern away: bfloat16's bits
// order its magnitudes, as a float's do.
BFloat16 nextafter_bfloat16(BFloat16 from, BFloat16 to) {
  constexpr uint16_t sign = 0x8000;
  if (std::isnan(float(from)) || std::isnan(float(to))) return BFloat16(float(from) + float(to));
  if (from.bits == to.bits) return from;
  uint16_t magnitude_from = from.bits & ~sign, magnitude_to = to.bits & ~sign;
  BFloat16 next = from;
  if (magnitude_from == 0) {
    if (magnitude_to == 0) return to;  // -0 towards +0: to's sign
    next.bits = (to.bits & sign) | 1;  // the smallest subnormal, on to's side
  } else if (magnitude_from > magnitude_to || ((from.bits ^ to.bits) & sign)) {
    --next.bits;  // towards zero
  } else {
    ++next.bits;
  }
  return next;
}

TN_KERNEL("aten::nextafter", {
  ScalarType t = result_type(a.tensor(0), a.tensor(1));
  if (!is_floating(t) || t == ScalarType::Half) dtype_not_implemented("nextafter_cpu", t);
  return TN_DISPATCH_ALL_TYPES(t, "nextafter", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    if constexpr (std::is_same_v<scalar_t, BFloat16>) {
      return map_binary<scalar_t>(a.tensor(0), a.tensor(1), t, [](double x, double y) -> double {
        return float(nextafter_bfloat16(BFloat16(float(x)), BFloat16(float(y))));
      });
    } else if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, double>) {
      Tensor x = a.tensor(0).to(t), y = a.tensor(1).to(t);
      Shape shape = broadcast_shapes(x.sizes(), y.sizes());
      Tensor out = empty_for_operands(shape, {a.tensor(0), a.tensor(1)}, t, t);
      if (out.is_meta()) return out;  // the meta device: the shape and dtype are the result
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
TN_KERNEL("aten::heaviside", {
  const Tensor &x = a.tensor(0), &values = a.tensor(1);
  if (x.dtype() != values.dtype())
    throw Error("heaviside is not yet implemented for tensors with different dtypes");
  ScalarType t = x.dtype();
  return TN_DISPATCH_ALL_TYPES(t, "heaviside", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    return map_binary<scalar_t>(x, values, t, [](c v, c h) -> c { return v == c(0) ? h : c(v > c(0)); });
  });
});
TN_KERNEL("aten::float_power.Tensor_Tensor",
          { return ops::pow(a.tensor(0).to(ScalarType::Double), a.tensor(1).to(ScalarType::Double)); });
TN_KERNEL("aten::float_power.Tensor_Scalar", {
  return ops::pow(a.tensor(0).to(ScalarType::Double), scalar_tensor(Scalar(a.scalar(1).to_double())));
});
TN_KERNEL("aten::float_power.Scalar", {
  return ops::pow(scalar_tensor(Scalar(a.scalar(0).to_double())), a.tensor(1).to(ScalarType::Double));
});
TN_KERNEL("aten::ldexp.Tensor", {
  // As upstream: self * 2.0 ** other, so integers give floats.
  Tensor scale = ops::pow(Scalar(2.0), a.tensor(1));
  return ops::mul(a.tensor(0), scale);
});

}  // namespace tn
