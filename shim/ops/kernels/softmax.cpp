// softmax and log_softmax (and their _softmax kernels), and their gradients
// (_softmax_backward_data, _log_softmax_backward_data), in upstream's CPU kernels' arithmetic.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common.h"
#include "settings.h"
#include "typed_ops.h"

namespace tn {

namespace {

// Values in an AVX2 vector of T: upstream's Vectorized<T>::size() on this dispatch.
template <typename T>
constexpr int64_t vector_lanes = 32 / int64_t(sizeof(T));

// The row and column loops call std::fma where upstream's compiler fuses: TN_CLONES, with
// contraction off so that nothing else is fused.
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")

// Upstream's vectorized reduction of a row (vec::reduce_all, map2_reduce_all): a row shorter
// than a vector adds its values in order; else the first vector's values start the lanes,
// `accumulate(lane, i)` adds element i into its lane for each later whole vector and for the
// last partial one (into the first lanes), then the lanes are folded (AVX2 float: across
// halves, then pairs; double: in order).
template <typename T, typename Value, typename Accumulate>
[[gnu::always_inline]] inline T vector_row_reduce(int64_t n, Value value, Accumulate accumulate) {
  constexpr int64_t width = vector_lanes<T>;
  if (n < width) {
    T acc = value(0);
    for (int64_t i = 1; i < n; ++i) acc += value(i);
    return acc;
  }
  T lanes[width];
  for (int64_t l = 0; l < width; ++l) lanes[l] = value(l);
  int64_t i = width;
  for (; i + width <= n; i += width)  // whole vectors, lane by lane (one vector operation)
    for (int64_t l = 0; l < width; ++l) lanes[l] = accumulate(lanes[l], i + l);
  for (int64_t l = 0; i + l < n; ++l) lanes[l] = accumulate(lanes[l], i + l);  // the partial one
  if constexpr (std::is_same_v<T, float>)
    return ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
  else
    return ((lanes[0] + lanes[1]) + lanes[2]) + lanes[3];
}

template <typename T>
T vector_row_sum(const T* x, int64_t n) {
  return vector_row_reduce<T>(
      n, [x](int64_t i) { return x[i]; }, [x](T lane, int64_t i) { return lane + x[i]; });
}

// exp of n values: SLEEF's where upstream's kernel takes its vector path, libm's std::exp
// where it takes its scalar tail (the two differ in the last bit for some inputs).
template <typename T>
void exp_values(const T* in, T* out, int64_t n, bool vector_path) {
  if (vector_path && vml_available()) {
    vml_apply(VmlOp::Exp, in, out, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = std::exp(in[i]);
}

template <typename T>
void log_values(const T* in, T* out, int64_t n) {
  if (vml_available()) {
    vml_apply(VmlOp::Log, in, out, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = std::log(in[i]);
}

// A row's maximum as a loop keeping the first of equal values (x > m ? x : m, one maxss a value,
// no branch to mispredict), and a row holding a NaN its first NaN.
template <typename T>
T row_max(const T* in, int64_t n) {
  T m = in[0];
  bool nan = false;
  for (int64_t j = 0; j < n; ++j) {
    nan |= std::isnan(in[j]);
    m = in[j] > m ? in[j] : m;
  }
  if (nan)
    for (int64_t j = 0; j < n; ++j)
      if (std::isnan(in[j])) return in[j];
  return m;
}

// Upstream's last-dim softmax kernels in the storage type: exp(x - max) through SLEEF,
// the vectorized row sum, then a multiplication by its reciprocal (softmax) or
// (x - max) - log(sum) with SLEEF's log (log_softmax).
// `shifted` and `exps` hold n values each, scratch reused row after row.
template <typename T>
TN_CLONES void softmax_lastdim_row(const T* in, T* out, int64_t n, bool log, T* shifted, T* exps) {
  T m = row_max(in, n);
  for (int64_t j = 0; j < n; ++j) shifted[j] = in[j] - m;
  exp_values(shifted, exps, n, true);
  T sum = vector_row_sum(exps, n);
  if (!log) {
    T reciprocal = T(1) / sum;
    for (int64_t j = 0; j < n; ++j) out[j] = exps[j] * reciprocal;
    return;
  }
  T log_sum;
  log_values(&sum, &log_sum, 1);
  for (int64_t j = 0; j < n; ++j) out[j] = shifted[j] - log_sum;
}

// Rows along the last dim split between threads as upstream's parallel_for over them (rows are
// independent: the split changes no result), each share with its own scratch.
template <typename T, typename F>
void each_lastdim_row(const AlongDim& along, F row) {
  parallel_for(along.outer, units_per_grain(along.size), [&](int64_t begin, int64_t end) {
    std::vector<T> scratch(size_t(2 * along.size));
    for (int64_t r = begin; r < end; ++r) row(r, scratch.data(), scratch.data() + along.size);
  });
}

// Upstream's blocked kernels run each column of the last (inner % lanes) of a block's columns
// scalar, the rest on vectors.
template <typename T>
int64_t vector_columns(const AlongDim& along) {
  return along.inner - along.inner % vector_lanes<T>;
}

// Upstream's at::parallel_for over n items: in one piece with one thread (or n <= grain), else
// in equal shares (the last shorter) among min(threads, ceil(n / grain)) threads.
template <typename F>
void thread_shares(int64_t n, int64_t grain, F f) {
  int64_t threads = intra_op_threads();
  if (n <= 0) return;
  if (n <= grain || n == 1 || threads <= 1) return f(int64_t{0}, n);
  if (grain > 0) threads = std::min(threads, (n + grain - 1) / grain);
  int64_t share = (n + threads - 1) / threads;
  for (int64_t begin = 0; begin < n; begin += share) f(begin, std::min(n, begin + share));
}

// Vectorized<T>'s maximum: NaN if either is, else the larger (b when equal).
template <typename T>
T vector_maximum(T a, T b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  return a > b ? a : b;
}

// softmax of `width` adjacent columns from `column` (_vec_softmax): the max along the dim, then
// exp(x - max) summed from 0, then each exp divided by its column's sum.
template <typename T>
void softmax_columns(const T* in, T* out, const AlongDim& along, int64_t column, int64_t width,
                     bool vector_path) {
  const T* x = in + along.start(column);
  T* y = out + along.start(column);
  std::vector<T> max(x, x + width), sum(size_t(width), T(0)), shifted(static_cast<size_t>(width));
  for (int64_t d = 1; d < along.size; ++d)
    for (int64_t k = 0; k < width; ++k) {
      T v = x[d * along.inner + k];
      max[size_t(k)] = vector_path ? vector_maximum(max[size_t(k)], v) : std::max(max[size_t(k)], v);
    }
  for (int64_t d = 0; d < along.size; ++d) {
    for (int64_t k = 0; k < width; ++k) shifted[size_t(k)] = x[d * along.inner + k] - max[size_t(k)];
    exp_values(shifted.data(), y + d * along.inner, width, vector_path);
    for (int64_t k = 0; k < width; ++k) sum[size_t(k)] += y[d * along.inner + k];
  }
  for (int64_t d = 0; d < along.size; ++d)
    for (int64_t k = 0; k < width; ++k) y[d * along.inner + k] /= sum[size_t(k)];
}

// Upstream's softmax along a dim not last: each thread's share of columns in groups of a
// vector's lanes where a whole group fits in the share and in its block, else column by column.
template <typename T>
void softmax_not_last(const T* in, T* out, const AlongDim& along) {
  constexpr int64_t lanes = vector_lanes<T>;
  thread_shares(along.outer * along.inner, std::max<int64_t>(32768 / along.size, 1),
                [&](int64_t begin, int64_t end) {
                  for (int64_t column = begin; column < end;) {
                    int64_t position = column % along.inner;
                    if (position + lanes <= along.inner && column + lanes <= end) {
                      softmax_columns(in, out, along, column, lanes, true);
                      column += lanes;
                      continue;
                    }
                    int64_t singles = column + lanes > end ? end - column : along.inner - position;
                    for (int64_t i = 0; i < singles; ++i)
                      softmax_columns(in, out, along, column + i, 1, false);
                    column += singles;
                  }
                });
}

// log_softmax of adjacent columns (_vec_logsoftmax): the max from -inf (NaN never wins), exp(x -
// max) summed from 0, the sums' logs through SLEEF, then x - max - log(sum).
template <typename T>
void log_softmax_columns(const T* in, T* out, const AlongDim& along, int64_t column, int64_t width,
                         bool vector_path) {
  const T* x = in + along.start(column);
  T* y = out + along.start(column);
  std::vector<T> max(size_t(width), -std::numeric_limits<T>::infinity()), sum(size_t(width), T(0));
  std::vector<T> shifted(static_cast<size_t>(width)), exps(static_cast<size_t>(width));
  for (int64_t d = 0; d < along.size; ++d)
    for (int64_t k = 0; k < width; ++k) {
      T v = x[d * along.inner + k];
      if (v > max[size_t(k)]) max[size_t(k)] = v;
    }
  for (int64_t d = 0; d < along.size; ++d) {
    for (int64_t k = 0; k < width; ++k) shifted[size_t(k)] = x[d * along.inner + k] - max[size_t(k)];
    exp_values(shifted.data(), exps.data(), width, vector_path);
    for (int64_t k = 0; k < width; ++k) sum[size_t(k)] += exps[size_t(k)];
  }
  log_values(sum.data(), sum.data(), width);
  for (int64_t d = 0; d < along.size; ++d)
    for (int64_t k = 0; k < width; ++k)
      y[d * along.inner + k] = x[d * along.inner + k] - max[size_t(k)] - sum[size_t(k)];
}

// Calls f(column, width, vector_path) over every block's columns: the vector ones, then the rest.
template <typename T, typename F>
void blocked_columns(const AlongDim& along, F f) {
  int64_t vector_width = vector_columns<T>(along);
  for (int64_t block = 0; block < along.outer; ++block) {
    if (vector_width > 0) f(block * along.inner, vector_width, true);
    if (vector_width < along.inner) f(block * along.inner + vector_width, along.inner - vector_width, false);
  }
}

template <typename T>
void softmax_forward(const T* in, T* out, const Shape& sizes, int64_t dim, bool log) {
  bool last = dim == int64_t(sizes.size()) - 1 || sizes.empty();
  AlongDim along(sizes, dim);
  if (last) {
    each_lastdim_row<T>(along, [&](int64_t r, T* shifted, T* exps) {
      softmax_lastdim_row(in + r * along.size, out + r * along.size, along.size, log, shifted, exps);
    });
  } else if (log) {
    blocked_columns<T>(along, [&](int64_t column, int64_t width, bool vector_path) {
      log_softmax_columns(in, out, along, column, width, vector_path);
    });
  } else {
    softmax_not_last(in, out, along);
  }
}

Tensor softmax(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype, bool log) {
  ScalarType t = dtype.value_or(self.dtype());
  if (!is_floating(t) || t == ScalarType::Half)
    dtype_not_implemented(log ? "log_softmax_lastdim_kernel_impl" : "softmax_lastdim_kernel_impl", t);
  // bfloat16 is computed in float and rounded once.
  ScalarType compute = t == ScalarType::BFloat16 ? ScalarType::Float : t;
  Tensor x = self.to(compute).contiguous();
  dim = wrap_dim(dim, std::max<int64_t>(x.dim(), 1));
  Tensor out = Tensor::empty(x.sizes(), compute);
  if (out.is_meta()) return out.to(t);  // the meta device: the shape and dtype are the result
  if (x.numel() > 0)
    TN_DISPATCH_ALL_TYPES(compute, "softmax", [&](auto tag_) {
      using scalar_t = TN_TYPE(tag_);
      if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, double>)
        softmax_forward(x.template data_as<scalar_t>(), out.template data_as<scalar_t>(), x.sizes(), dim,
                        log);
    });
  return out.to(t);
}

// Gradients, from the forward's result y and the incoming gradient g: softmax's y (g - sum(g y)),
// log_softmax's g - exp(y) sum(g), each sum along the dim. Upstream's kernel file is compiled
// for AVX2 with FMA and floating-point contraction, which fuses a product with the sum or
// difference that takes it, on vectors and scalars alike: those round once here (std::fma).

// A row along the last dim (_vec_host_softmax_backward_lastdim): the vectorized row sum of g
// (log_softmax) or of the products g y (softmax, fused into the lanes after the first vector),
// then every element with SLEEF's exp.
template <typename T>
TN_CLONES void softmax_backward_row(const T* g, const T* y, T* gi, int64_t n, bool log, T* exps) {
  if (log) {
    T sum = vector_row_sum(g, n);
    exp_values(y, exps, n, true);
    for (int64_t j = 0; j < n; ++j) gi[j] = std::fma(-exps[j], sum, g[j]);
    return;
  }
  T sum = vector_row_reduce<T>(
      n, [&](int64_t i) { return g[i] * y[i]; },
      [&](T lane, int64_t i) { return std::fma(g[i], y[i], lane); });
  for (int64_t j = 0; j < n; ++j) gi[j] = (g[j] - sum) * y[j];
}

// Adjacent columns along a dim not last (_vec_softmax_backward, _vec_log_softmax_backward): each
// column's sum from 0 down the dim, then every element.
template <typename T>
TN_CLONES void softmax_backward_columns(const T* g, const T* y, T* gi, const AlongDim& along, int64_t column,
                                        int64_t width, bool vector_path, bool log) {
  int64_t at = along.start(column);
  g += at, y += at, gi += at;
  std::vector<T> sum(size_t(width), T(0)), exps(static_cast<size_t>(width));
  for (int64_t d = 0; d < along.size; ++d)
    for (int64_t k = 0; k < width; ++k) {
      int64_t i = d * along.inner + k;
      T& s = sum[size_t(k)];
      s = log ? s + g[i] : std::fma(g[i], y[i], s);
    }
  for (int64_t d = 0; d < along.size; ++d) {
    int64_t row = d * along.inner;
    if (!log) {
      for (int64_t k = 0; k < width; ++k) gi[row + k] = y[row + k] * (g[row + k] - sum[size_t(k)]);
      continue;
    }
    exp_values(y + row, exps.data(), width, vector_path);
    for (int64_t k = 0; k < width; ++k) gi[row + k] = std::fma(-exps[size_t(k)], sum[size_t(k)], g[row + k]);
  }
}

template <typename T>
void softmax_backward(const T* g, const T* y, T* gi, const Shape& sizes, int64_t dim, bool log) {
  AlongDim along(sizes, dim);
  if (dim == int64_t(sizes.size()) - 1 || sizes.empty()) {
    each_lastdim_row<T>(along, [&](int64_t r, T*, T* exps) {
      softmax_backward_row(g + r * along.size, y + r * along.size, gi + r * along.size, along.size, log,
                           exps);
    });
    return;
  }
  blocked_columns<T>(along, [&](int64_t column, int64_t width, bool vector_path) {
    softmax_backward_columns(g, y, gi, along, column, width, vector_path, log);
  });
}

#pragma GCC pop_options

// _softmax_backward_data / _log_softmax_backward_data: the gradient of the forward's input,
// contiguous in grad's dtype; bfloat16 computed in float and rounded once.
Tensor softmax_backward_data(const Tensor& grad, const Tensor& output, int64_t dim, bool log) {
  if (grad.sizes() != output.sizes())
    throw Error(
        "Expected tensor for argument #1 'grad_output' to have the same size as tensor for argument #2 "
        "'output'; but " +
        shape_str(grad.sizes()) + " does not equal " + shape_str(output.sizes()) +
        " (while checking arguments for " + (log ? "log_softmax_backward" : "softmax_backward") + ")");
  ScalarType t = grad.dtype();
  if (t != ScalarType::Float && t != ScalarType::Double && t != ScalarType::BFloat16)
    dtype_not_implemented(
        log ? "log_softmax_backward_lastdim_kernel_impl" : "softmax_backward_lastdim_kernel_impl", t);
  dim = wrap_dim(dim, std::max<int64_t>(grad.dim(), 1));
  ScalarType compute = t == ScalarType::BFloat16 ? ScalarType::Float : t;
  Tensor g = grad.to(compute).contiguous(), y = output.to(compute).contiguous();
  Tensor gi = Tensor::empty(grad.sizes(), compute);
  if (gi.numel() > 0 && !gi.is_meta())  // the meta device: the shape is the result
    TN_DISPATCH_ALL_TYPES(compute, "softmax_backward", [&](auto tag_) {
      using scalar_t = TN_TYPE(tag_);
      if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, double>)
        softmax_backward(g.template data_as<scalar_t>(), y.template data_as<scalar_t>(),
                         gi.template data_as<scalar_t>(), grad.sizes(), dim, log);
    });
  return gi.to(t);
}

}  // namespace

TN_KERNEL("aten::_softmax", { return softmax(a.tensor(0), a.integer(1), std::nullopt, false); });
TN_KERNEL("aten::_log_softmax", { return softmax(a.tensor(0), a.integer(1), std::nullopt, true); });
TN_KERNEL("aten::softmax.int", { return softmax(a.tensor(0), a.integer(1), a.optional_dtype(2), false); });
TN_KERNEL("aten::log_softmax.int", { return softmax(a.tensor(0), a.integer(1), a.optional_dtype(2), true); });
TN_KERNEL("aten::_softmax_backward_data",
          { return softmax_backward_data(a.tensor(0), a.tensor(1), a.integer(2), false); });
TN_KERNEL("aten::_log_softmax_backward_data",
          { return softmax_backward_data(a.tensor(0), a.tensor(1), a.integer(2), true); });

}  // namespace tn
