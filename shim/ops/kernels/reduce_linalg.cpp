// Reductions over dimensions, softmax, matmul and linear (products themselves in blas.cpp).
#include <algorithm>
#include <limits>
#include <vector>

#include "common.h"

namespace tn {

namespace {

Tensor sum(const Tensor& self, const std::optional<std::vector<int64_t>>& dims, bool keepdim,
           std::optional<ScalarType> dtype) {
  ScalarType t = integral_to_long(self.dtype(), dtype);
  if (t == ScalarType::Float || t == ScalarType::Double) return cascade_sum(self, t, dims, keepdim, false);
  ReducePlan plan = plan_reduce(self.to(t), dims, keepdim);
  Tensor out = Tensor::empty(plan.out_shape, t);
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
    return op("aten::div", "Scalar", {cascade_sum(self, t, dims, keepdim, false), Scalar(count)});
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

// Upstream's vectorized sum of a row (vec::reduce_all): a row shorter than a vector in
// order; else whole vectors lane by lane, the last partial one into the first lanes,
// then the lanes folded (AVX2 float: across halves, then pairs; double: in order).
template <typename T>
T vector_row_sum(const T* x, int64_t n) {
  constexpr int64_t width = 32 / int64_t(sizeof(T));
  if (n < width) {
    T acc = x[0];
    for (int64_t i = 1; i < n; ++i) acc += x[i];
    return acc;
  }
  T lanes[width];
  std::copy(x, x + width, lanes);
  int64_t d = width;
  for (; d < n - n % width; d += width)
    for (int64_t l = 0; l < width; ++l) lanes[l] += x[d + l];
  for (int64_t l = 0; l < n - d; ++l) lanes[l] += x[d + l];
  if constexpr (std::is_same_v<T, float>)
    return ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
  else
    return ((lanes[0] + lanes[1]) + lanes[2]) + lanes[3];
}

// Upstream's last-dim softmax kernels in the storage type: exp(x - max) through SLEEF,
// the vectorized row sum, then a multiplication by its reciprocal (softmax) or
// (x - max) - log(sum) with SLEEF's log (log_softmax).
template <typename T>
void softmax_lastdim_row(const T* in, T* out, int64_t n, bool log) {
  T m = in[0];
  for (int64_t j = 1; j < n; ++j)
    if (!std::isnan(m) && (std::isnan(in[j]) || in[j] > m)) m = in[j];  // NaN propagates
  std::vector<T> shifted(static_cast<size_t>(n)), exps(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) shifted[size_t(j)] = in[j] - m;
  vml_apply(VmlOp::Exp, shifted.data(), exps.data(), n);
  T sum = vector_row_sum(exps.data(), n);
  if (!log) {
    T reciprocal = T(1) / sum;
    for (int64_t j = 0; j < n; ++j) out[j] = exps[size_t(j)] * reciprocal;
    return;
  }
  T log_sum;
  vml_apply(VmlOp::Log, &sum, &log_sum, 1);
  for (int64_t j = 0; j < n; ++j) out[j] = shifted[size_t(j)] - log_sum;
}

Tensor softmax(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype, bool log) {
  ScalarType t = dtype.value_or(self.dtype());
  if (!is_floating(t) || t == ScalarType::Half)
    dtype_not_implemented(log ? "log_softmax_lastdim_kernel_impl" : "softmax_lastdim_kernel_impl", t);
  Tensor x = self.to(t);
  if (x.dim() == 0) x = x.view_as_strided({1}, {1}, x.offset());
  dim = wrap_dim(dim, x.dim());
  // Move `dim` last, compute row-wise, move it back (no moves for the last dim).
  Shape perm;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != dim) perm.push_back(d);
  perm.push_back(dim);
  bool last = dim == x.dim() - 1;
  Tensor moved = last ? x.contiguous() : call_tensor_op("aten::permute", "", {x, perm}).contiguous();
  Tensor out = Tensor::empty(moved.sizes(), t);
  int64_t n = moved.dim() ? moved.sizes().back() : 1;
  int64_t rows = n ? moved.numel() / n : 0;
  TN_DISPATCH_ALL_TYPES(t, "softmax", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    using c = compute_t<scalar_t>;
    if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, double>) {
      if (last && self.dim() > 0 && vml_available()) {
        for (int64_t r = 0; r < rows; ++r)
          softmax_lastdim_row(moved.template data_as<scalar_t>() + r * n,
                              out.template data_as<scalar_t>() + r * n, n, log);
        return;
      }
    }
    std::vector<c> exps;  // each exp computed once, reused for the output
    for (int64_t r = 0; r < rows; ++r) {
      const scalar_t* in = moved.template data_as<scalar_t>() + r * n;
      scalar_t* o = out.template data_as<scalar_t>() + r * n;
      c m = -std::numeric_limits<c>::infinity();
      for (int64_t j = 0; j < n; ++j) m = std::max(m, c(in[j]));
      c total = 0;
      exps.resize(size_t(n));
      for (int64_t j = 0; j < n; ++j) {
        // float32 takes expf (upstream's precision class for float, several times
        // cheaper than exp in double); the sum and the division stay in double.
        if constexpr (std::is_same_v<scalar_t, float>)
          exps[size_t(j)] = c(std::exp(in[j] - float(m)));
        else
          exps[size_t(j)] = std::exp(c(in[j]) - m);
        total += exps[size_t(j)];
      }
      c log_total = std::log(total);
      for (int64_t j = 0; j < n; ++j)
        o[j] = scalar_t(log ? c(in[j]) - m - log_total : exps[size_t(j)] / total);
    }
  });
  if (last) return out.view_as_strided(self.sizes(), contiguous_strides(self.sizes()), 0);
  Shape inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[size_t(perm[i])] = int64_t(i);
  Tensor back = call_tensor_op("aten::permute", "", {out, inverse}).contiguous();
  return back.view_as_strided(self.sizes(), contiguous_strides(self.sizes()), back.offset());
}

Tensor mm(const Tensor& a, const Tensor& b) { return call_tensor_op("aten::mm", "", {a, b}); }
Tensor bmm(const Tensor& a, const Tensor& b) { return call_tensor_op("aten::bmm", "", {a, b}); }

// Upstream's test for folding `t`'s batch into one mm or mv against an operand of `other_dim`
// dimensions: a 3-D tensor whose last two dimensions are transposed in memory (as permute(0, 2, 1)
// leaves them) goes to bmm instead, which would otherwise need a copy.
bool should_fold(const Tensor& t, int64_t other_dim) {
  if (t.dim() < 3 || (other_dim != 1 && other_dim != 2)) return false;
  return !(t.dim() == 3 && other_dim == 2 && t.stride(2) != 1 && t.stride(0) == t.size(1) * t.size(2));
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (a.dim() == 0 || b.dim() == 0)
    throw Error("both arguments to matmul need to be at least 1D, but they are " + std::to_string(a.dim()) +
                "D and " + std::to_string(b.dim()) + "D");
  // As upstream: vector-vector is dot, matrix-vector is mv (BLAS gemv).
  if (a.dim() == 1 && b.dim() == 1) return call_tensor_op("aten::dot", "", {a, b});
  if (a.dim() == 2 && b.dim() == 1) return call_tensor_op("aten::mv", "", {a, b});
  if (a.dim() <= 2 && b.dim() <= 2) {
    // b is 2-D here: the 1-D cases went to dot and mv above.
    Tensor x = a.dim() == 1 ? a.view_as_strided({1, a.size(0)}, {0, a.stride(0)}, a.offset()) : a;
    Tensor r = mm(x, b);
    return a.dim() == 1 ? r.view_as_strided({r.size(1)}, {1}, 0) : r;
  }
  // As upstream: when one side has batch dimensions and the other is a vector or a matrix, the
  // batch folds into the rows of one mm (or mv), the batched side transposed when it is the
  // second, so the bits are the BLAS GEMM's rather than bmm's.
  if (should_fold(a, b.dim()) || should_fold(b, a.dim())) {
    const bool transpose = b.dim() > a.dim();
    auto last_two_swapped = [](const Tensor& t) {
      return call_tensor_op("aten::transpose", "int", {t, int64_t{-2}, int64_t{-1}});
    };
    Tensor t1 = transpose ? last_two_swapped(b) : a;
    Tensor t2 = !transpose ? b : a.dim() == 2 ? last_two_swapped(a) : a;
    Shape out(t1.sizes().begin(), t1.sizes().end() - 1);
    int64_t folded = 1;
    for (int64_t size : out) folded *= size;
    Tensor t1_folded = call_tensor_op("aten::reshape", "", {t1, Shape{folded, t1.size(-1)}});
    if (t2.dim() == 1)
      return call_tensor_op("aten::reshape", "", {call_tensor_op("aten::mv", "", {t1_folded, t2}), out});
    out.push_back(t2.size(1));
    Tensor r = call_tensor_op("aten::reshape", "", {mm(t1_folded, t2), out});
    return transpose ? last_two_swapped(r).contiguous() : r;
  }
  // Batched: broadcast the batch dims, then bmm.
  Tensor x = a.dim() == 1 ? a.view_as_strided({1, a.size(0)}, {0, a.stride(0)}, a.offset()) : a;
  Tensor y = b.dim() == 1 ? b.view_as_strided({b.size(0), 1}, {b.stride(0), 0}, b.offset()) : b;
  Shape bx(x.sizes().begin(), x.sizes().end() - 2), by(y.sizes().begin(), y.sizes().end() - 2);
  Shape batch = broadcast_shapes(bx, by);
  int64_t nb = 1;
  for (int64_t s : batch) nb *= s;
  Shape ex = batch, ey = batch;
  ex.push_back(x.size(-2));
  ex.push_back(x.size(-1));
  ey.push_back(y.size(-2));
  ey.push_back(y.size(-1));
  Tensor xe =
      call_tensor_op("aten::reshape", "",
                     {call_tensor_op("aten::expand", "", {x, ex, false}), Shape{nb, x.size(-2), x.size(-1)}});
  Tensor ye =
      call_tensor_op("aten::reshape", "",
                     {call_tensor_op("aten::expand", "", {y, ey, false}), Shape{nb, y.size(-2), y.size(-1)}});
  Tensor r = bmm(xe, ye);
  Shape out = batch;
  if (a.dim() > 1) out.push_back(x.size(-2));
  if (b.dim() > 1) out.push_back(y.size(-1));
  return call_tensor_op("aten::reshape", "", {r, out});
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
  auto dim = a.optional_integer(1);
  if (!dim && a.tensor(0).numel() == 0)
    throw IndexError("argmin(): Expected reduction dim to be specified for input.numel() == 0.");
  Tensor x = dim ? a.tensor(0) : flat(a.tensor(0));
  Tensor idx = extreme<false>(x, dim.value_or(0), dim ? a.boolean(2) : false, "argmin").second;
  return dim || !a.boolean(2) ? idx
                              : idx.view_as_strided(Shape(size_t(a.tensor(0).dim()), 1),
                                                    Shape(size_t(a.tensor(0).dim()), 1), 0);
});
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

TN_KERNEL("aten::amax", { return amax_amin<true>(a.tensor(0), a.int_list(1), a.boolean(2), "amax"); });
TN_KERNEL("aten::amin", { return amax_amin<false>(a.tensor(0), a.int_list(1), a.boolean(2), "amin"); });
TN_KERNEL("aten::_softmax", { return softmax(a.tensor(0), a.integer(1), std::nullopt, false); });
TN_KERNEL("aten::_log_softmax", { return softmax(a.tensor(0), a.integer(1), std::nullopt, true); });
TN_KERNEL("aten::softmax.int", { return softmax(a.tensor(0), a.integer(1), a.optional_dtype(2), false); });
TN_KERNEL("aten::log_softmax.int", { return softmax(a.tensor(0), a.integer(1), a.optional_dtype(2), true); });
TN_KERNEL("aten::matmul", { return matmul(a.tensor(0), a.tensor(1)); });
// linear: upstream's addmm(bias, x, w.t()) for a 2-D input with bias (one BLAS call
// with beta = 1), else matmul plus bias.
TN_KERNEL("aten::linear", {
  const Tensor& x = a.tensor(0);
  auto bias = a.optional_tensor(2);
  Tensor wt = call_tensor_op("aten::t", "", {a.tensor(1)});
  if (x.dim() == 2 && bias)
    return call_tensor_op("aten::addmm", "", {*bias, x, wt, Scalar(int64_t{1}), Scalar(int64_t{1})});
  // As upstream: a contiguous 3-D input with a bias folds its batch into addmm's rows.
  if (x.dim() == 3 && x.is_contiguous() && bias) {
    Tensor rows = x.view_as_strided({x.size(0) * x.size(1), x.size(2)}, {x.size(2), 1}, x.offset());
    Tensor out = call_tensor_op("aten::addmm", "", {*bias, rows, wt, Scalar(int64_t{1}), Scalar(int64_t{1})});
    return call_tensor_op("aten::reshape", "", {out, Shape{x.size(0), x.size(1), out.size(1)}});
  }
  Tensor out = matmul(x, wt);
  if (bias) out = call_tensor_op("aten::add", "Tensor", {out, *bias, Scalar(int64_t{1})});
  return out;
});

}  // namespace tn
