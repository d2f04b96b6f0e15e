// softmax and log_softmax (and their _softmax kernels).
#include <algorithm>
#include <limits>
#include <vector>

#include "common.h"
#include "typed_ops.h"

namespace tn {

namespace {

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
  Tensor moved = last ? x.contiguous() : ops::permute(x, perm).contiguous();
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
  Tensor back = ops::permute(out, inverse).contiguous();
  return back.view_as_strided(self.sizes(), contiguous_strides(self.sizes()), back.offset());
}

}  // namespace

TN_KERNEL("aten::_softmax", { return softmax(a.tensor(0), a.integer(1), std::nullopt, false); });
TN_KERNEL("aten::_log_softmax", { return softmax(a.tensor(0), a.integer(1), std::nullopt, true); });
TN_KERNEL("aten::softmax.int", { return softmax(a.tensor(0), a.integer(1), a.optional_dtype(2), false); });
TN_KERNEL("aten::log_softmax.int", { return softmax(a.tensor(0), a.integer(1), a.optional_dtype(2), true); });

}  // namespace tn
