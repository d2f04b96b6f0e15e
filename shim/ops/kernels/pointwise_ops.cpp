// Ternary pointwise operators: where, clamp/clip, lerp, addcmul, addcdiv, isclose/allclose.
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "common.h"
#include "core/overlap.h"
#include "layout.h"
#include "typed_ops.h"

namespace tn {

namespace {

Tensor clamp(const Tensor& a, const std::optional<Tensor>& lo, const std::optional<Tensor>& hi) {
  if (!lo && !hi) throw Error("torch.clamp: At least one of 'min' or 'max' must not be None");
  ResultType r;
  r.add(a);
  if (lo) r.add(*lo);
  if (hi) r.add(*hi);
  ScalarType t = r.get();
  if (t == ScalarType::Bool) dtype_not_implemented("clamp_cpu", t);
  if (t == ScalarType::Half)
    dtype_not_implemented(lo && hi ? "clamp_scalar_cpu"
                          : hi     ? "clamp_max_scalar_cpu"
                                   : "clamp_min_scalar_cpu",
                          t);
  Tensor out = a.to(t).clone();
  if (lo) out = ops::maximum(out, *lo);
  if (hi) out = ops::minimum(out, *hi);
  std::vector<Tensor> operands{a};  // Scalar bounds, here wrapped numbers, are not iterated over
  for (const auto& bound : {lo, hi})
    if (bound && !bound->impl()->wrapped_number) operands.push_back(*bound);
  return in_layout_of(out.to(t), operands);
}

// One element of upstream's clamp by numbers (bounds in the storage type, absent ones
// infinite): max(lo, x) then min(hi, that), each keeping x when it is NaN or equal.
template <typename scalar_t>
struct Clamp {
  using c = scalar_t;  // comparisons and results are exact in the storage type
  c low, high;
  Clamp(const std::optional<Scalar>& lo, const std::optional<Scalar>& hi)
      : low(lo ? c(lo->to<scalar_t>()) : -std::numeric_limits<c>::infinity()),
        high(hi ? c(hi->to<scalar_t>()) : std::numeric_limits<c>::infinity()) {}
  c operator()(c x) const {
    c raised = x < low ? low : x;
    return high < raised ? high : raised;
  }
};

bool nan_bound(const std::optional<Scalar>& lo, const std::optional<Scalar>& hi) {
  return (lo && std::isnan(lo->to_double())) || (hi && std::isnan(hi->to_double()));
}

// clamp of a float32/float64 tensor by Python numbers (neither NaN: those fill the result with
// NaN), in one pass: upstream's clamp_scalar_kernel_impl and its _min/_max forms, the bounds
// in self's type. Vector and scalar lambdas agree there (max(lo, x) keeps x when x is NaN or
// equal to lo), so the elements are upstream's whichever computes them.
std::optional<Tensor> clamp_by_numbers(const Tensor& a, const std::optional<Scalar>& lo,
                                       const std::optional<Scalar>& hi) {
  if ((a.dtype() != ScalarType::Float && a.dtype() != ScalarType::Double) || nan_bound(lo, hi))
    return std::nullopt;
  auto run = [&](auto zero) {
    using scalar_t = decltype(zero);
    return map_unary<scalar_t>(a, a.dtype(), Clamp<scalar_t>(lo, hi));
  };
  return a.dtype() == ScalarType::Double ? run(0.0) : run(0.0f);
}

Tensor where(const Tensor& cond, const Tensor& x, const Tensor& y) {
  if (cond.dtype() != ScalarType::Bool && cond.dtype() != ScalarType::Byte)
    throw Error("where expected condition to be a boolean tensor, but got a tensor with dtype " +
                std::string(scalar_type_name(cond.dtype())));
  ScalarType t = result_type(x, y);
  Shape shape = broadcast_shapes(broadcast_shapes(cond.sizes(), x.sizes()), y.sizes());
  Tensor c = cond.to(ScalarType::Bool), xx = x.to(t), yy = y.to(t);
  Tensor out = empty_for_operands(shape, {cond, x, y}, t, t);
  if (out.is_meta()) return out;  // the meta device: the shape and dtype are the result
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
  // upstream: weight < 0.5 (signed: a negative weight too) ? start + weight*diff : end - diff*(1-weight)
  Shape shape = broadcast_shapes(broadcast_shapes(start.sizes(), end.sizes()), w.sizes());
  Tensor s = start.to(t), e = end.to(t);
  // A Scalar weight (a wrapped number here) is not one of upstream's operands.
  std::vector<Tensor> operands{start, end};
  if (!weight.impl()->wrapped_number) operands.push_back(weight);
  Tensor out = empty_for_operands(shape, operands, t, t);
  if (out.is_meta()) return out;  // the meta device: the shape and dtype are the result
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
                      // In the storage type for float and double, as upstream; its kernel is
                      // compiled with FMA contraction.
                      c d = in_storage_type_v<scalar_t> ? c(scalar_t(y - x)) : y - x;
                      c rest = in_storage_type_v<scalar_t> ? c(scalar_t(c(1) - wt)) : c(1) - wt;
                      po[o[0]] = scalar_t(wt < c(0.5) ? multiply_add<scalar_t>(wt, d, x)
                                                      : multiply_add<scalar_t>(c(-d), rest, y));
                    });
  });
  return out;
}

// self + value * t1 * t2 (or t1 / t2), rounded once like upstream's fused kernels.
template <bool Divide>
Tensor addc(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value,
            const Tensor* into = nullptr) {
  ResultType r;
  r.add(self);
  r.add(t1);
  r.add(t2);
  ScalarType t = r.get();
  if (t == ScalarType::Half || t == ScalarType::Bool)
    dtype_not_implemented(Divide ? "addcdiv_cpu_out" : "addcmul_cpu_out", t);
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
    c v = scalar_argument<scalar_t>(value);
    if constexpr (std::is_same_v<scalar_t, bool>) {
      return map_ternary<scalar_t>(
          self, t1, t2, t, [v](c x, c y, c z) -> c { return x || (v && y && z); }, into);
    } else if constexpr (in_storage_type_v<scalar_t>) {
      // Upstream's x + v * y / z (divided) or x + v * y * z, left to right in the storage type,
      // the last multiply and the add fused (multiply_add).
      return map_ternary<scalar_t>(self, t1, t2, t, Cloned{[v](c x, c y, c z) -> c {
                                     scalar_t scaled = scalar_t(v) * scalar_t(y);
                                     if constexpr (Divide)
                                       return scalar_t(x) + scalar_t(scaled / scalar_t(z));
                                     else
                                       return multiply_add<scalar_t>(c(scaled), z, x);
                                   }},
                                   into);
    } else {
      return map_ternary<scalar_t>(
          self, t1, t2, t,
          [v](c x, c y, c z) -> c {
            if constexpr (Divide)
              return x + v * (y / z);
            else
              return std::fma(v * y, z, x);
          },
          into);
    }
  });
}

Tensor isclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  if (a.dtype() != b.dtype())
    throw Error(std::string(upstream_type_name(a.dtype())) + " did not match " +
                upstream_type_name(b.dtype()));
  if (rtol < 0) throw Error("rtol must be greater than or equal to zero, but got " + std::to_string(rtol));
  if (atol < 0) throw Error("atol must be greater than or equal to zero, but got " + std::to_string(atol));
  ScalarType t = a.dtype();
  return TN_DISPATCH_ALL_TYPES(t, "isclose", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    return map_binary<scalar_t>(a, b, t, [=](c x, c y) -> bool {
      if (x == y) return true;
      if constexpr (std::is_floating_point_v<c>) {
        if (std::isnan(x) || std::isnan(y)) return equal_nan && std::isnan(x) && std::isnan(y);
        if (std::isinf(x) || std::isinf(y)) return false;
      }
      double dx = double(x), dy = double(y);
      if constexpr (std::is_same_v<c, bool>)
        return false;
      else
        return std::abs(dx - dy) <= atol + rtol * std::abs(dy);
    });
  });
}

}  // namespace

bool clamp_in_place(const Tensor& self, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi) {
  if ((self.dtype() != ScalarType::Float && self.dtype() != ScalarType::Double) || nan_bound(lo, hi) ||
      !is_non_overlapping_and_dense(self))
    return false;
  auto run = [&](auto zero) {
    using scalar_t = decltype(zero);
    Clamp<scalar_t> clamp(lo, hi);
    scalar_t* x = self.data_as<scalar_t>();
    parallel_for(self.numel(), kGrainSize, [&](int64_t begin, int64_t end) {
      if (vml_available()) return vml_clamp(x + begin, x + begin, end - begin, clamp.low, clamp.high);
      for (int64_t i = begin; i < end; ++i) x[i] = clamp(x[i]);
    });
  };
  self.dtype() == ScalarType::Double ? run(0.0) : run(0.0f);
  return true;
}

TN_KERNEL("aten::clamp", {
  auto lo = a.optional_scalar(1), hi = a.optional_scalar(2);
  if (lo || hi)
    if (auto fast = clamp_by_numbers(a.tensor(0), lo, hi)) return *fast;
  return clamp(a.tensor(0), lo ? std::optional(scalar_tensor(*lo)) : std::nullopt,
               hi ? std::optional(scalar_tensor(*hi)) : std::nullopt);
});
TN_KERNEL("aten::clamp_", {
  const Tensor& self = a.tensor(0);
  auto lo = a.optional_scalar(1), hi = a.optional_scalar(2);
  if ((lo || hi) && clamp_in_place(self, lo, hi)) return self;
  return write_in_place(self, "clamp", ops::clamp(self, lo, hi));
});
TN_KERNEL("aten::clamp_min_", {
  const Tensor& self = a.tensor(0);
  if (clamp_in_place(self, a.scalar(1), std::nullopt)) return self;
  return write_in_place(self, "clamp_min", ops::clamp_min(self, a.scalar(1)));
});
TN_KERNEL("aten::clamp_max_", {
  const Tensor& self = a.tensor(0);
  if (clamp_in_place(self, std::nullopt, a.scalar(1))) return self;
  return write_in_place(self, "clamp_max", ops::clamp_max(self, a.scalar(1)));
});
TN_KERNEL("aten::clamp.Tensor", { return clamp(a.tensor(0), a.optional_tensor(1), a.optional_tensor(2)); });
TN_KERNEL("aten::clamp_min", {
  if (auto fast = clamp_by_numbers(a.tensor(0), a.scalar(1), std::nullopt)) return *fast;
  return clamp(a.tensor(0), scalar_tensor(a.scalar(1)), std::nullopt);
});
TN_KERNEL("aten::clamp_max", {
  if (auto fast = clamp_by_numbers(a.tensor(0), std::nullopt, a.scalar(1))) return *fast;
  return clamp(a.tensor(0), std::nullopt, scalar_tensor(a.scalar(1)));
});
TN_KERNEL("aten::where.self", { return where(a.tensor(0), a.tensor(1), a.tensor(2)); });
TN_KERNEL("aten::where.ScalarSelf", { return where(a.tensor(0), scalar_arg(a, 1), a.tensor(2)); });
TN_KERNEL("aten::where.ScalarOther", { return where(a.tensor(0), a.tensor(1), scalar_arg(a, 2)); });
TN_KERNEL("aten::lerp.Scalar", { return lerp(a.tensor(0), a.tensor(1), scalar_tensor(a.scalar(2))); });
TN_KERNEL("aten::lerp.Tensor", { return lerp(a.tensor(0), a.tensor(1), a.tensor(2)); });
TN_KERNEL("aten::addcmul", { return addc<false>(a.tensor(0), a.tensor(1), a.tensor(2), a.scalar(3)); });
TN_KERNEL("aten::addcdiv", { return addc<true>(a.tensor(0), a.tensor(1), a.tensor(2), a.scalar(3)); });
// Adam's and AdamW's state updates: self written directly where it can be (add_'s comment).
TN_KERNEL("aten::addcmul_", {
  const Tensor& self = a.tensor(0);
  return write_in_place(self, "addcmul", addc<false>(self, a.tensor(1), a.tensor(2), a.scalar(3), &self));
});
TN_KERNEL("aten::addcdiv_", {
  const Tensor& self = a.tensor(0);
  return write_in_place(self, "addcdiv", addc<true>(self, a.tensor(1), a.tensor(2), a.scalar(3), &self));
});
TN_KERNEL("aten::isclose", { return isclose(a.tensor(0), a.tensor(1), a.real(2), a.real(3), a.boolean(4)); });
TN_KERNEL("aten::allclose", {
  return ops::all(isclose(a.tensor(0), a.tensor(1), a.real(2), a.real(3), a.boolean(4))).item().to<bool>();
});
TN_KERNEL("aten::clip", { return ops::clamp(a.tensor(0), a.optional_scalar(1), a.optional_scalar(2)); });
TN_KERNEL("aten::clip.Tensor",
          { return ops::clamp_Tensor(a.tensor(0), a.optional_tensor(1), a.optional_tensor(2)); });

}  // namespace tn
