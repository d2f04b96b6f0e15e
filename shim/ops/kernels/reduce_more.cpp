// Reductions and scans beyond sum/mean/max/min: prod, all/any, var/std, logsumexp,
// norms, nan-aware sums, count_nonzero, order statistics (median, mode, kthvalue),
// cumulative sums/products/extrema.
#include <algorithm>
#include <limits>
#include <numeric>

#include "common.h"

namespace tn {

namespace {

using Dims = std::optional<std::vector<int64_t>>;

Dims dims_of(const Args& a, size_t i) { return a.optional_int_list(i); }
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
  auto sum_of = [&](const Tensor& v) { return op("aten::sum", "dim_IntList", {v, over, keepdim, IValue()}); };
  if (x.numel() == 0) return op("aten::log", "", {sum_of(op("aten::exp", "", {x}))});
  Tensor maxes = op("aten::amax", "", {x, over, true}).contiguous();
  TN_DISPATCH_ALL_TYPES(t, "logsumexp", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    scalar_t* m = maxes.template data_as<scalar_t>();
    for (int64_t i = 0; i < maxes.numel(); ++i)
      if (std::isinf(double(compute_t<scalar_t>(m[i])))) m[i] = scalar_t(0);
  });
  Tensor total = sum_of(op("aten::exp", "", {op("aten::sub", "Tensor", {x, maxes, Scalar(int64_t{1})})}));
  return op(
      "aten::add", "Tensor",
      {op("aten::log", "", {total}), op("aten::reshape", "", {maxes, total.sizes()}), Scalar(int64_t{1})});
}

// p-norms: 0 counts nonzeros, inf/-inf take max/min of |x|, others (sum |x|^p)^(1/p).
Tensor vector_norm(const Tensor& self, double p, const Dims& dims, bool keepdim,
                   std::optional<ScalarType> dtype, const char* name) {
  if (!is_floating(self.dtype()))
    throw Error(std::string(name) + "(): input dtype should be either floating point or complex. Got " +
                upstream_type_name(self.dtype()) + " instead.");
  ScalarType t = dtype.value_or(self.dtype());
  if (p == 2 && t == ScalarType::Float && self.dtype() == ScalarType::Float)
    return norm2_float(self, dims, keepdim);
  ReducePlan plan = plan_reduce(self.to(t), dims, keepdim);
  if (self.numel() == 0 && p < 0)
    throw IndexError(std::string(name) +
                     "(): Expected reduction dim to be specified for input.numel() == 0.");
  Tensor out = Tensor::empty(plan.out_shape, t);
  TN_DISPATCH_ALL_TYPES(t, name, [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    const scalar_t* in = plan.values.template data_as<scalar_t>();
    for (int64_t i = 0; i < out.numel(); ++i) {
      const scalar_t* row = in + i * plan.inner;
      double acc = 0;
      if (std::isinf(p)) {
        acc = p > 0 ? 0 : std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < plan.inner; ++j) {
          double x = std::abs(double(row[j]));
          if (std::isnan(x)) {
            acc = x;
            break;
          }
          acc = p > 0 ? std::max(acc, x) : std::min(acc, x);
        }
      } else if (p == 0) {
        for (int64_t j = 0; j < plan.inner; ++j) acc += double(row[j]) != 0;
      } else if (p == 1) {
        for (int64_t j = 0; j < plan.inner; ++j) acc += std::abs(double(row[j]));
      } else if (p == 2) {
        for (int64_t j = 0; j < plan.inner; ++j) acc += double(row[j]) * double(row[j]);
        acc = std::sqrt(acc);
      } else {
        for (int64_t j = 0; j < plan.inner; ++j) acc += std::pow(std::abs(double(row[j])), p);
        acc = std::pow(acc, 1.0 / p);
      }
      out.template data_as<scalar_t>()[i] = scalar_t(acc);
    }
  });
  return out;
}

double p_of(const std::optional<Scalar>& p) { return p ? p->to_double() : 2.0; }

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
    Tensor count = op("aten::sum", "dim_IntList",
                      {op("aten::logical_not", "", {op("aten::isnan", "", {self})}),
                       dims.value_or(std::vector<int64_t>{}), keepdim, IValue()});
    return op("aten::div", "Tensor", {nansum(self, dims, keepdim, t), count});
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

// ---- order statistics along a dim: values and indices of one element per row ----

// Picks, per row, an index into the row; returns (values, indices) laid back.
template <typename Pick>
std::pair<Tensor, Tensor> select_per_row(const Tensor& self, int64_t dim, bool keepdim, const char* name,
                                         Pick pick) {
  Rows rows = rows_along(self, dim);
  if (rows.length == 0)
    throw IndexError(std::string(name) + "(): Expected reduction dim " + std::to_string(rows.dim) +
                     " to have non-zero size.");
  Tensor values = Tensor::empty({rows.count}, self.dtype());
  Tensor indices = Tensor::empty({rows.count}, ScalarType::Long);
  TN_DISPATCH_ALL_TYPES(self.dtype(), name, [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    for (int64_t r = 0; r < rows.count; ++r) {
      const scalar_t* row = rows.data.template data_as<scalar_t>() + r * rows.length;
      std::vector<double> v(size_t(rows.length));
      for (int64_t j = 0; j < rows.length; ++j) v[size_t(j)] = double(compute_t<scalar_t>(row[j]));
      int64_t k = pick(v);
      values.template data_as<scalar_t>()[r] = row[k];
      indices.template data_as<int64_t>()[r] = k;
    }
  });
  return {from_rows(values, rows, 1, keepdim), from_rows(indices, rows, 1, keepdim)};
}

// Row positions sorted by (value, position): NaN sorts last, ties keep position order.
std::vector<int64_t> stable_order(const std::vector<double>& v) {
  std::vector<int64_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    double x = v[size_t(a)], y = v[size_t(b)];
    if (std::isnan(x)) return false;
    if (std::isnan(y)) return true;
    return x < y;
  });
  return order;
}

// median: the lower middle; a NaN in the row makes the result that (first) NaN.
// nanmedian: the lower middle of the non-NaN values.
int64_t median_pick(const std::vector<double>& v, bool ignore_nan) {
  auto first_nan = std::find_if(v.begin(), v.end(), [](double x) { return std::isnan(x); });
  int64_t valid = int64_t(std::count_if(v.begin(), v.end(), [](double x) { return !std::isnan(x); }));
  if (!ignore_nan && first_nan != v.end()) return int64_t(first_nan - v.begin());
  if (valid == 0) return int64_t(first_nan - v.begin());
  return stable_order(v)[size_t((valid - 1) / 2)];
}

// mode: upstream sorts (value, position) pairs by value with std::sort and keeps the
// first longest run, reporting the position of its last element; the same library
// sort reproduces its choice among ties.
int64_t mode_pick(const std::vector<double>& v) {
  std::vector<std::pair<double, int64_t>> elements;
  for (size_t i = 0; i < v.size(); ++i) elements.emplace_back(v[i], int64_t(i));
  std::sort(elements.begin(), elements.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  int64_t best = elements[0].second, best_count = 0, run = 0;
  for (size_t i = 0; i < elements.size(); ++i) {
    ++run;
    if (i + 1 == elements.size() || elements[i].first != elements[i + 1].first) {
      if (run > best_count) {
        best_count = run;
        best = elements[i].second;
      }
      run = 0;
    }
  }
  return best;
}

// kthvalue: upstream's quickselect (median-of-three, NaN largest) over (value,
// position) pairs; replicated so ties resolve to the same position.
int64_t kth_pick(const std::vector<double>& v, int64_t k) {
  std::vector<double> values = v;
  std::vector<int64_t> positions(v.size());
  std::iota(positions.begin(), positions.end(), 0);
  auto greater = [](double x, double y) { return (std::isnan(x) && !std::isnan(y)) || x > y; };
  auto swap_at = [&](int64_t i, int64_t j) {
    std::swap(values[size_t(i)], values[size_t(j)]);
    std::swap(positions[size_t(i)], positions[size_t(j)]);
  };
  int64_t lo = 0, hi = int64_t(values.size()) - 1;
  while (true) {
    if (hi <= lo) break;
    if (hi == lo + 1) {
      if (greater(values[size_t(lo)], values[size_t(hi)])) swap_at(lo, hi);
      break;
    }
    int64_t mid = lo + (hi - lo) / 2;
    swap_at(mid, lo + 1);
    if (greater(values[size_t(lo + 1)], values[size_t(hi)])) swap_at(lo + 1, hi);
    if (greater(values[size_t(lo)], values[size_t(hi)])) swap_at(lo, hi);
    if (greater(values[size_t(lo + 1)], values[size_t(lo)])) swap_at(lo + 1, lo);
    int64_t i = lo + 1, j = hi;
    double pivot = values[size_t(lo)];
    while (true) {
      do ++i;
      while (greater(pivot, values[size_t(i)]));
      do --j;
      while (greater(values[size_t(j)], pivot));
      if (j < i) break;
      swap_at(i, j);
    }
    swap_at(lo, j);
    if (j <= k) lo = i;
    if (j >= k) hi = j - 1;
  }
  return positions[size_t(k)];
}

// The median of no elements is NaN.
Tensor full_nan(const Tensor& like) {
  Tensor out = Tensor::empty({}, like.dtype());
  out.copy_from(scalar_tensor(Scalar(std::numeric_limits<double>::quiet_NaN())));
  return out;
}

Tensor median_all(const Tensor& self, bool ignore_nan) {
  if (self.numel() == 0) return full_nan(self);
  auto [values, indices] =
      select_per_row(flat(self), 0, false, ignore_nan ? "nanmedian" : "median",
                     [&](const std::vector<double>& v) { return median_pick(v, ignore_nan); });
  (void)indices;
  return values;
}

// ---- scans ----

template <typename Step>
Tensor scan(const Tensor& self, int64_t dim, ScalarType t, const char* name, Step step) {
  Rows rows = rows_along(self.to(t), dim);
  Tensor out = Tensor::empty(rows.data.sizes(), t);
  TN_DISPATCH_ALL_TYPES(t, name, [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using acc_t =
        std::conditional_t<std::is_integral_v<scalar_t> && !std::is_same_v<scalar_t, bool>, int64_t, double>;
    for (int64_t r = 0; r < rows.count; ++r) {
      const scalar_t* in = rows.data.template data_as<scalar_t>() + r * rows.length;
      scalar_t* o = out.template data_as<scalar_t>() + r * rows.length;
      acc_t acc{};
      for (int64_t j = 0; j < rows.length; ++j) {
        acc =
            j == 0 ? acc_t(compute_t<scalar_t>(in[0])) : acc_t(step(acc, acc_t(compute_t<scalar_t>(in[j]))));
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
  return var_mean(a.tensor(0), dims_of(a, 1), correction_of(a, 2, false), a.boolean(3), false, "var").first;
});
TN_KERNEL("aten::var.correction", {
  return var_mean(a.tensor(0), dims_of(a, 1), correction_of(a, 2, true), a.boolean(3), false, "var").first;
});
TN_KERNEL("aten::std", {
  return var_mean(a.tensor(0), std::nullopt, correction_of(a, 1, false), false, true, "std").first;
});
TN_KERNEL("aten::std.dim", {
  return var_mean(a.tensor(0), dims_of(a, 1), correction_of(a, 2, false), a.boolean(3), true, "std").first;
});
TN_KERNEL("aten::std.correction", {
  return var_mean(a.tensor(0), dims_of(a, 1), correction_of(a, 2, true), a.boolean(3), true, "std").first;
});
TN_KERNEL("aten::var_mean", {
  auto [v, m] =
      var_mean(a.tensor(0), std::nullopt, correction_of(a, 1, false), false, false, "var_mean", true);
  return IValue::tuple({v, m});
});
TN_KERNEL("aten::var_mean.dim", {
  auto [v, m] =
      var_mean(a.tensor(0), dims_of(a, 1), correction_of(a, 2, false), a.boolean(3), false, "var_mean", true);
  return IValue::tuple({v, m});
});
TN_KERNEL("aten::var_mean.correction", {
  auto [v, m] =
      var_mean(a.tensor(0), dims_of(a, 1), correction_of(a, 2, true), a.boolean(3), false, "var_mean", true);
  return IValue::tuple({v, m});
});
TN_KERNEL("aten::std_mean", {
  auto [v, m] =
      var_mean(a.tensor(0), std::nullopt, correction_of(a, 1, false), false, true, "std_mean", true);
  return IValue::tuple({v, m});
});
TN_KERNEL("aten::std_mean.dim", {
  auto [v, m] =
      var_mean(a.tensor(0), dims_of(a, 1), correction_of(a, 2, false), a.boolean(3), true, "std_mean", true);
  return IValue::tuple({v, m});
});
TN_KERNEL("aten::std_mean.correction", {
  auto [v, m] =
      var_mean(a.tensor(0), dims_of(a, 1), correction_of(a, 2, true), a.boolean(3), true, "std_mean", true);
  return IValue::tuple({v, m});
});

TN_KERNEL("aten::logsumexp", { return logsumexp(a.tensor(0), dims_of(a, 1), a.boolean(2)); });
TN_KERNEL("aten::norm.Scalar", {
  return vector_norm(a.tensor(0), a.scalar(1).to_double(), std::nullopt, false, std::nullopt, "norm");
});
TN_KERNEL("aten::norm.ScalarOpt_dim", {
  return vector_norm(a.tensor(0), p_of(a.optional_scalar(1)), dims_of(a, 2), a.boolean(3), std::nullopt,
                     "norm");
});
TN_KERNEL("aten::norm.ScalarOpt_dtype", {
  return vector_norm(a.tensor(0), p_of(a.optional_scalar(1)), std::nullopt, false, a.optional_dtype(2),
                     "norm");
});
TN_KERNEL("aten::norm.ScalarOpt_dim_dtype", {
  return vector_norm(a.tensor(0), p_of(a.optional_scalar(1)), dims_of(a, 2), a.boolean(3),
                     a.optional_dtype(4), "norm");
});
TN_KERNEL("aten::linalg_vector_norm", {
  return vector_norm(a.tensor(0), a.scalar(1).to_double(), dims_of(a, 2), a.boolean(3), a.optional_dtype(4),
                     "linalg.vector_norm");
});
TN_KERNEL("aten::frobenius_norm",
          { return vector_norm(a.tensor(0), 2.0, std::nullopt, false, std::nullopt, "frobenius_norm"); });
TN_KERNEL("aten::frobenius_norm.dim", {
  return vector_norm(a.tensor(0), 2.0, dims_of(a, 1), a.boolean(2), std::nullopt, "frobenius_norm");
});
TN_KERNEL("aten::nansum", { return nansum(a.tensor(0), dims_of(a, 1), a.boolean(2), a.optional_dtype(3)); });
TN_KERNEL("aten::nanmean",
          { return nanmean(a.tensor(0), dims_of(a, 1), a.boolean(2), a.optional_dtype(3)); });
TN_KERNEL("aten::count_nonzero", {
  auto d = a.optional_integer(1);
  return count_nonzero(a.tensor(0), d ? one_dim(*d) : std::nullopt);
});
TN_KERNEL("aten::count_nonzero.dim_IntList", { return count_nonzero(a.tensor(0), a.int_list(1)); });

TN_KERNEL("aten::median", {
  if (a.tensor(0).dtype() == ScalarType::Half) dtype_not_implemented("median_cpu", ScalarType::Half);
  return median_all(a.tensor(0), false);
});
TN_KERNEL("aten::nanmedian", {
  if (a.tensor(0).dtype() == ScalarType::Half) dtype_not_implemented("median_cpu", ScalarType::Half);
  return median_all(a.tensor(0), true);
});
TN_KERNEL("aten::median.dim", {
  if (a.tensor(0).dtype() == ScalarType::Half) dtype_not_implemented("median_out", ScalarType::Half);
  auto [v, i] = select_per_row(a.tensor(0), a.integer(1), a.boolean(2), "median",
                               [](const std::vector<double>& v) { return median_pick(v, false); });
  return IValue::tuple({v, i});
});
TN_KERNEL("aten::nanmedian.dim", {
  if (a.tensor(0).dtype() == ScalarType::Half) dtype_not_implemented("median_out", ScalarType::Half);
  auto [v, i] = select_per_row(a.tensor(0), a.integer(1), a.boolean(2), "nanmedian",
                               [](const std::vector<double>& v) { return median_pick(v, true); });
  return IValue::tuple({v, i});
});
TN_KERNEL("aten::mode", {
  auto [v, i] = select_per_row(a.tensor(0), a.integer(1), a.boolean(2), "mode", mode_pick);
  return IValue::tuple({v, i});
});
TN_KERNEL("aten::kthvalue", {
  if (a.tensor(0).dtype() == ScalarType::Half) dtype_not_implemented("kthvalue_cpu", ScalarType::Half);
  int64_t k = a.integer(1);
  const Tensor& self = a.tensor(0);
  int64_t length = self.dim() == 0 ? 1 : self.size(a.integer(2));
  if (k < 1 || k > length)
    throw Error("kthvalue(): selected number k out of range for dimension " + std::to_string(a.integer(2)));
  auto [v, i] = select_per_row(self, a.integer(2), a.boolean(3), "kthvalue",
                               [k](const std::vector<double>& v) { return kth_pick(v, k - 1); });
  return IValue::tuple({v, i});
});
TN_KERNEL("aten::aminmax", {
  auto d = a.optional_integer(1);
  const Tensor& self = a.tensor(0);
  if (self.dtype() == ScalarType::Half) dtype_not_implemented("aminmax_cpu", ScalarType::Half);
  Tensor x = d ? self : flat(self);
  if (!d && self.numel() == 0)
    throw Error(
        "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity.");
  bool keep = a.boolean(2);
  Tensor lo = call_tensor_op("aten::amin", "", {x, std::vector<int64_t>{d.value_or(0)}, keep});
  Tensor hi = call_tensor_op("aten::amax", "", {x, std::vector<int64_t>{d.value_or(0)}, keep});
  if (!d && keep) {
    Shape ones(size_t(self.dim()), 1);
    lo = lo.view_as_strided(ones, ones, lo.offset());
    hi = hi.view_as_strided(ones, ones, hi.offset());
  }
  return IValue::tuple({lo, hi});
});

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
