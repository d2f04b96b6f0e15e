// Comparisons and logical/bitwise operators: eq ne lt le gt ge, logical_*, bitwise_* and shifts, and the
// Python dunders (__and__, __lshift__ ...).
#include <cmath>
#include <limits>

#include "common.h"
#include "typed_ops.h"

namespace tn {

namespace {

template <typename F>
Tensor compare(const Tensor& a, const Tensor& b, F f) {
  ScalarType t = result_type(a, b);
  return TN_DISPATCH_ALL_TYPES(t, "compare", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    return map_binary<scalar_t>(a, b, t, [&](c x, c y) -> bool { return f(x, y); });
  });
}

template <typename F>
Tensor logical(const Tensor& a, const Tensor& b, F f) {
  ScalarType t = promote_types(a.dtype(), b.dtype());
  return TN_DISPATCH_ALL_TYPES(t, "logical", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    return map_binary<scalar_t>(a, b, t, [&](c x, c y) -> bool { return f(x != c(0), y != c(0)); });
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
      return map_binary<scalar_t>(a, b, t,
                                  [&](scalar_t x, scalar_t y) -> scalar_t { return scalar_t(f(x, y)); });
    else
      return Tensor();
  });
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
      return map_binary<scalar_t>(a, b, t, [](scalar_t x, scalar_t y) -> scalar_t {
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

}  // namespace

// One function object per operator, shared by its Tensor and Scalar overloads: each distinct
// lambda would instantiate map_binary's loops for every dtype once more.
#define TN_COMPARE(NAME, EXPR)                                                                   \
  constexpr auto NAME##_fn = [](auto x, auto y) { return EXPR; };                                \
  TN_KERNEL("aten::" #NAME ".Tensor", { return compare(a.tensor(0), a.tensor(1), NAME##_fn); }); \
  TN_KERNEL("aten::" #NAME ".Scalar", { return compare(a.tensor(0), scalar_arg(a, 1), NAME##_fn); });
TN_COMPARE(eq, x == y)
TN_COMPARE(ne, x != y)
TN_COMPARE(lt, x < y)
TN_COMPARE(le, x <= y)
TN_COMPARE(gt, x > y)
TN_COMPARE(ge, x >= y)
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
    return map_unary<scalar_t>(a.tensor(0), a.tensor(0).dtype(), [](c x) { return !(x != c(0)); });
  });
});
#define TN_BITWISE(NAME, DUNDER, EXPR)                                                                       \
  constexpr auto NAME##_fn = [](auto x, auto y) { return EXPR; };                                            \
  TN_KERNEL("aten::" #NAME ".Tensor", { return bitwise(a.tensor(0), a.tensor(1), #NAME, NAME##_fn); });      \
  TN_KERNEL("aten::" #NAME ".Scalar", { return bitwise(a.tensor(0), scalar_arg(a, 1), #NAME, NAME##_fn); }); \
  TN_KERNEL("aten::" DUNDER ".Tensor", { return bitwise(a.tensor(0), a.tensor(1), #NAME, NAME##_fn); });     \
  TN_KERNEL("aten::" DUNDER ".Scalar", { return bitwise(a.tensor(0), scalar_arg(a, 1), #NAME, NAME##_fn); });
TN_BITWISE(bitwise_and, "__and__", x& y)
TN_BITWISE(bitwise_or, "__or__", x | y)
TN_BITWISE(bitwise_xor, "__xor__", x ^ y)
#undef TN_BITWISE
TN_KERNEL("aten::bitwise_not", {
  const Tensor& x = a.tensor(0);
  if (is_floating(x.dtype())) throw Error("\"bitwise_not_cpu\" not implemented for 'Float'");
  return TN_DISPATCH_ALL_TYPES(x.dtype(), "bitwise_not", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    if constexpr (std::is_same_v<scalar_t, bool>)
      return map_unary<scalar_t>(x, x.dtype(), [](bool v) { return !v; });
    else if constexpr (std::is_integral_v<scalar_t>)
      return map_unary<scalar_t>(x, x.dtype(), [](scalar_t v) { return scalar_t(~v); });
    else
      return Tensor();
  });
});
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

}  // namespace tn
