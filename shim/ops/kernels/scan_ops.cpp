// Cumulative operators: cumsum, cumprod, logcumsumexp, cummax, cummin.
#include <algorithm>
#include <limits>
#include <numeric>

#include "common.h"
#include "typed_ops.h"

namespace tn {

namespace {

template <typename Step>
Tensor scan(const Tensor& self, int64_t dim, ScalarType t, const char* name, Step step) {
  Rows rows = rows_along(self.to(t), dim);
  Tensor out = Tensor::empty(rows.data.sizes(), t);
  if (!out.is_meta())  // the meta device: the shapes are the results
    TN_DISPATCH_ALL_TYPES(t, name, [&](auto tag_) {
      using scalar_t = TN_TYPE(tag_);
      using acc_t = std::conditional_t<std::is_integral_v<scalar_t> && !std::is_same_v<scalar_t, bool>,
                                       int64_t, double>;
      for (int64_t r = 0; r < rows.count; ++r) {
        const scalar_t* in = rows.data.template data_as<scalar_t>() + r * rows.length;
        scalar_t* o = out.template data_as<scalar_t>() + r * rows.length;
        acc_t acc{};
        for (int64_t j = 0; j < rows.length; ++j) {
          acc = j == 0 ? acc_t(compute_t<scalar_t>(in[0]))
                       : acc_t(step(acc, acc_t(compute_t<scalar_t>(in[j]))));
          // Like upstream, floats accumulate in double and are rounded only when stored.
          o[j] = scalar_t(acc);
        }
      }
    });
  return from_rows(out, rows, rows.length, true);
}

template <bool IsMax>
std::pair<Tensor, Tensor> cumulative_extreme(const Tensor& self, int64_t dim) {
  Rows rows = rows_along(self, dim);
  Tensor values = Tensor::empty(rows.data.sizes(), self.dtype());
  Tensor indices = Tensor::empty(rows.data.sizes(), ScalarType::Long);
  if (self.dtype() == ScalarType::Half)
    dtype_not_implemented(IsMax ? "cummax_cpu" : "cummin_cpu", self.dtype());
  if (!values.is_meta())  // the meta device: the shapes are the results
    TN_DISPATCH_ALL_TYPES(self.dtype(), IsMax ? "cummax" : "cummin", [&](auto tag_) {
      using scalar_t = TN_TYPE(tag_);
      for (int64_t r = 0; r < rows.count; ++r) {
        const scalar_t* in = rows.data.template data_as<scalar_t>() + r * rows.length;
        scalar_t* v = values.template data_as<scalar_t>() + r * rows.length;
        int64_t* ix = indices.template data_as<int64_t>() + r * rows.length;
        int64_t best = 0;
        for (int64_t j = 0; j < rows.length; ++j) {
          double x = double(compute_t<scalar_t>(in[j])), b = double(compute_t<scalar_t>(in[best]));
          // Upstream moves to a later equal element (>=), and to every NaN it meets.
          if (std::isnan(x) || (!std::isnan(b) && (IsMax ? x >= b : x <= b))) best = j;
          v[j] = in[best];
          ix[j] = best;
        }
      }
    });
  return {from_rows(values, rows, rows.length, true), from_rows(indices, rows, rows.length, true)};
}

}  // namespace

TN_KERNEL("aten::cumsum", {
  ScalarType t = integral_to_long(a.tensor(0).dtype(), a.optional_dtype(2));
  if (t == ScalarType::Half) dtype_not_implemented("cumsum_out_cpu", t);
  return scan(a.tensor(0), a.integer(1), t, "cumsum", [](auto acc, auto x) { return acc + x; });
});
TN_KERNEL("aten::cumprod", {
  ScalarType t = integral_to_long(a.tensor(0).dtype(), a.optional_dtype(2));
  if (t == ScalarType::Half) dtype_not_implemented("cumprod_out_cpu", t);
  return scan(a.tensor(0), a.integer(1), t, "cumprod", [](auto acc, auto x) { return acc * x; });
});
TN_KERNEL("aten::logcumsumexp", {
  ScalarType t = a.tensor(0).dtype();
  if (!is_floating(t) || t == ScalarType::Half) dtype_not_implemented("logcumsumexp_out_cpu", t);
  return scan(a.tensor(0), a.integer(1), t, "logcumsumexp", [](auto acc, auto x) {
    // Upstream's log_add_exp: NaN in the new element propagates; equal infinities stay.
    using T = decltype(acc);
    T lo = std::isnan(x) ? x : std::min(acc, x), hi = std::isnan(x) ? x : std::max(acc, x);
    if (lo != hi || std::isfinite(lo)) return T(std::log1p(std::exp(lo - hi)) + hi);
    return acc;
  });
});
TN_KERNEL("aten::cummax", {
  auto [v, i] = cumulative_extreme<true>(a.tensor(0), a.integer(1));
  return IValue::tuple({v, i});
});
TN_KERNEL("aten::cummin", {
  auto [v, i] = cumulative_extreme<false>(a.tensor(0), a.integer(1));
  return IValue::tuple({v, i});
});

}  // namespace tn
