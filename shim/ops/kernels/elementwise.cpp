// Elementwise operators: arithmetic, comparisons, logical and bitwise, unary math,
// where/lerp/addcmul/addcdiv/clamp. In-place and out= forms derive from these in
// the dispatcher.
#include <cmath>
#include <limits>

#include "common.h"

namespace tn {

namespace {

template <typename T>
constexpr bool is_float_v = std::is_floating_point_v<T>;

// ---- binary arithmetic ----

// Upstream's alpha checks for add and sub.
void check_alpha(ScalarType t, const Scalar& alpha) {
  if (alpha.is_bool() && t != ScalarType::Bool)
    throw Error("Boolean alpha only supported for Boolean results.");
  if (is_integral(t, true) && alpha.is_float())
    throw Error("For integral input tensors, argument alpha must not be a floating point number.");
}

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  ScalarType t = result_type(a, b);
  check_alpha(t, alpha);
  return TN_DISPATCH_ALL_TYPES(t, "add", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    c al = alpha.to<c>();
    if constexpr (std::is_same_v<scalar_t, bool>)
      return map_binary<scalar_t>(a, b, t, t, [al](c x, c y) { return x || (al && y); });
    else
      return map_binary<scalar_t>(a, b, t, t, [al](c x, c y) -> c { return x + al * y; });
  });
}

Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  if (a.dtype() == ScalarType::Bool || b.dtype() == ScalarType::Bool)
    throw Error(
        "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
        "`logical_xor()` operator instead.");
  ScalarType t = result_type(a, b);
  check_alpha(t, alpha);
  return TN_DISPATCH_ALL_TYPES(t, "sub", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    c al = alpha.to<c>();
    return map_binary<scalar_t>(a, b, t, t, [al](c x, c y) -> c { return x - al * y; });
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  ScalarType t = result_type(a, b);
  return TN_DISPATCH_ALL_TYPES(t, "mul", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    if constexpr (std::is_same_v<scalar_t, bool>)
      return map_binary<scalar_t>(a, b, t, t, [](c x, c y) { return x && y; });
    else
      return map_binary<scalar_t>(a, b, t, t, [](c x, c y) -> c { return x * y; });
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

Tensor div(const Tensor& a, const Tensor& b, const std::optional<std::string>& mode) {
  ScalarType t = result_type(a, b);
  if (!mode) {
    ScalarType f = float_type(t);
    return TN_DISPATCH_ALL_TYPES(f, "div", [&](auto tag_) {
      using scalar_t = TN_TYPE(tag_);
      using c = compute_t<scalar_t>;
      return map_binary<scalar_t>(a, b, f, f, [](c x, c y) -> c { return x / y; });
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
      return map_binary<int64_t>(a, b, ScalarType::Long, t, [](int64_t x, int64_t y) -> int64_t {
        if (y == 0) throw Error("ZeroDivisionError");
        return x / y;
      });
    } else if constexpr (is_float_v<c>) {
      return map_binary<scalar_t>(
          a, b, t, t, [trunc](c x, c y) -> c { return trunc ? std::trunc(x / y) : floor_div<c>(x, y); });
    } else {
      return map_binary<scalar_t>(a, b, t, t, [trunc](c x, c y) -> c {
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
      return map_binary<scalar_t>(a, b, t, t, [](c x, c y) -> c {
        c mod = std::fmod(x, y);
        if (mod != 0 && ((y < 0) != (mod < 0))) mod += y;
        return mod;
      });
    } else {
      return map_binary<scalar_t>(a, b, t, t, [](c x, c y) -> c {
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
      return map_binary<scalar_t>(a, b, t, t, [](c x, c y) -> c { return std::fmod(x, y); });
    } else {
      return map_binary<scalar_t>(a, b, t, t, [](c x, c y) -> c {
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
  T result = 1;
  while (exp) {
    if (exp & 1) result = T(result * base);
    exp >>= 1;
    base = T(base * base);
  }
  return result;
}

Tensor pow(const Tensor& a, const Tensor& b) {
  ScalarType t = result_type(a, b);
  return TN_DISPATCH_ALL_TYPES(t, "pow", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    if constexpr (std::is_same_v<scalar_t, bool>) {
      return map_binary<int64_t>(a, b, ScalarType::Long, t,
                                 [](int64_t x, int64_t y) { return int_pow(x, y) != 0; });
    } else if constexpr (is_float_v<c>) {
      return map_binary<scalar_t>(a, b, t, t, [](c x, c y) -> c { return std::pow(x, y); });
    } else {
      return map_binary<scalar_t>(a, b, t, t, [](c x, c y) -> c { return int_pow<c>(x, y); });
    }
  });
}

template <typename F>
Tensor compare(const Tensor& a, const Tensor& b, F f) {
  ScalarType t = result_type(a, b);
  return TN_DISPATCH_ALL_TYPES(t, "compare", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    return map_binary<scalar_t>(a, b, t, ScalarType::Bool, [&](c x, c y) -> bool { return f(x, y); });
  });
}

template <typename F>
Tensor logical(const Tensor& a, const Tensor& b, F f) {
  ScalarType t = promote_types(a.dtype(), b.dtype());
  return TN_DISPATCH_ALL_TYPES(t, "logical", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    return map_binary<scalar_t>(a, b, t, ScalarType::Bool,
                                [&](c x, c y) -> bool { return f(x != c(0), y != c(0)); });
  });
}

template <typename F>
Tensor bitwise(const Tensor& a, const Tensor& b, const char* name, F f) {
  ScalarType t = result_type(a, b);
  if (is_floating(t))
    throw Error(std::string("\"") + name + "_cpu\" not implemented for '" +
                (t == ScalarType::Float    ? "Float"
                 : t == ScalarType::Double ? "Double"
                                           : "Half") +
                "'");
  return TN_DISPATCH_ALL_TYPES(t, name, [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    if constexpr (std::is_integral_v<scalar_t>)
      return map_binary<scalar_t>(a, b, t, t,
                                  [&](scalar_t x, scalar_t y) -> scalar_t { return scalar_t(f(x, y)); });
    else
      return Tensor();
  });
}

template <typename F>
Tensor minmax(const Tensor& a, const Tensor& b, F f) {
  ScalarType t = result_type(a, b);
  return TN_DISPATCH_ALL_TYPES(t, "maximum", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    return map_binary<scalar_t>(a, b, t, t, [&](c x, c y) -> c {
      if constexpr (is_float_v<c>)
        if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<c>::quiet_NaN();
      return f(x, y);
    });
  });
}

// ---- unary ----

template <typename F>
Tensor same_type_unary(const Tensor& a, const char* name, F f) {
  ScalarType t = a.dtype();
  return TN_DISPATCH_ALL_TYPES(t, name, [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    return map_unary<scalar_t>(a, t, t, [&](c x) -> c { return f(x); });
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
  if (a.dtype() == ScalarType::Half)
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

Tensor clamp(const Tensor& a, const std::optional<Tensor>& lo, const std::optional<Tensor>& hi) {
  if (!lo && !hi) throw Error("torch.clamp: At least one of 'min' or 'max' must not be None");
  ResultType r;
  r.add(a);
  if (lo) r.add(*lo);
  if (hi) r.add(*hi);
  ScalarType t = r.get();
  if (t == ScalarType::Half)
    dtype_not_implemented(lo && hi ? "clamp_scalar_cpu"
                          : hi     ? "clamp_max_scalar_cpu"
                                   : "clamp_min_scalar_cpu",
                          t);
  Tensor out = a.to(t).clone();
  if (lo) out = minmax(out, *lo, [](auto x, auto y) { return x < y ? y : x; });
  if (hi) out = minmax(out, *hi, [](auto x, auto y) { return x > y ? y : x; });
  return out.to(t);
}

Tensor where(const Tensor& cond, const Tensor& x, const Tensor& y) {
  if (cond.dtype() != ScalarType::Bool && cond.dtype() != ScalarType::Byte)
    throw Error("where expected condition to be a boolean tensor, but got a tensor with dtype " +
                std::string(scalar_type_name(cond.dtype())));
  ScalarType t = result_type(x, y);
  Shape shape = broadcast_shapes(broadcast_shapes(cond.sizes(), x.sizes()), y.sizes());
  Tensor c = cond.to(ScalarType::Bool), xx = x.to(t), yy = y.to(t);
  Tensor out = Tensor::empty(shape, t);
  TN_DISPATCH_ALL_TYPES(t, "where", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    const bool* pc = c.data_as<bool>();
    const scalar_t* px = xx.data_as<scalar_t>();
    const scalar_t* py = yy.data_as<scalar_t>();
    scalar_t* po = out.data_as<scalar_t>();
    strided_loop<4>(shape,
                    {out.strides(), broadcast_strides(c, shape), broadcast_strides(xx, shape),
                     broadcast_strides(yy, shape)},
                    [&](const std::array<int64_t, 4>& o) { po[o[0]] = pc[o[1]] ? px[o[2]] : py[o[3]]; });
  });
  return out;
}

Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight) {
  ScalarType t = start.dtype();
  if (end.dtype() != t)
    throw Error("expected dtype " + std::string(scalar_type_name(t)) + " for `end` but got dtype " +
                scalar_type_name(end.dtype()));
  if (!is_floating(t)) throw Error("lerp_kernel_scalar not implemented for integer types");
  if (t == ScalarType::Half)
    dtype_not_implemented(weight.impl()->wrapped_number ? "lerp_kernel_scalar" : "lerp_kernel_tensor", t);
  Tensor w = weight.to(t);
  // upstream: weight < 0.5 ? start + weight*diff : end - diff*(1-weight)
  Shape shape = broadcast_shapes(broadcast_shapes(start.sizes(), end.sizes()), w.sizes());
  Tensor s = start.to(t), e = end.to(t);
  Tensor out = Tensor::empty(shape, t);
  TN_DISPATCH_ALL_TYPES(t, "lerp", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    const scalar_t* ps = s.data_as<scalar_t>();
    const scalar_t* pe = e.data_as<scalar_t>();
    const scalar_t* pw = w.data_as<scalar_t>();
    scalar_t* po = out.data_as<scalar_t>();
    strided_loop<4>(shape,
                    {out.strides(), broadcast_strides(s, shape), broadcast_strides(e, shape),
                     broadcast_strides(w, shape)},
                    [&](const std::array<int64_t, 4>& o) {
                      c x = c(ps[o[1]]), y = c(pe[o[2]]), wt = c(pw[o[3]]);
                      c d = y - x;
                      // Upstream's kernel is compiled with FMA contraction.
                      po[o[0]] =
                          scalar_t(std::abs(wt) < c(0.5) ? std::fma(wt, d, x) : std::fma(-d, c(1) - wt, y));
                    });
  });
  return out;
}

}  // namespace

// ---- registrations ----

TN_KERNEL("aten::add.Tensor", { return add(a.tensor(0), a.tensor(1), a.scalar(2)); });
TN_KERNEL("aten::add.Scalar", { return add(a.tensor(0), scalar_arg(a, 1), a.scalar(2)); });
TN_KERNEL("aten::sub.Tensor", { return sub(a.tensor(0), a.tensor(1), a.scalar(2)); });
TN_KERNEL("aten::sub.Scalar", { return sub(a.tensor(0), scalar_arg(a, 1), a.scalar(2)); });
TN_KERNEL("aten::rsub.Tensor", { return sub(a.tensor(1), a.tensor(0), a.scalar(2)); });
TN_KERNEL("aten::rsub.Scalar", { return sub(scalar_arg(a, 1), a.tensor(0), a.scalar(2)); });
TN_KERNEL("aten::mul.Tensor", { return mul(a.tensor(0), a.tensor(1)); });
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
TN_KERNEL("aten::pow.Tensor_Scalar", {
  // Only a negative integer *scalar* exponent of an integer tensor is refused upstream.
  if (is_integral(a.tensor(0).dtype(), false) && !a.scalar(1).is_float() && !a.scalar(1).is_bool() &&
      a.scalar(1).to_int() < 0)
    throw Error("Integers to negative integer powers are not allowed.");
  return pow(a.tensor(0), scalar_arg(a, 1));
});
TN_KERNEL("aten::pow.Scalar", { return pow(scalar_arg(a, 0), a.tensor(1)); });
TN_KERNEL("aten::maximum",
          { return minmax(a.tensor(0), a.tensor(1), [](auto x, auto y) { return x < y ? y : x; }); });
TN_KERNEL("aten::minimum",
          { return minmax(a.tensor(0), a.tensor(1), [](auto x, auto y) { return x > y ? y : x; }); });

#define TN_COMPARE(NAME, EXPR)                                                                   \
  TN_KERNEL("aten::" NAME ".Tensor",                                                             \
            { return compare(a.tensor(0), a.tensor(1), [](auto x, auto y) { return EXPR; }); }); \
  TN_KERNEL("aten::" NAME ".Scalar",                                                             \
            { return compare(a.tensor(0), scalar_arg(a, 1), [](auto x, auto y) { return EXPR; }); });
TN_COMPARE("eq", x == y)
TN_COMPARE("ne", x != y)
TN_COMPARE("lt", x < y)
TN_COMPARE("le", x <= y)
TN_COMPARE("gt", x > y)
TN_COMPARE("ge", x >= y)
#undef TN_COMPARE

TN_KERNEL("aten::logical_and",
          { return logical(a.tensor(0), a.tensor(1), [](bool x, bool y) { return x && y; }); });
TN_KERNEL("aten::logical_or",
          { return logical(a.tensor(0), a.tensor(1), [](bool x, bool y) { return x || y; }); });
TN_KERNEL("aten::logical_xor",
          { return logical(a.tensor(0), a.tensor(1), [](bool x, bool y) { return x != y; }); });
TN_KERNEL("aten::logical_not", {
  return TN_DISPATCH_ALL_TYPES(a.tensor(0).dtype(), "logical_not", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    return map_unary<scalar_t>(a.tensor(0), a.tensor(0).dtype(), ScalarType::Bool,
                               [](c x) { return !(x != c(0)); });
  });
});

#define TN_BITWISE(NAME, DUNDER, EXPR)                                                                      \
  TN_KERNEL("aten::" NAME ".Tensor",                                                                        \
            { return bitwise(a.tensor(0), a.tensor(1), NAME, [](auto x, auto y) { return EXPR; }); });      \
  TN_KERNEL("aten::" NAME ".Scalar",                                                                        \
            { return bitwise(a.tensor(0), scalar_arg(a, 1), NAME, [](auto x, auto y) { return EXPR; }); }); \
  TN_KERNEL("aten::" DUNDER ".Tensor",                                                                      \
            { return bitwise(a.tensor(0), a.tensor(1), NAME, [](auto x, auto y) { return EXPR; }); });      \
  TN_KERNEL("aten::" DUNDER ".Scalar",                                                                      \
            { return bitwise(a.tensor(0), scalar_arg(a, 1), NAME, [](auto x, auto y) { return EXPR; }); });
TN_BITWISE("bitwise_and", "__and__", x& y)
TN_BITWISE("bitwise_or", "__or__", x | y)
TN_BITWISE("bitwise_xor", "__xor__", x ^ y)
#undef TN_BITWISE
TN_KERNEL("aten::bitwise_not", {
  const Tensor& x = a.tensor(0);
  if (is_floating(x.dtype())) throw Error("\"bitwise_not_cpu\" not implemented for 'Float'");
  return TN_DISPATCH_ALL_TYPES(x.dtype(), "bitwise_not", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    if constexpr (std::is_same_v<scalar_t, bool>)
      return map_unary<scalar_t>(x, x.dtype(), x.dtype(), [](bool v) { return !v; });
    else if constexpr (std::is_integral_v<scalar_t>)
      return map_unary<scalar_t>(x, x.dtype(), x.dtype(), [](scalar_t v) { return scalar_t(~v); });
    else
      return Tensor();
  });
});

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
TN_FLOAT_UNARY("sqrt", "sqrt_vml_cpu", std::sqrt(x))

TN_FLOAT_UNARY("rsqrt", "rsqrt_cpu", decltype(x)(1) / std::sqrt(x))

TN_VML_UNARY("sin", Sin, std::sin(x))
TN_VML_UNARY("cos", Cos, std::cos(x))
TN_VML_UNARY("tan", Tan, std::tan(x))
TN_VML_UNARY("asin", Asin, std::asin(x))
TN_VML_UNARY("acos", Acos, std::acos(x))
TN_VML_UNARY("atan", Atan, std::atan(x))
TN_FLOAT_UNARY("sinh", "sinh_cpu", std::sinh(x))

TN_FLOAT_UNARY("cosh", "cosh_cpu", std::cosh(x))

TN_VML_UNARY("tanh", Tanh, std::tanh(x))
TN_FLOAT_UNARY("sigmoid", "sigmoid_cpu", decltype(x)(1) / (decltype(x)(1) + std::exp(-x)))

TN_VML_UNARY("erf", Erf, std::erf(x))
TN_VML_UNARY("erfc", Erfc, std::erfc(x))
TN_FLOAT_UNARY("reciprocal", nullptr, decltype(x)(1) / x)

#undef TN_FLOAT_UNARY
#undef TN_VML_UNARY

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
// floor, ceil and trunc: identity on integers (a copy), `fn` on floats; upstream's
// *_vml_cpu kernels have no float16 version and refuse it by that name.
template <typename F>
Tensor rounding_unary(const Tensor& x, const char* name, F fn) {
  if (x.dtype() == ScalarType::Half)
    dtype_not_implemented((std::string(name) + "_vml_cpu").c_str(), ScalarType::Half);
  if (!is_floating(x.dtype())) return x.clone();
  return same_type_unary(x, name, [&](auto v) -> decltype(v) {
    if constexpr (is_float_v<decltype(v)>)
      return fn(v);
    else
      return v;
  });
}

TN_KERNEL("aten::floor",
          { return rounding_unary(a.tensor(0), "floor", [](auto x) { return std::floor(x); }); });
TN_KERNEL("aten::ceil", { return rounding_unary(a.tensor(0), "ceil", [](auto x) { return std::ceil(x); }); });
TN_KERNEL("aten::trunc",
          { return rounding_unary(a.tensor(0), "trunc", [](auto x) { return std::trunc(x); }); });
TN_KERNEL("aten::round", { return round_half_even(a.tensor(0), 0, false); });
TN_KERNEL("aten::round.decimals", { return round_half_even(a.tensor(0), a.integer(1), true); });
TN_KERNEL("aten::clamp", {
  auto lo = a.optional_scalar(1), hi = a.optional_scalar(2);
  return clamp(a.tensor(0), lo ? std::optional(scalar_tensor(*lo)) : std::nullopt,
               hi ? std::optional(scalar_tensor(*hi)) : std::nullopt);
});
TN_KERNEL("aten::clamp.Tensor", { return clamp(a.tensor(0), a.optional_tensor(1), a.optional_tensor(2)); });
TN_KERNEL("aten::clamp_min", { return clamp(a.tensor(0), scalar_tensor(a.scalar(1)), std::nullopt); });
TN_KERNEL("aten::clamp_max", { return clamp(a.tensor(0), std::nullopt, scalar_tensor(a.scalar(1))); });
TN_KERNEL("aten::where.self", { return where(a.tensor(0), a.tensor(1), a.tensor(2)); });
TN_KERNEL("aten::where.ScalarSelf", { return where(a.tensor(0), scalar_arg(a, 1), a.tensor(2)); });
TN_KERNEL("aten::where.ScalarOther", { return where(a.tensor(0), a.tensor(1), scalar_arg(a, 2)); });
TN_KERNEL("aten::lerp.Scalar", { return lerp(a.tensor(0), a.tensor(1), scalar_tensor(a.scalar(2))); });
TN_KERNEL("aten::lerp.Tensor", { return lerp(a.tensor(0), a.tensor(1), a.tensor(2)); });
// self + value * t1 * t2 (or t1 / t2), rounded once like upstream's fused kernels.
template <bool Divide>
Tensor addc(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  ResultType r;
  r.add(self);
  r.add(t1);
  r.add(t2);
  ScalarType t = r.get();
  if (t == ScalarType::Half) dtype_not_implemented(Divide ? "addcdiv_cpu_out" : "addcmul_cpu_out", t);
  if (Divide && is_integral(t1.dtype(), true) && is_integral(t2.dtype(), true))
    throw Error(
        "Integer division with addcdiv is no longer supported, and in a future release addcdiv will perform "
        "a true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as (input "
        "+ value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as (input + value "
        "* tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the latter "
        "implementation: (input + value * tensor1 / tensor2), for all dtypes.");
  return TN_DISPATCH_ALL_TYPES(t, Divide ? "addcdiv" : "addcmul", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    c v = value.to<c>();
    if constexpr (std::is_same_v<scalar_t, bool>) {
      return map_ternary<scalar_t>(self, t1, t2, t, [v](c x, c y, c z) -> c { return x || (v && y && z); });
    } else {
      return map_ternary<scalar_t>(self, t1, t2, t, [v](c x, c y, c z) -> c {
        if constexpr (Divide) return x + v * (y / z);
        // Upstream's kernel is compiled with FMA contraction: (v * y) * z + x fused.
        else
          return std::fma(v * y, z, x);
      });
    }
  });
}

TN_KERNEL("aten::addcmul", { return addc<false>(a.tensor(0), a.tensor(1), a.tensor(2), a.scalar(3)); });
TN_KERNEL("aten::addcdiv", { return addc<true>(a.tensor(0), a.tensor(1), a.tensor(2), a.scalar(3)); });

// ---- copies and fills ----
TN_KERNEL("aten::copy_", {
  const Tensor& self = a.tensor(0);
  self.copy_from(a.tensor(1));
  return self;
});
TN_KERNEL("aten::fill_.Scalar", {
  const Tensor& self = a.tensor(0);
  self.copy_from(scalar_tensor(a.scalar(1)));
  return self;
});
TN_KERNEL("aten::fill_.Tensor", {
  const Tensor& self = a.tensor(0);
  if (a.tensor(1).dim() != 0)
    throw Error("fill_ only supports 0-dimension value tensor but got tensor with " +
                std::to_string(a.tensor(1).dim()) + " dimensions.");
  self.copy_from(a.tensor(1));
  return self;
});
TN_KERNEL("aten::zero_", {
  const Tensor& self = a.tensor(0);
  self.copy_from(scalar_tensor(Scalar(int64_t{0})));
  return self;
});
TN_KERNEL("aten::clone", { return a.tensor(0).clone(); });
TN_KERNEL("aten::_to_copy", {
  const Tensor& self = a.tensor(0);
  auto dtype = a.optional_dtype(1);
  Tensor out = Tensor::empty(self.sizes(), dtype.value_or(self.dtype()));
  out.copy_from(self);
  return out;
});
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

}  // namespace tn
