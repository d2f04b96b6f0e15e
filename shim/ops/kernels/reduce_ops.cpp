// Reductions: sum, mean, prod, nansum, nanmean, all, any, count_nonzero,
// max/min/argmax/argmin/amax/amin/aminmax, var/std/var_mean/std_mean, logsumexp, diff.
#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

#include "common.h"
#include "typed_ops.h"

namespace tn {

namespace {

Tensor sum(const Tensor& self, const std::optional<std::vector<int64_t>>& dims, bool keepdim,
           std::optional<ScalarType> dtype) {
  ScalarType t = integral_to_long(self.dtype(), dtype);
  if (t == ScalarType::Float || t == ScalarType::Double) return cascade_sum(self, t, dims, keepdim, false);
  ReducePlan plan = plan_reduce(self.to(t), dims, keepdim);
  Tensor out = Tensor::empty(plan.out_shape, t);
  if (out.is_meta()) return out;
  TN_DISPATCH_ALL_TYPES(t, "sum", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    // float16/bfloat16 accumulate in double: at least as accurate as upstream's cascade
    // sum in float; integers exactly (wrapping) in int64.
    using acc_t =
        std::conditional_t<std::is_integral_v<scalar_t> && !std::is_same_v<scalar_t, bool>, int64_t, double>;
    const scalar_t* in = plan.values.template data_as<scalar_t>();
    scalar_t* o = out.template data_as<scalar_t>();
    for (int64_t i = 0; i < out.numel(); ++i) {
      // Four running sums break the serial dependency.
      const scalar_t* row = in + i * plan.inner;
      acc_t partial[4] = {0, 0, 0, 0};
      int64_t j = 0;
      for (; j + 4 <= plan.inner; j += 4)
        for (int k = 0; k < 4; ++k) partial[k] += acc_t(compute_t<scalar_t>(row[j + k]));
      acc_t total = (partial[0] + partial[1]) + (partial[2] + partial[3]);
      for (; j < plan.inner; ++j) total += acc_t(compute_t<scalar_t>(row[j]));
      o[i] = scalar_t(compute_t<scalar_t>(total));
    }
  });
  return out;
}

Tensor mean(const Tensor& self, const std::optional<std::vector<int64_t>>& dims, bool keepdim,
            std::optional<ScalarType> dtype) {
  ScalarType t = dtype.value_or(self.dtype());
  if (!is_floating(t))
    throw Error(std::string("mean(): could not infer output dtype. ") +
                (dtype ? "Optional dtype" : "Input dtype") +
                " must be either a floating point or complex dtype. Got: " +
                (t == ScalarType::Long   ? "Long"
                 : t == ScalarType::Int  ? "Int"
                 : t == ScalarType::Bool ? "Bool"
                                         : scalar_type_name(t)));
  if (t == ScalarType::Float || t == ScalarType::Double) {
    // Upstream's composition: the cascade sum divided by the number of elements reduced.
    int64_t count = 1;
    if (!dims || dims->empty() || self.dim() == 0)
      count = self.numel();
    else
      for (int64_t d : *dims) count *= self.size(d);
    return ops::div(cascade_sum(self, t, dims, keepdim, false), Scalar(count));
  }
  return sequential_mean(self, dims, keepdim, t);
}

// max/min/argmax/argmin: NaN propagates and wins; ties keep the first index.
template <bool IsMax>
std::pair<Tensor, Tensor> extreme(const Tensor& self, std::optional<int64_t> dim, bool keepdim,
                                  const char* name) {
  std::optional<std::vector<int64_t>> dims;
  if (dim) dims = std::vector<int64_t>{*dim};
  if (self.numel() == 0 && !dim)
    throw Error(std::string(name) +
                "(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction "
                "dim with the 'dim' argument.");
  if (dim && self.dim() > 0 && self.size(*dim) == 0)
    throw IndexError(std::string(name) + "(): Expected reduction dim " +
                     std::to_string(wrap_dim(*dim, self.dim())) + " to have non-zero size.");
  ReducePlan plan = plan_reduce(self, dims, keepdim);
  Tensor values = Tensor::empty(plan.out_shape, self.dtype());
  Tensor indices = Tensor::empty(plan.out_shape, ScalarType::Long);
  if (values.is_meta()) return {values, indices};
  TN_DISPATCH_ALL_TYPES(self.dtype(), name, [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    const scalar_t* in = plan.values.template data_as<scalar_t>();
    for (int64_t i = 0; i < values.numel(); ++i) {
      const scalar_t* row = in + i * plan.inner;
      int64_t best = 0;
      c bv = c(row[0]);
      for (int64_t j = 1; j < plan.inner; ++j) {
        c x = c(row[j]);
        if constexpr (std::is_floating_point_v<c>) {
          if (std::isnan(bv)) break;
          if (std::isnan(x)) {
            bv = x;
            best = j;
            break;
          }
        }
        if (IsMax ? x > bv : x < bv) {
          bv = x;
          best = j;
        }
      }
      values.template data_as<scalar_t>()[i] = row[best];
      indices.template data_as<int64_t>()[i] = best;
    }
  });
  return {values, indices};
}

// amax/amin over any set of dims (all when empty): values only, NaN propagating.
template <bool IsMax>
Tensor amax_amin(const Tensor& self, const std::vector<int64_t>& dims, bool keepdim, const char* name) {
  if (self.numel() == 0) {
    if (dims.empty())
      throw Error(std::string(name) +
                  "(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction "
                  "dim with the 'dim' argument.");
    for (int64_t d : dims)
      if (self.dim() > 0 && self.size(d) == 0)
        throw IndexError(std::string(name) + "(): Expected reduction dim " +
                         std::to_string(wrap_dim(d, self.dim())) + " to have non-zero size.");
  }
  ReducePlan plan = plan_reduce(self, dims, keepdim);
  Tensor out = Tensor::empty(plan.out_shape, self.dtype());
  if (out.is_meta()) return out;
  TN_DISPATCH_ALL_TYPES(self.dtype(), name, [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    const scalar_t* in = plan.values.template data_as<scalar_t>();
    for (int64_t i = 0; i < out.numel(); ++i) {
      const scalar_t* row = in + i * plan.inner;
      scalar_t best = row[0];
      for (int64_t j = 1; j < plan.inner; ++j) {
        c x = c(row[j]), b = c(best);
        if constexpr (std::is_floating_point_v<c>) {
          if (std::isnan(b)) break;
          if (std::isnan(x)) {
            best = row[j];
            break;
          }
        }
        if (IsMax ? x > b : x < b) best = row[j];
      }
      out.template data_as<scalar_t>()[i] = best;
    }
  });
  return out;
}

Dims one_dim(int64_t d) { return std::vector<int64_t>{d}; }

Tensor prod(const Tensor& self, const Dims& dims, bool keepdim, std::optional<ScalarType> dtype) {
  ScalarType t = integral_to_long(self.dtype(), dtype);
  if (t == ScalarType::Half || t == ScalarType::BFloat16) dtype_not_implemented("prod_cpu", t);
  ReducePlan plan = plan_reduce(self.to(t), dims, keepdim);
  Tensor out = Tensor::empty(plan.out_shape, t);
  TN_DISPATCH_ALL_TYPES(t, "prod", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using acc_t = std::conditional_t<std::is_same_v<scalar_t, bool>, bool, compute_t<scalar_t>>;
    reduce_loop<acc_t, scalar_t, scalar_t>(
        plan, out, acc_t(1),
        [](acc_t acc, scalar_t x, int64_t) -> acc_t {
          if constexpr (std::is_same_v<acc_t, bool>)
            return acc && x;
          else
            return acc_t(acc * acc_t(x));
        },
        [](acc_t acc, int64_t) { return scalar_t(acc); });
  });
  return out;
}

// all/any: bool results, except uint8 inputs which keep uint8 (upstream's legacy rule).
template <bool All>
Tensor all_any(const Tensor& self, const Dims& dims, bool keepdim) {
  ScalarType out_type = self.dtype() == ScalarType::Byte ? ScalarType::Byte : ScalarType::Bool;
  ReducePlan plan = plan_reduce(self, dims, keepdim);
  Tensor truth = Tensor::empty(plan.out_shape, ScalarType::Bool);
  TN_DISPATCH_ALL_TYPES(self.dtype(), All ? "all" : "any", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    reduce_loop<bool, bool, scalar_t>(
        plan, truth, All,
        [](bool acc, scalar_t x, int64_t) {
          bool nonzero = compute_t<scalar_t>(x) != compute_t<scalar_t>(0);
          return All ? acc && nonzero : acc || nonzero;
        },
        [](bool acc, int64_t) { return acc; });
  });
  return truth.to(out_type);
}

// var/std over dims with a correction (Bessel's by default), accumulated in double.
// Like upstream: a reduction over every dim (var/std without var_mean) is two-pass
// (mean, then squared deviations); everything else runs Welford's update, whose
// running mean is also var_mean's mean (so an inf among finite values gives nan).
std::pair<Tensor, Tensor> var_mean(const Tensor& self, const Dims& dims, double correction, bool keepdim,
                                   bool take_sqrt, const char* name, bool with_mean = false) {
  if (!is_floating(self.dtype()))
    throw Error(std::string(name) + ": std and var only support floating point and complex dtypes");
  ReducePlan plan = plan_reduce(self, dims, keepdim);
  bool all_dims = plan.kept_shape.empty();
  bool two_pass =
      all_dims && !with_mean && self.dtype() != ScalarType::Half && self.dtype() != ScalarType::BFloat16;
  Tensor out = Tensor::empty(plan.out_shape, self.dtype());
  Tensor mean = Tensor::empty(plan.out_shape, self.dtype());
  if (out.is_meta()) return {out, mean};
  TN_DISPATCH_ALL_TYPES(self.dtype(), name, [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    const scalar_t* in = plan.values.template data_as<scalar_t>();
    for (int64_t i = 0; i < out.numel(); ++i) {
      const scalar_t* row = in + i * plan.inner;
      double m = 0, m2 = 0;
      if (two_pass) {
        for (int64_t j = 0; j < plan.inner; ++j) m += double(row[j]);
        m /= double(plan.inner);
        for (int64_t j = 0; j < plan.inner; ++j) m2 += (double(row[j]) - m) * (double(row[j]) - m);
      } else {
        for (int64_t j = 0; j < plan.inner; ++j) {
          double x = double(compute_t<scalar_t>(row[j]));
          double delta = x - m;
          m += delta / double(j + 1);
          m2 = std::fma(delta, x - m, m2);  // upstream's reduction kernel is FMA-contracted
        }
      }
      if (plan.inner == 0) m = std::numeric_limits<double>::quiet_NaN();  // no elements: nan mean
      double divisor = double(plan.inner) > correction ? double(plan.inner) - correction : 0.0;
      double v = m2 / divisor;
      out.template data_as<scalar_t>()[i] = scalar_t(take_sqrt ? std::sqrt(v) : v);
      mean.template data_as<scalar_t>()[i] = scalar_t(m);
    }
  });
  return {out, mean};
}

double correction_of(const Args& a, size_t unbiased_or_correction, bool is_correction_overload) {
  if (is_correction_overload) return double(a.optional_integer(unbiased_or_correction).value_or(1));
  return a.boolean(unbiased_or_correction) ? 1.0 : 0.0;
}

// Upstream's composition: sum(exp(x - max)) over dims, log, plus max (an infinite max
// taken as 0, so all -inf stays -inf and +inf stays honest), with exp and log through
// the vml (SLEEF) kernels.
Tensor logsumexp(const Tensor& self, const Dims& dims, bool keepdim) {
  ScalarType t = float_type(self.dtype());
  if (t == ScalarType::Half) dtype_not_implemented("exp_vml_cpu", t);
  Tensor x = self.to(t);
  std::vector<int64_t> over = dims.value_or(std::vector<int64_t>{});
  auto sum_of = [&](const Tensor& v) { return ops::sum(v, over, keepdim, std::nullopt); };
  if (x.numel() == 0) return ops::log(sum_of(ops::exp(x)));
  Tensor maxes = ops::amax(x, over, true).contiguous();
  if (!maxes.is_meta())  // the meta device: the shapes are the results
    TN_DISPATCH_ALL_TYPES(t, "logsumexp", [&](auto tag_) {
      using scalar_t = TN_TYPE(tag_);
      scalar_t* m = maxes.template data_as<scalar_t>();
      for (int64_t i = 0; i < maxes.numel(); ++i)
        if (std::isinf(double(compute_t<scalar_t>(m[i])))) m[i] = scalar_t(0);
    });
  Tensor total = sum_of(ops::exp(ops::sub(x, maxes, Scalar(int64_t{1}))));
  return ops::add(ops::log(total), ops::reshape(maxes, total.sizes()), Scalar(int64_t{1}));
}

Tensor nansum(const Tensor& self, const Dims& dims, bool keepdim, std::optional<ScalarType> dtype) {
  ScalarType t = integral_to_long(self.dtype(), dtype);
  if (t == ScalarType::Float || t == ScalarType::Double) return cascade_sum(self, t, dims, keepdim, true);
  ReducePlan plan = plan_reduce(self.to(t), dims, keepdim);
  Tensor out = Tensor::empty(plan.out_shape, t);
  TN_DISPATCH_ALL_TYPES(t, "nansum", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using acc_t =
        std::conditional_t<std::is_integral_v<scalar_t> && !std::is_same_v<scalar_t, bool>, int64_t, double>;
    reduce_loop<acc_t, scalar_t, scalar_t>(
        plan, out, acc_t(0),
        [](acc_t acc, scalar_t x, int64_t) {
          acc_t v = acc_t(compute_t<scalar_t>(x));
          if constexpr (std::is_floating_point_v<acc_t>)
            if (std::isnan(v)) return acc;
          return acc_t(acc + v);
        },
        [](acc_t acc, int64_t) { return scalar_t(compute_t<scalar_t>(acc)); });
  });
  return out;
}

Tensor nanmean(const Tensor& self, const Dims& dims, bool keepdim, std::optional<ScalarType> dtype) {
  ScalarType t = dtype.value_or(self.dtype());
  if (!is_floating(t))
    throw Error(std::string("nanmean(): expected input to have floating point dtype but got ") +
                upstream_type_name(t));
  if (t == ScalarType::Float || t == ScalarType::Double) {
    // Upstream's composition: nansum divided by the count of non-NaN elements.
    Tensor count = ops::sum(ops::logical_not(ops::isnan(self)), dims.value_or(std::vector<int64_t>{}),
                            keepdim, std::nullopt);
    return ops::div(nansum(self, dims, keepdim, t), count);
  }
  ReducePlan plan = plan_reduce(self.to(t), dims, keepdim);
  Tensor out = Tensor::empty(plan.out_shape, t);
  TN_DISPATCH_ALL_TYPES(t, "nanmean", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using acc_t = std::pair<double, int64_t>;
    reduce_loop<acc_t, scalar_t, scalar_t>(
        plan, out, acc_t(0.0, 0),
        [](acc_t acc, scalar_t x, int64_t) {
          double v = double(compute_t<scalar_t>(x));
          return std::isnan(v) ? acc : acc_t(acc.first + v, acc.second + 1);
        },
        [](acc_t acc, int64_t) { return scalar_t(compute_t<scalar_t>(acc.first / double(acc.second))); });
  });
  return out;
}

Tensor count_nonzero(const Tensor& self, const Dims& dims) {
  ReducePlan plan = plan_reduce(self, dims, false);
  Tensor out = Tensor::empty(plan.out_shape, ScalarType::Long);
  TN_DISPATCH_ALL_TYPES(self.dtype(), "count_nonzero", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    reduce_loop<int64_t, int64_t, scalar_t>(
        plan, out, int64_t(0),
        [](int64_t acc, scalar_t x, int64_t) {
          return acc + (compute_t<scalar_t>(x) != compute_t<scalar_t>(0));
        },
        [](int64_t acc, int64_t) { return acc; });
  });
  return out;
}

}  // namespace

TN_KERNEL("aten::sum", { return sum(a.tensor(0), std::nullopt, false, a.optional_dtype(1)); });
TN_KERNEL("aten::sum.dim_IntList",
          { return sum(a.tensor(0), a.optional_int_list(1), a.boolean(2), a.optional_dtype(3)); });
TN_KERNEL("aten::mean", { return mean(a.tensor(0), std::nullopt, false, a.optional_dtype(1)); });
TN_KERNEL("aten::mean.dim",
          { return mean(a.tensor(0), a.optional_int_list(1), a.boolean(2), a.optional_dtype(3)); });
TN_KERNEL("aten::max", {
  return extreme<true>(a.tensor(0), std::nullopt, false, "max").first.view_as_strided({}, {}, 0);
});
TN_KERNEL("aten::min", {
  return extreme<false>(a.tensor(0), std::nullopt, false, "min").first.view_as_strided({}, {}, 0);
});
TN_KERNEL("aten::max.dim", {
  auto [v, i] = extreme<true>(a.tensor(0), a.integer(1), a.boolean(2), "max");
  return IValue::tuple({v, i});
});
TN_KERNEL("aten::min.dim", {
  auto [v, i] = extreme<false>(a.tensor(0), a.integer(1), a.boolean(2), "min");
  return IValue::tuple({v, i});
});
TN_KERNEL("aten::argmax", {
  if (a.tensor(0).dtype() == ScalarType::Bool) dtype_not_implemented("argmax_cpu", ScalarType::Bool);
  auto dim = a.optional_integer(1);
  if (!dim && a.tensor(0).numel() == 0)
    throw IndexError("argmax(): Expected reduction dim to be specified for input.numel() == 0.");
  Tensor x = dim ? a.tensor(0) : flat(a.tensor(0));
  Tensor idx = extreme<true>(x, dim.value_or(0), dim ? a.boolean(2) : false, "argmax").second;
  return dim || !a.boolean(2) ? idx
                              : idx.view_as_strided(Shape(size_t(a.tensor(0).dim()), 1),
                                                    Shape(size_t(a.tensor(0).dim()), 1), 0);
});
TN_KERNEL("aten::argmin", {
  if (a.tensor(0).dtype() == ScalarType::Bool) dtype_not_implemented("argmin_cpu", ScalarType::Bool);
  auto dim = a.optional_integer(1);
  if (!dim && a.tensor(0).numel() == 0)
    throw IndexError("argmin(): Expected reduction dim to be specified for input.numel() == 0.");
  Tensor x = dim ? a.tensor(0) : flat(a.tensor(0));
  Tensor idx = extreme<false>(x, dim.value_or(0), dim ? a.boolean(2) : false, "argmin").second;
  return dim || !a.boolean(2) ? idx
                              : idx.view_as_strided(Shape(size_t(a.tensor(0).dim()), 1),
                                                    Shape(size_t(a.tensor(0).dim()), 1), 0);
});
TN_KERNEL("aten::amax", { return amax_amin<true>(a.tensor(0), a.int_list(1), a.boolean(2), "amax"); });
TN_KERNEL("aten::amin", { return amax_amin<false>(a.tensor(0), a.int_list(1), a.boolean(2), "amin"); });
TN_KERNEL("aten::prod", { return prod(a.tensor(0), std::nullopt, false, a.optional_dtype(1)); });
TN_KERNEL("aten::prod.dim_int",
          { return prod(a.tensor(0), one_dim(a.integer(1)), a.boolean(2), a.optional_dtype(3)); });
TN_KERNEL("aten::all", { return all_any<true>(a.tensor(0), std::nullopt, false); });
TN_KERNEL("aten::any", { return all_any<false>(a.tensor(0), std::nullopt, false); });
TN_KERNEL("aten::all.dim", { return all_any<true>(a.tensor(0), one_dim(a.integer(1)), a.boolean(2)); });
TN_KERNEL("aten::any.dim", { return all_any<false>(a.tensor(0), one_dim(a.integer(1)), a.boolean(2)); });
TN_KERNEL("aten::var", {
  return var_mean(a.tensor(0), std::nullopt, correction_of(a, 1, false), false, false, "var").first;
});
TN_KERNEL("aten::var.dim", {
  return var_mean(a.tensor(0), a.optional_int_list(1), correction_of(a, 2, false), a.boolean(3), false, "var")
      .first;
});
TN_KERNEL("aten::var.correction", {
  return var_mean(a.tensor(0), a.optional_int_list(1), correction_of(a, 2, true), a.boolean(3), false, "var")
      .first;
});
TN_KERNEL("aten::std", {
  return var_mean(a.tensor(0), std::nullopt, correction_of(a, 1, false), false, true, "std").first;
});
TN_KERNEL("aten::std.dim", {
  return var_mean(a.tensor(0), a.optional_int_list(1), correction_of(a, 2, false), a.boolean(3), true, "std")
      .first;
});
TN_KERNEL("aten::std.correction", {
  return var_mean(a.tensor(0), a.optional_int_list(1), correction_of(a, 2, true), a.boolean(3), true, "std")
      .first;
});
TN_KERNEL("aten::var_mean", {
  auto [v, m] =
      var_mean(a.tensor(0), std::nullopt, correction_of(a, 1, false), false, false, "var_mean", true);
  return IValue::tuple({v, m});
});
TN_KERNEL("aten::var_mean.dim", {
  auto [v, m] = var_mean(a.tensor(0), a.optional_int_list(1), correction_of(a, 2, false), a.boolean(3), false,
                         "var_mean", true);
  return IValue::tuple({v, m});
});
TN_KERNEL("aten::var_mean.correction", {
  auto [v, m] = var_mean(a.tensor(0), a.optional_int_list(1), correction_of(a, 2, true), a.boolean(3), false,
                         "var_mean", true);
  return IValue::tuple({v, m});
});
TN_KERNEL("aten::std_mean", {
  auto [v, m] =
      var_mean(a.tensor(0), std::nullopt, correction_of(a, 1, false), false, true, "std_mean", true);
  return IValue::tuple({v, m});
});
TN_KERNEL("aten::std_mean.dim", {
  auto [v, m] = var_mean(a.tensor(0), a.optional_int_list(1), correction_of(a, 2, false), a.boolean(3), true,
                         "std_mean", true);
  return IValue::tuple({v, m});
});
TN_KERNEL("aten::std_mean.correction", {
  auto [v, m] = var_mean(a.tensor(0), a.optional_int_list(1), correction_of(a, 2, true), a.boolean(3), true,
                         "std_mean", true);
  return IValue::tuple({v, m});
});
TN_KERNEL("aten::logsumexp", { return logsumexp(a.tensor(0), a.optional_int_list(1), a.boolean(2)); });
TN_KERNEL("aten::nansum",
          { return nansum(a.tensor(0), a.optional_int_list(1), a.boolean(2), a.optional_dtype(3)); });
TN_KERNEL("aten::nanmean",
          { return nanmean(a.tensor(0), a.optional_int_list(1), a.boolean(2), a.optional_dtype(3)); });
TN_KERNEL("aten::count_nonzero", {
  auto d = a.optional_integer(1);
  return count_nonzero(a.tensor(0), d ? one_dim(*d) : std::nullopt);
});
TN_KERNEL("aten::count_nonzero.dim_IntList", { return count_nonzero(a.tensor(0), a.int_list(1)); });
TN_KERNEL("aten::aminmax", {
  auto d = a.optional_integer(1);
  const Tensor& self = a.tensor(0);
  if (self.dtype() == ScalarType::Half) dtype_not_implemented("aminmax_cpu", ScalarType::Half);
  Tensor x = d ? self : flat(self);
  if (!d && self.numel() == 0)
    throw Error(
        "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity.");
  bool keep = a.boolean(2);
  Tensor lo = ops::amin(x, std::vector<int64_t>{d.value_or(0)}, keep);
  Tensor hi = ops::amax(x, std::vector<int64_t>{d.value_or(0)}, keep);
  // Upstream 1.13 gives a 0-d input's keepdim results one dimension (resizing its 0-d outputs).
  if (d && keep && self.dim() == 0) {
    lo = lo.view_as_strided({1}, {1}, lo.offset());
    hi = hi.view_as_strided({1}, {1}, hi.offset());
  }
  if (!d && keep) {
    Shape ones(size_t(self.dim()), 1);
    lo = lo.view_as_strided(ones, ones, lo.offset());
    hi = hi.view_as_strided(ones, ones, hi.offset());
  }
  return IValue::tuple({lo, hi});
});

namespace {

// A tensor prepended or appended to diff's input has its shape but along `dim`.
void check_diff_operand(const Tensor& self, const std::optional<Tensor>& other, int64_t dim) {
  if (!other) return;
  int64_t d = wrap_dim(dim, self.dim());
  if (other->dim() != self.dim())
    throw Error("diff expects prepend or append to be the same dimension as input");
  for (int64_t i = 0; i < other->dim(); ++i)
    if (i != d && other->size(i) != self.size(i))
      throw Error(
          "diff expects the shape of tensor to prepend or append to match that of input except along the "
          "differencing dimension; input.size(" +
          std::to_string(i) + ") = " + std::to_string(self.size(i)) + ", but got tensor.size(" +
          std::to_string(i) + ") = " + std::to_string(other->size(i)));
}

// n rounds of neighbour differences along dim (exclusive or for bool); n past the length
// leaves an empty dim, a negative n the input itself, as upstream's.
Tensor diff(const Tensor& self, int64_t n, int64_t dim, const std::optional<Tensor>& prepend,
            const std::optional<Tensor>& append) {
  if (self.dim() < 1) throw Error("diff expects input to be at least one-dimensional");
  check_diff_operand(self, prepend, dim);
  check_diff_operand(self, append, dim);
  if (n == 0) return ops::clone(self);
  std::vector<Tensor> parts;
  if (prepend) parts.push_back(*prepend);
  parts.push_back(self);
  if (append) parts.push_back(*append);
  Tensor result = parts.size() > 1 ? ops::cat(parts, dim) : self;
  const int64_t rounds = std::min(n, result.size(dim));
  const bool logical = result.dtype() == ScalarType::Bool;
  for (int64_t i = 0, length = result.size(dim) - 1; i < rounds; ++i, --length) {
    Tensor later = ops::narrow(result, dim, 1, length), earlier = ops::narrow(result, dim, 0, length);
    result = logical ? ops::logical_xor(later, earlier) : ops::sub(later, earlier);
  }
  return result;
}

}  // namespace

TN_KERNEL("aten::diff", {
  return diff(a.tensor(0), a.integer(1), a.integer(2), a.optional_tensor(3), a.optional_tensor(4));
});

}  // namespace tn
