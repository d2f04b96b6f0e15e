// Normalization layers: batch_norm, layer_norm, group_norm, instance_norm.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

#include "common.h"
#include "settings.h"
#include "typed_ops.h"

#pragma GCC diagnostic ignored "-Wpsabi"  // see Lanes

namespace tn {

namespace {

// Normalizes `x` viewed as (outer, inner) rows: (x - mean) / sqrt(var + eps), biased var.
Tensor normalize_rows(const Tensor& x, int64_t outer, double eps) {
  Tensor rows = ops::reshape(x, Shape{outer, outer ? x.numel() / outer : 0});
  Tensor mean = ops::mean(rows, std::vector<int64_t>{1}, true, std::nullopt);
  Tensor var = ops::var_correction(rows, std::vector<int64_t>{1}, int64_t{0}, true);
  Tensor normalized = ops::div(ops::sub(rows, mean), ops::sqrt(ops::add(var, float_number(eps))));
  return ops::reshape(normalized, x.sizes());
}

// Shape (1, C, 1, ...) for per-channel parameters of an (N, C, ...) input.
Tensor affine(Tensor y, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, int64_t ndim,
              bool channel) {
  if (weight) y = ops::mul(y, channel ? per_channel(*weight, ndim) : *weight);
  if (bias) y = ops::add(y, channel ? per_channel(*bias, ndim) : *bias);
  return y;
}

// ---- batch_norm: upstream's CPU kernels for float and double ----
// aten/src/ATen/native/cpu/batch_norm_kernel.cpp (compiled for AVX2 with FMA: its compiler
// contracts each multiply feeding an add) and Normalization.cpp's statistics update (compiled
// without), at one thread, over contiguous memory. An (N, C, *) input is N x C planes of
// `image` values; with image 1 (NC11) upstream takes its channels-last kernels, which see rows
// of C values and accumulate in the storage type.
struct BatchNormShape {
  int64_t batch = 0, channels = 0, image = 0;
  int64_t count() const { return batch * image; }  // values per channel
};

BatchNormShape batch_norm_shape(const Tensor& x) {
  int64_t n = x.size(0), c = x.size(1);
  return {n, c, n != 0 && c != 0 ? x.numel() / (n * c) : 0};
}

// The hot loops (batch norm's and layer norm's) as TN_CLONES, with contraction off, so both
// clones round exactly where upstream's kernels do: the FMAs its compiler forms are written out
// as std::fma, nothing else is fused.
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")

// Upstream's Vectorized<T> width on AVX2.
template <typename T>
constexpr int64_t kLanes = 32 / int64_t(sizeof(T));

// A vector's worth of T as a GCC vector, aligned as T (so that a std::vector may hold them):
// whole-vector arithmetic in registers, each lane computing what a scalar would. Functions and
// lambdas taking or returning one are all inlined into the kernels below, so no call passes
// one (-Wpsabi, which warns of calls that would, is off for this file: GCC reports the lambdas
// at its end).
template <typename T>
using Lanes [[gnu::vector_size(32), gnu::aligned(alignof(T))]] = T;

// The whole vector of p's elements from index `first`, in a reduction's terms (at()).
struct Block {
  int64_t first;
};
template <typename T>
[[gnu::always_inline]] inline T at(const T* p, int64_t j) {
  return p[j];
}
template <typename T>
[[gnu::always_inline]] inline Lanes<T> at(const T* p, Block b) {
  Lanes<T> v;
  std::memcpy(&v, p + b.first, sizeof v);
  return v;
}

// a * b + c rounded once, for one value or lane by lane (one vector FMA in the x86-64-v3 clone).
template <typename V>
[[gnu::always_inline]] inline V multiply_add(const V& a, const V& b, const V& c) {
  if constexpr (std::is_floating_point_v<V>) {
    return std::fma(a, b, c);
  } else {
    V r;
    for (int64_t l = 0; l < int64_t(sizeof(V) / sizeof(a[0])); ++l) r[l] = std::fma(a[l], b[l], c[l]);
    return r;
  }
}

// A vector's lanes added up as upstream's vec_reduce_all does on AVX2: float across halves,
// then pairs; double in order.
template <typename T>
[[gnu::always_inline]] inline T fold_lanes(const Lanes<T>& l) {
  if constexpr (kLanes<T> == 8)
    return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
  else
    return ((l[0] + l[1]) + l[2]) + l[3];
}

// Upstream's vec::reduce_all / map2_reduce_all over n values: none 0; fewer than a vector, the
// terms added in order; else the first vector's terms, each later whole vector through
// accumulate, the last partial one into the first lanes, then the lanes folded. `term(out, j)`
// sets and `accumulate(acc, j)` adds to one value (j an index: at(p, j)) or a vector (j a
// Block), through references: a lambda passing a vector by value draws -Wpsabi at the end of
// the translation unit, where no pragma reaches.
template <typename T, typename Term, typename Accumulate>
[[gnu::always_inline]] inline T vector_reduce(int64_t n, Term term, Accumulate accumulate) {
  constexpr int64_t width = kLanes<T>;
  if (n == 0) return T(0);
  if (n < width) {  // each term rounded, then added (no FMA)
    T acc, next;
    term(acc, int64_t{0});
    for (int64_t j = 1; j < n; ++j) {
      term(next, j);
      acc += next;
    }
    return acc;
  }
  Lanes<T> lanes;
  term(lanes, Block{0});
  int64_t d = width;
  for (; d + width <= n; d += width) accumulate(lanes, Block{d});
  for (int64_t l = 0; d + l < n; ++l) {
    T lane = lanes[l];
    accumulate(lane, d + l);
    lanes[l] = lane;
  }
  return fold_lanes<T>(lanes);
}

// Calls f(i) for every i < n, in whole vectors of a fixed length first (which the compiler
// turns into vector instructions), then the rest.
template <typename T, typename F>
[[gnu::always_inline]] inline void elementwise(int64_t n, F f) {
  int64_t i = 0;
  for (; i + kLanes<T> <= n; i += kLanes<T>)
#pragma GCC unroll 8
    for (int64_t l = 0; l < kLanes<T>; ++l) f(i + l);
  for (; i < n; ++i) f(i);
}

// Rows (NC11): per channel, the sum and then the squared deviations, each accumulated down
// the rows in the storage type (upstream's one-thread buffer), the squares as FMAs.
template <typename T>
TN_CLONES void row_moments(const T* x, BatchNormShape s, T* mean, T* var_sum) {
  int64_t channels = s.channels;
  std::vector<T> acc(size_t(channels), T(0));
  for (int64_t r = 0; r < s.batch; ++r)
    for (int64_t c = 0; c < channels; ++c) acc[size_t(c)] += x[r * channels + c];
  for (int64_t c = 0; c < channels; ++c) {
    mean[c] = T(double(acc[size_t(c)]) / double(s.batch));
    acc[size_t(c)] = T(0);
  }
  for (int64_t r = 0; r < s.batch; ++r)
    for (int64_t c = 0; c < channels; ++c) {
      T d = x[r * channels + c] - mean[c];
      acc[size_t(c)] = std::fma(d, d, acc[size_t(c)]);
    }
  std::copy(acc.begin(), acc.end(), var_sum);
}

// Planes: per channel, the sum in input order in double, the mean, then the squared deviations
// in input order in double, each square rounded in the storage type first. Upstream's compiler
// vectorizes the double kernel's plane loop in vectors of 4, then 2, and contracts only the
// scalar square left over: a plane of odd length adds its last square as an FMA (bits say).
// Upstream walks one channel at a time, each sum a chain of dependent adds; these walk a group
// of up to Chains channels [first, last) at once (the group's last channel repeated in the spare
// chains), the same order per channel, so the chains overlap in time.
template <typename T, int64_t Chains>
TN_CLONES void plane_moments(const T* x, BatchNormShape s, int64_t first, int64_t last, T* mean, T* var_sum) {
  std::array<int64_t, Chains> channel;
  for (int64_t k = 0; k < Chains; ++k) channel[size_t(k)] = std::min(first + k, last - 1);
  auto walk = [&](auto&& add) {
    for (int64_t n = 0; n < s.batch; ++n) {
      std::array<const T*, Chains> p;
      for (size_t k = 0; k < size_t(Chains); ++k) p[k] = x + (n * s.channels + channel[k]) * s.image;
      for (int64_t i = 0; i < s.image; ++i) {
        bool last_of_odd_plane = s.image % 2 == 1 && i == s.image - 1;
        // Unrolled, so that each chain's sum stays in a register (a loop kept them in memory,
        // each add waiting on the last one's store).
#pragma GCC unroll 8
        for (size_t k = 0; k < size_t(Chains); ++k) add(k, p[k][i], last_of_odd_plane);
      }
    }
  };
  std::array<double, Chains> sum{}, squares{};
  std::array<T, Chains> m;
  walk([&](size_t k, T v, bool) { sum[k] += double(v); });
  for (size_t k = 0; k < size_t(Chains); ++k) m[k] = T(sum[k] / double(s.count()));
  walk([&](size_t k, T v, bool last_of_odd_plane) {
    T d = v - m[k];
    if constexpr (std::is_same_v<T, double>)
      squares[k] = last_of_odd_plane ? std::fma(d, d, squares[k]) : squares[k] + d * d;
    else
      squares[k] += double(d * d);
  });
  for (int64_t k = 0; k < Chains && first + k < last; ++k) {
    mean[first + k] = m[size_t(k)];
    var_sum[first + k] = T(squares[size_t(k)]);
  }
}

// y = x * alpha + beta per channel over planes [first, last) of the N x C, one FMA as in
// upstream's vector loop.
template <typename T>
TN_CLONES void apply_affine(const T* __restrict x, T* __restrict y, BatchNormShape s, const T* alpha,
                            const T* beta, int64_t first, int64_t last) {
  for (int64_t plane = first; plane < last; ++plane) {
    int64_t base = plane * s.image, c = plane % s.channels;
    T a = alpha[c], b = beta[c];
    elementwise<T>(s.image, [=](int64_t i) { y[base + i] = std::fma(x[base + i], a, b); });
  }
}

// The backward's operands over raw memory (weight, dx, grad_weight, grad_bias may be null).
template <typename T>
struct BackwardArgs {
  const T *x, *dy, *weight, *mean, *invstd;
  T *dx, *grad_weight, *grad_bias;
  BatchNormShape s;
  bool train;
};

// What one channel's dx is made from: its statistics and weight, and in training the
// projection factor k and the mean gradient; `fused` where upstream's compiler made an FMA.
template <typename T>
struct ChannelGrad {
  T mean, invstd, w, k, grad_mean;
  bool train, fused;
};

// One channel's dx as upstream's vector loops round it: training takes away the mean gradient
// and the projection onto the normalized input, evaluation only scales. n values `step` apart
// at restrict pointers; a loop per case, so that the compiler vectorizes them (choices made per
// element kept it scalar).
template <typename T, typename Step>
[[gnu::always_inline]] inline void grad_input_loop(const T* __restrict x, const T* __restrict dy,
                                                   T* __restrict dx, int64_t n, Step step, ChannelGrad<T> g) {
  if (!g.train) {
    elementwise<T>(n, [=](int64_t i) { dx[i * step] = dy[i * step] * g.invstd * g.w; });
  } else if (g.fused) {
    elementwise<T>(n, [=](int64_t i) {
      T centred = x[i * step] - g.mean;
      dx[i * step] = std::fma(-centred, g.k, dy[i * step] - g.grad_mean) * g.invstd * g.w;
    });
  } else {
    elementwise<T>(n, [=](int64_t i) {
      T centred = x[i * step] - g.mean;
      dx[i * step] = ((dy[i * step] - g.grad_mean) - centred * g.k) * g.invstd * g.w;
    });
  }
}

// The same with a stride of 1 known to the compiler where it is 1 (planes).
template <typename T>
[[gnu::always_inline]] inline void channel_grad_input(const T* x, const T* dy, T* dx, int64_t n,
                                                      int64_t stride, ChannelGrad<T> g) {
  if (stride == 1)
    grad_input_loop(x, dy, dx, n, std::integral_constant<int64_t, 1>{}, g);
  else
    grad_input_loop(x, dy, dx, n, stride, g);
}

// Rows (NC11): sum(dy) and sum((x - mean) dy) accumulated down the rows in the storage type
// (the second as FMAs), then k and the mean gradient in the storage type too.
template <typename T>
TN_CLONES void row_backward(const BackwardArgs<T>& a) {
  int64_t channels = a.s.channels, rows = a.s.batch;
  std::vector<T> sum(size_t(channels), T(0)), dotp(size_t(channels), T(0));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < channels; ++c) {
      int64_t i = r * channels + c;
      sum[size_t(c)] += a.dy[i];
      dotp[size_t(c)] = std::fma(a.x[i] - a.mean[c], a.dy[i], dotp[size_t(c)]);
    }
  // Upstream's compiler contracts the double kernel's whole vectors of channels but not its last
  // partial one (bits say; float's both).
  int64_t fused_channels = std::is_same_v<T, float> ? channels : channels - channels % kLanes<T>;
  for (int64_t c = 0; a.dx && c < channels; ++c) {
    T invstd = a.invstd[c], w = a.weight ? a.weight[c] : T(1);
    T k = dotp[size_t(c)] * invstd * invstd / T(rows), grad_mean = sum[size_t(c)] / T(rows);
    ChannelGrad<T> g{a.mean[c], invstd, w, k, grad_mean, a.train, c < fused_channels};
    channel_grad_input(a.x + c, a.dy + c, a.dx + c, rows, channels, g);
  }
  for (int64_t c = 0; c < channels; ++c) {
    if (a.grad_weight) a.grad_weight[c] = dotp[size_t(c)] * a.invstd[c];
    if (a.grad_bias) a.grad_bias[c] = sum[size_t(c)];
  }
}

// Planes of channels [first, last): per channel and sample, sum(dy) and sum((x - mean) dy) in
// upstream's vector order (the dot product's later vectors as FMAs), added over the samples in
// double.
template <typename T>
TN_CLONES void plane_backward(const BackwardArgs<T>& a, int64_t first, int64_t last) {
  int64_t image = a.s.image, count = a.s.count();
  for (int64_t c = first; c < last; ++c) {
    T mean = a.mean[c];
    double sum = 0, dotp = 0;
    for (int64_t n = 0; n < a.s.batch; ++n) {
      const T* x = a.x + (n * a.s.channels + c) * image;
      const T* dy = a.dy + (n * a.s.channels + c) * image;
      sum += double(vector_reduce<T>(
          image, [&](auto& out, auto j) { out = at(dy, j); }, [&](auto& acc, auto j) { acc += at(dy, j); }));
      dotp += double(vector_reduce<T>(
          image, [&](auto& out, auto j) { out = (at(x, j) - mean) * at(dy, j); },
          [&](auto& acc, auto j) { acc = multiply_add(at(x, j) - mean, at(dy, j), acc); }));
    }
    T k = T(dotp) * a.invstd[c] * a.invstd[c] / T(count), grad_mean = T(sum / double(count));
    ChannelGrad<T> g{mean, a.invstd[c], a.weight ? a.weight[c] : T(1), k, grad_mean, a.train, true};
    for (int64_t n = 0; a.dx && n < a.s.batch; ++n) {
      int64_t base = (n * a.s.channels + c) * image;
      channel_grad_input(a.x + base, a.dy + base, a.dx + base, image, 1, g);
    }
    if (a.grad_weight) a.grad_weight[c] = T(dotp * double(a.invstd[c]));
    if (a.grad_bias) a.grad_bias[c] = T(sum);
  }
}

// Channels (and planes) are independent: each computed in one thread, in the order above,
// whichever thread (upstream splits them the same way).

// Per channel: the mean and the sum of squared deviations from it, in groups of 8 channels, or
// of 4, 2 or 1 where that keeps every thread busy (8 channels on 2 threads: 2 groups of 4; a
// group's walk costs its chains, used or not).
template <typename T>
void channel_moments(const T* x, BatchNormShape s, T* mean, T* var_sum) {
  if (s.image == 1) return row_moments(x, s, mean, var_sum);
  int64_t per_thread = (s.channels + intra_op_threads() - 1) / intra_op_threads();
  int64_t chains = per_thread >= 8 ? 8 : per_thread >= 4 ? 4 : per_thread >= 2 ? 2 : 1;
  auto moments = chains == 8   ? plane_moments<T, 8>
                 : chains == 4 ? plane_moments<T, 4>
                 : chains == 2 ? plane_moments<T, 2>
                               : plane_moments<T, 1>;
  int64_t groups = (s.channels + chains - 1) / chains;
  parallel_for(groups, std::max<int64_t>(1, units_per_grain(s.count()) / chains),
               [&](int64_t begin, int64_t end) {
                 for (int64_t g = begin; g < end; ++g)
                   moments(x, s, g * chains, std::min(s.channels, (g + 1) * chains), mean, var_sum);
               });
}

template <typename T>
void channel_affine(const T* x, T* y, BatchNormShape s, const T* alpha, const T* beta) {
  parallel_for(s.batch * s.channels, units_per_grain(s.image),
               [&](int64_t begin, int64_t end) { apply_affine(x, y, s, alpha, beta, begin, end); });
}

template <typename T>
void channel_backward(const BackwardArgs<T>& a) {
  if (a.s.image == 1) return row_backward(a);
  parallel_for(a.s.channels, units_per_grain(a.s.count()),
               [&](int64_t begin, int64_t end) { plane_backward(a, begin, end); });
}

// Upstream's checks of the per-channel tensors, in its order: sizes, then its mixed-type rule
// (a float32 parameter set for a bfloat16 input; anything else must match the input's dtype).
void check_batch_norm_parameters(const Tensor& input,
                                 const std::vector<std::pair<const char*, const Tensor*>>& params) {
  int64_t channels = input.size(1);
  bool mixed = false;
  for (auto [name, p] : params) {
    if (!p) continue;
    if (p->numel() != channels)
      throw Error(std::string(name) + " should contain " + std::to_string(channels) + " elements not " +
                  std::to_string(p->numel()));
    mixed = mixed || p->dtype() != input.dtype();
  }
  if (!mixed) return;
  for (auto [name, p] : params)
    if (p && p->dtype() != ScalarType::Float)
      throw Error("mixed dtype (CPU): expect parameter to have scalar type of Float");
  if (input.dtype() != ScalarType::BFloat16)
    throw Error("mixed dtype (CPU): expect input to have scalar type of BFloat16");
}

// A [C] tensor's values as T (empty when absent).
template <typename T>
std::vector<T> channel_values(const std::optional<Tensor>& p, ScalarType t) {
  if (!p) return {};
  Tensor c = p->to(t).contiguous();
  return std::vector<T>(c.data_as<T>(), c.data_as<T>() + c.numel());
}

// Writes per-channel values into an optional [C] tensor (the running statistics).
template <typename T>
void store_channel_values(const std::optional<Tensor>& target, const std::vector<T>& values) {
  if (!target) return;
  Tensor src = Tensor::empty({int64_t(values.size())},
                             std::is_same_v<T, double> ? ScalarType::Double : ScalarType::Float);
  std::copy(values.begin(), values.end(), src.data_as<T>());
  target->copy_from(src);
}

// ---- batch_norm over strided memory: upstream's generic path (Normalization.cpp, compiled
// without FMA), taken for an input (in the backward, an input or a gradient) that is not
// dense in a standard layout: the mean and the gradient's sum by at::mean and at::sum, the
// rest per channel, its reductions accumulated in double in TensorIterator's order and its
// elementwise steps rounded in T one by one. ----

// Whether `t` is dense with its dims laid out in this order, fastest first (size-1 dims free).
bool dense_in_order(const Tensor& t, const std::vector<int64_t>& fastest_first) {
  int64_t expected = 1;
  for (int64_t d : fastest_first) {
    if (t.sizes()[size_t(d)] != 1 && t.strides()[size_t(d)] != expected) return false;
    expected *= t.sizes()[size_t(d)];
  }
  return true;
}

// Upstream's is_contiguous there: dense row-major, or channels-last for 4-d and 5-d.
bool upstream_contiguous(const Tensor& t) {
  if (t.is_contiguous()) return true;
  if (t.dim() == 4) return dense_in_order(t, {1, 3, 2, 0});
  return t.dim() == 5 && dense_in_order(t, {1, 4, 3, 2, 0});
}

// Every dim but the channels' (upstream's reduce_dims).
std::vector<int64_t> non_channel_dims(const Tensor& x) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

// Channel c of each (N, C, *) operand, its values in the order one serial loop over them all
// visits them (the first operand's strides lead).
template <typename T>
std::vector<std::vector<T>> channel_walk(const std::vector<Tensor>& operands, int64_t c) {
  std::vector<Tensor> planes;
  for (const Tensor& t : operands) planes.push_back(ops::select(t, 1, c));
  std::vector<std::vector<T>> values;
  for (const Tensor& view : in_iteration_order(planes)) {
    Tensor dense = view.contiguous();
    values.emplace_back(dense.data_as<T>(), dense.data_as<T>() + dense.numel());
  }
  return values;
}

// The batch's mean (at::mean) and biased variance in double, the running statistics updated
// in double with the double momentum.
template <typename T>
std::pair<Tensor, std::vector<double>> strided_statistics(const Tensor& x,
                                                          const std::optional<Tensor>& running_mean,
                                                          const std::optional<Tensor>& running_var,
                                                          double momentum) {
  ScalarType t = x.dtype();
  int64_t channels = x.size(1), count = x.numel() / channels;
  Tensor mean = ops::mean(x, non_channel_dims(x), false, std::nullopt).contiguous();
  std::vector<T> rm = channel_values<T>(running_mean, t), rv = channel_values<T>(running_var, t);
  std::vector<double> variance(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    double m = double(mean.data_as<T>()[c]), squares = 0;
    std::vector<std::vector<T>> walk = channel_walk<T>({x}, c);
    for (T v : walk[0]) squares += (double(v) - m) * (double(v) - m);
    variance[size_t(c)] = squares / double(count);
    if (running_mean) rm[size_t(c)] = T(momentum * m + (1 - momentum) * double(rm[size_t(c)]));
    if (running_var)
      rv[size_t(c)] = T(momentum * (squares / double(count - 1)) + (1 - momentum) * double(rv[size_t(c)]));
  }
  store_channel_values(running_mean, rm);
  store_channel_values(running_var, rv);
  return {mean, variance};
}

// y = ((x - mean) invstd) w + b, each step rounded in T; a contiguous output.
template <typename T>
Tensor strided_transform(const Tensor& x, const std::vector<T>& mean, const std::vector<T>& invstd,
                         const std::vector<T>& weight, const std::vector<T>& bias) {
  Tensor out = Tensor::empty(x.sizes(), x.dtype());
  for (int64_t c = 0; c < x.size(1); ++c) {
    T m = mean[size_t(c)], i = invstd[size_t(c)];
    T w = weight.empty() ? T(1) : weight[size_t(c)], b = bias.empty() ? T(0) : bias[size_t(c)];
    Tensor plane = ops::select(x, 1, c).contiguous();
    Tensor result = Tensor::empty(plane.sizes(), x.dtype());
    for (int64_t j = 0; j < plane.numel(); ++j)
      result.data_as<T>()[j] = ((plane.data_as<T>()[j] - m) * i) * w + b;
    ops::select(out, 1, c).copy_from(result);
  }
  return out;
}

// One channel's dx on the strided path: training takes away the mean gradient and the
// projection (x - mean) k, evaluation only scales.
template <typename T>
Tensor strided_channel_grad_input(const Tensor& x, const Tensor& grad, int64_t c, ChannelGrad<T> g) {
  Tensor xs = ops::select(x, 1, c).contiguous(), gs = ops::select(grad, 1, c).contiguous();
  Tensor dx = Tensor::empty(xs.sizes(), x.dtype());
  const T *pi = xs.data_as<T>(), *pg = gs.data_as<T>();
  for (int64_t j = 0; j < xs.numel(); ++j) {
    T v = g.train ? (pg[j] - g.grad_mean) - (pi[j] - g.mean) * g.k : pg[j];
    dx.data_as<T>()[j] = v * g.invstd * g.w;
  }
  return dx;
}

// native_batch_norm_backward on the strided path; weight empty when absent.
template <typename T>
std::tuple<Tensor, Tensor, Tensor> strided_batch_norm_backward(const Tensor& grad, const Tensor& x,
                                                               const std::vector<T>& weight,
                                                               const std::vector<T>& mean,
                                                               const std::vector<T>& invstd, bool train,
                                                               const std::vector<bool>& mask) {
  ScalarType t = x.dtype();
  int64_t channels = x.size(1), count = x.numel() / channels;
  Tensor sum = ops::sum(grad, non_channel_dims(x), false, std::nullopt).contiguous();
  Tensor dx = mask[0] ? Tensor::empty(x.sizes(), t) : Tensor();
  Tensor dw = mask[1] ? Tensor::empty({channels}, t) : Tensor();
  Tensor db = mask[2] ? Tensor::empty({channels}, t) : Tensor();
  for (int64_t c = 0; c < channels; ++c) {
    T m = mean[size_t(c)], inv = invstd[size_t(c)], s = sum.data_as<T>()[c];
    std::vector<std::vector<T>> walk = channel_walk<T>({x, grad}, c);
    double dotp = 0;
    for (size_t j = 0; j < walk[0].size(); ++j) dotp += double((walk[0][j] - m) * walk[1][j]);
    T k = T(dotp) * inv * inv / T(count), grad_mean = s / T(count);
    ChannelGrad<T> g{m, inv, weight.empty() ? T(1) : weight[size_t(c)], k, grad_mean, train, false};
    if (dx.defined()) ops::select(dx, 1, c).copy_from(strided_channel_grad_input(x, grad, c, g));
    if (dw.defined()) dw.data_as<T>()[c] = T(dotp * double(inv));
    if (db.defined()) db.data_as<T>()[c] = s;
  }
  return {dx, dw, db};
}

// One batch's statistics of a contiguous float or double input: the mean and the biased
// variance (the sum of squares divided in T, as upstream divides it), with the running
// statistics updated as Normalization.cpp does (in its types: the momentum as T, the unbiased
// variance divided in T and mixed in double).
template <typename T>
std::pair<Tensor, Tensor> batch_statistics(const Tensor& x, const std::optional<Tensor>& running_mean,
                                           const std::optional<Tensor>& running_var, double momentum) {
  ScalarType t = x.dtype();
  BatchNormShape s = batch_norm_shape(x);
  Tensor mean = Tensor::empty({s.channels}, t), var = Tensor::empty({s.channels}, t);
  std::vector<T> var_sum(size_t(s.channels));
  channel_moments(x.data_as<T>(), s, mean.data_as<T>(), var_sum.data());
  std::vector<T> rm = channel_values<T>(running_mean, t), rv = channel_values<T>(running_var, t);
  T m = T(momentum);
  for (int64_t c = 0; c < s.channels; ++c) {
    var.data_as<T>()[c] = var_sum[size_t(c)] / T(s.count());
    if (running_mean) rm[size_t(c)] = m * mean.data_as<T>()[c] + (1 - m) * rm[size_t(c)];
    if (running_var) {
      T unbiased = var_sum[size_t(c)] / T(s.count() - 1);
      rv[size_t(c)] = T(double(m) * double(unbiased) + double((1 - m) * rv[size_t(c)]));
    }
  }
  store_channel_values(running_mean, rm);
  store_channel_values(running_var, rv);
  return {mean, var};
}

// Upstream's InvStd of a biased variance, in double.
double inverse_std(double var, double eps) { return var != 0 || eps != 0 ? 1 / std::sqrt(var + eps) : 0; }

// What native_batch_norm normalizes with: save_mean and save_invstd (empty in evaluation) and
// the per-channel mean and invstd as T.
template <typename T>
struct Normalizer {
  Tensor save_mean, save_invstd;
  std::vector<T> mean, invstd;
};

// Training: the batch's statistics (the running ones updated); evaluation: the running ones,
// invstd computed in T.
template <typename T>
Normalizer<T> normalizer(const Tensor& x, const std::optional<Tensor>& running_mean,
                         const std::optional<Tensor>& running_var, bool training, double momentum,
                         double eps) {
  ScalarType t = x.dtype();
  int64_t channels = x.size(1);
  Normalizer<T> n{Tensor::empty({0}, t), Tensor::empty({0}, t), {}, std::vector<T>(size_t(channels))};
  if (!training) {
    n.mean = channel_values<T>(running_mean, t);
    std::vector<T> rv = channel_values<T>(running_var, t);
    for (int64_t c = 0; c < channels; ++c) n.invstd[size_t(c)] = T(1) / std::sqrt(rv[size_t(c)] + T(eps));
    return n;
  }
  std::vector<double> variance(static_cast<size_t>(channels));
  if (upstream_contiguous(x)) {
    Tensor biased;
    std::tie(n.save_mean, biased) = batch_statistics<T>(x.contiguous(), running_mean, running_var, momentum);
    for (int64_t c = 0; c < channels; ++c) variance[size_t(c)] = double(biased.data_as<T>()[c]);
  } else {
    std::tie(n.save_mean, variance) = strided_statistics<T>(x, running_mean, running_var, momentum);
  }
  n.save_invstd = Tensor::empty({channels}, t);
  for (int64_t c = 0; c < channels; ++c) n.invstd[size_t(c)] = T(inverse_std(variance[size_t(c)], eps));
  std::copy(n.invstd.begin(), n.invstd.end(), n.save_invstd.template data_as<T>());
  n.mean.assign(n.save_mean.template data_as<T>(), n.save_mean.template data_as<T>() + channels);
  return n;
}

// batch_norm_update_stats's mean and biased variance, on the dense or the strided path.
template <typename T>
std::pair<Tensor, Tensor> update_statistics(const Tensor& x, const std::optional<Tensor>& running_mean,
                                            const std::optional<Tensor>& running_var, double momentum) {
  if (upstream_contiguous(x)) return batch_statistics<T>(x.contiguous(), running_mean, running_var, momentum);
  auto [mean, variance] = strided_statistics<T>(x, running_mean, running_var, momentum);
  Tensor biased = Tensor::empty({x.size(1)}, x.dtype());
  std::transform(variance.begin(), variance.end(), biased.data_as<T>(), [](double v) { return T(v); });
  return {mean, biased};
}

// native_batch_norm of a float or double input whose parameters share its dtype:
// (output, save_mean, save_invstd), the saved ones empty in evaluation.
template <typename T>
std::tuple<Tensor, Tensor, Tensor> fused_batch_norm(const Tensor& x, const std::optional<Tensor>& weight,
                                                    const std::optional<Tensor>& bias,
                                                    const std::optional<Tensor>& running_mean,
                                                    const std::optional<Tensor>& running_var, bool training,
                                                    double momentum, double eps) {
  ScalarType t = x.dtype();
  // The meta device: the contiguous output and the saved statistics (empty in evaluation) the
  // paths below allocate; the running statistics stay as they are (upstream's in-place updates
  // of meta tensors write nothing).
  if (x.is_meta()) {
    Shape saved{training ? x.size(1) : 0};
    return {Tensor::empty(x.sizes(), t), Tensor::empty(saved, t), Tensor::empty(saved, t)};
  }
  Normalizer<T> n = normalizer<T>(x, running_mean, running_var, training, momentum, eps);
  std::vector<T> w = channel_values<T>(weight, t), b = channel_values<T>(bias, t);
  if (!upstream_contiguous(x))
    return {strided_transform<T>(x, n.mean, n.invstd, w, b), n.save_mean, n.save_invstd};
  // Upstream's linear and constant terms: alpha = invstd w, beta = b - mean alpha (an FMA).
  BatchNormShape s = batch_norm_shape(x);
  std::vector<T> alpha(size_t(s.channels)), beta(size_t(s.channels));
  for (size_t c = 0; c < size_t(s.channels); ++c) {
    alpha[c] = n.invstd[c] * (weight ? w[c] : T(1));
    beta[c] = std::fma(-n.mean[c], alpha[c], bias ? b[c] : T(0));
  }
  Tensor dense = x.contiguous(), out = Tensor::empty(x.sizes(), t);
  channel_affine(dense.data_as<T>(), out.data_as<T>(), s, alpha.data(), beta.data());
  return {out, n.save_mean, n.save_invstd};
}

// Upstream's checks of a batch_norm call, in its order; float, double and bfloat16 pass.
void check_batch_norm_call(const Tensor& input, const std::optional<Tensor>& weight,
                           const std::optional<Tensor>& bias, const std::optional<Tensor>& running_mean,
                           const std::optional<Tensor>& running_var, bool training) {
  if (input.dim() < 2) throw Error("batch_norm: expected input with at least 2 dims");
  auto ptr = [](const std::optional<Tensor>& p) { return p ? &*p : nullptr; };
  check_batch_norm_parameters(input, {{"weight", ptr(weight)},
                                      {"bias", ptr(bias)},
                                      {"running_mean", ptr(running_mean)},
                                      {"running_var", ptr(running_var)}});
  if (training) {
    int64_t count = input.numel() / std::max<int64_t>(input.size(1), 1);
    if (count <= 1)
      throw Error("Expected more than 1 value per channel when training, got input size " +
                  shape_str(input.sizes()));
  } else if (!running_mean || !running_var) {
    throw Error("running_mean and running_var must be defined in evaluation mode");
  }
  ScalarType t = input.dtype();
  if (t != ScalarType::Float && t != ScalarType::Double && t != ScalarType::BFloat16)
    dtype_not_implemented("batch_norm", t);
}

// bfloat16's statistics are kept in its parameters' dtype (float32 when mixed).
ScalarType statistics_dtype(const Tensor& input, const std::optional<Tensor>& param) {
  return param ? param->dtype() : input.dtype();
}

// aten::native_batch_norm: float and double fused; bfloat16 computed in float and stored back.
std::tuple<Tensor, Tensor, Tensor> native_batch_norm(const Tensor& input, const std::optional<Tensor>& weight,
                                                     const std::optional<Tensor>& bias,
                                                     const std::optional<Tensor>& running_mean,
                                                     const std::optional<Tensor>& running_var, bool training,
                                                     double momentum, double eps) {
  check_batch_norm_call(input, weight, bias, running_mean, running_var, training);
  ScalarType t = input.dtype();
  if (t == ScalarType::Double)
    return fused_batch_norm<double>(input, weight, bias, running_mean, running_var, training, momentum, eps);
  auto [out, mean, invstd] = fused_batch_norm<float>(input.to(ScalarType::Float), weight, bias, running_mean,
                                                     running_var, training, momentum, eps);
  ScalarType saved = statistics_dtype(input, weight ? weight : running_mean);
  return {out.to(t), mean.to(saved), invstd.to(saved)};
}

// aten::batch_norm_update_stats: the batch's mean and biased variance, the running statistics
// updated; native_batch_norm's training statistics without its output.
std::tuple<Tensor, Tensor> batch_norm_update_stats(const Tensor& input,
                                                   const std::optional<Tensor>& running_mean,
                                                   const std::optional<Tensor>& running_var,
                                                   double momentum) {
  check_batch_norm_call(input, std::nullopt, std::nullopt, running_mean, running_var, true);
  if (input.dtype() == ScalarType::Double)
    return update_statistics<double>(input, running_mean, running_var, momentum);
  auto [mean, var] =
      update_statistics<float>(input.to(ScalarType::Float), running_mean, running_var, momentum);
  ScalarType saved = statistics_dtype(input, running_mean);
  return {mean.to(saved), var.to(saved)};
}

// native_batch_norm_backward of float or double tensors: training reads the saved mean and
// invstd, evaluation the running statistics (invstd as upstream's backward makes it, in
// double). Results where `mask` asks, in the input's dtype. Upstream's kernels need the input
// and the gradient dense in one layout; anything else takes its strided path.
template <typename T>
std::tuple<Tensor, Tensor, Tensor> fused_batch_norm_backward(const Tensor& grad, const Tensor& x,
                                                             const std::optional<Tensor>& weight,
                                                             const std::optional<Tensor>& mean,
                                                             const std::optional<Tensor>& invstd_or_var,
                                                             bool train, double eps,
                                                             const std::vector<bool>& mask) {
  ScalarType t = x.dtype();
  BatchNormShape s = batch_norm_shape(x);
  std::vector<T> w = channel_values<T>(weight, t), means = channel_values<T>(mean, t);
  std::vector<T> invstd = channel_values<T>(invstd_or_var, t);
  if (!train)
    for (T& v : invstd) v = T(1 / std::sqrt(double(v) + eps));
  if (!upstream_contiguous(x) || !upstream_contiguous(grad) || x.is_contiguous() != grad.is_contiguous())
    return strided_batch_norm_backward<T>(grad, x, w, means, invstd, train, mask);
  Tensor dense_x = x.contiguous(), dense_grad = grad.contiguous();
  Tensor dx = mask[0] ? Tensor::empty(x.sizes(), t) : Tensor();
  Tensor dw = mask[1] ? Tensor::empty({s.channels}, t) : Tensor();
  Tensor db = mask[2] ? Tensor::empty({s.channels}, t) : Tensor();
  auto data = [](const Tensor& r) { return r.defined() ? r.data_as<T>() : nullptr; };
  channel_backward(BackwardArgs<T>{dense_x.data_as<T>(), dense_grad.data_as<T>(), weight ? w.data() : nullptr,
                                   means.data(), invstd.data(), data(dx), data(dw), data(db), s, train});
  return {dx, dw, db};
}

// aten::native_batch_norm_backward: float and double fused; bfloat16 computed in float.
std::tuple<Tensor, Tensor, Tensor> native_batch_norm_backward(
    const Tensor& grad, const Tensor& input, const std::optional<Tensor>& weight,
    const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
    const std::optional<Tensor>& save_mean, const std::optional<Tensor>& save_invstd, bool train, double eps,
    const std::vector<bool>& mask) {
  const std::optional<Tensor>& mean = train ? save_mean : running_mean;
  const std::optional<Tensor>& spread = train ? save_invstd : running_var;
  if (!mean || !spread)
    throw Error(train ? "native_batch_norm_backward: training needs save_mean and save_invstd"
                      : "native_batch_norm_backward: evaluation needs running_mean and running_var");
  ScalarType t = input.dtype();
  if (t != ScalarType::Float && t != ScalarType::Double && t != ScalarType::BFloat16)
    dtype_not_implemented("batch_norm_backward_cpu", t);
  ScalarType params = weight ? weight->dtype() : mean->dtype();
  if (input.is_meta()) {  // the meta device: the shapes are the results
    int64_t channels = batch_norm_shape(input).channels;
    return {mask[0] ? Tensor::empty(input.sizes(), t) : Tensor(),
            mask[1] ? Tensor::empty({channels}, params) : Tensor(),
            mask[2] ? Tensor::empty({channels}, params) : Tensor()};
  }
  if (t == ScalarType::Double)
    return fused_batch_norm_backward<double>(grad.to(t), input, weight, mean, spread, train, eps, mask);
  ScalarType f = ScalarType::Float;
  auto [dx, dw, db] =
      fused_batch_norm_backward<float>(grad.to(f), input.to(f), weight, mean, spread, train, eps, mask);
  auto cast = [](const Tensor& r, ScalarType to) { return r.defined() ? r.to(to) : r; };
  return {cast(dx, t), cast(dw, params), cast(db, params)};
}

// ---- layer_norm: upstream's CPU kernels (layer_norm_kernel.cpp, moments_utils.h) for float and
// double, row by row in the storage type. Its compiler contracted some multiplies into the adds
// that take them (where std::fma stands below) and not others: found against its bits.

// Upstream's AddMoments: the count, mean and sum of squared deviations of a part merged into
// another's.
template <typename T>
[[gnu::always_inline]] inline void add_moments(int64_t count_add, T mean_add, T m2_add, int64_t& count,
                                               T& mean, T& m2) {
  int64_t n = count + count_add;
  T c = n == 0 ? T(0) : T(count_add) / T(n);
  T delta = mean_add - mean;
  mean += c * delta;
  m2 += m2_add + delta * delta * c * T(count);
  count = n;
}

// A lane-wise Welford part of a row: its count per lane, the lanes' means and sums of squared
// deviations, in registers (per-lane arrays went through memory, a store-forwarding stall per
// vector).
template <typename T>
struct MomentLanes {
  int64_t count;
  Lanes<T> mean, m2;  // Part{} zeroes them; a plain declaration leaves them unset
};

// Upstream's AddMomentsVec: `from` merged into `into`, one factor for every lane (add_moments'
// per lane).
template <typename T>
[[gnu::always_inline]] inline void merge_moments(const MomentLanes<T>& from, MomentLanes<T>& into) {
  int64_t total = into.count + from.count;
  T c = total == 0 ? T(0) : T(from.count) / T(total);
  Lanes<T> delta = from.mean - into.mean;
  into.mean += c * delta;
  into.m2 += from.m2 + delta * delta * c * T(into.count);
  into.count = total;
}

// Upstream's RowwiseMoments of n values: a Welford pass per vector lane over chunks of 16
// vectors, each chunk merged into a binary cascade (depth ceil(log2(chunks))); the tail values
// by a scalar Welford pass into which the lanes are merged last. The mean and biased variance.
template <typename T>
[[gnu::always_inline]] inline std::pair<T, T> rowwise_moments(const T* x, int64_t n) {
  using Part = MomentLanes<T>;
  constexpr int64_t width = kLanes<T>, chunk_vectors = 16;
  int64_t vectors = n / width, chunks = (vectors + chunk_vectors - 1) / chunk_vectors;
  int64_t depth = chunks <= 2 ? 1 : int64_t(std::bit_width(uint64_t(chunks - 1)));
  // The cascade on the stack for rows up to 2^8 chunks (a malloc per row cost short rows more
  // than their moments).
  constexpr int64_t inline_depth = 8;
  Part inline_cascade[inline_depth];
  std::vector<Part> heap_cascade(size_t(depth > inline_depth ? depth : 0));
  Part* cascade = depth > inline_depth ? heap_cascade.data() : inline_cascade;
  std::fill_n(cascade, depth, Part{});
  for (int64_t i = 0; i < chunks; ++i) {
    Part part{std::min(chunk_vectors, vectors - i * chunk_vectors), {}, {}};
    const T* p = x + i * chunk_vectors * width;
    for (int64_t j = 0; j < part.count; ++j) {
      Lanes<T> v;
      std::memcpy(&v, p + j * width, sizeof v);
      Lanes<T> delta = v - part.mean;
      part.mean += delta * (T(1) / T(j + 1));
      part.m2 += delta * (v - part.mean);
    }
    merge_moments(part, cascade[0]);
    for (int64_t j = 1, carry = i + 1; j < depth && (carry & 1) == 0; ++j, carry >>= 1) {
      merge_moments(cascade[j - 1], cascade[j]);
      cascade[j - 1] = Part{};
    }
  }
  for (int64_t j = 1; j < depth; ++j) merge_moments(cascade[j], cascade[0]);
  int64_t count = 0;
  T mean = 0, m2 = 0;
  for (int64_t i = vectors * width; i < n; ++i) {
    T delta = x[i] - mean;
    mean += delta / T(++count);
    m2 += delta * (x[i] - mean);
  }
  for (int64_t l = 0; l < width; ++l)
    add_moments(vectors, cascade[0].mean[l], cascade[0].m2[l], count, mean, m2);
  return {mean, m2 / T(n)};
}

// Rows of n values with what upstream's layer_norm kernels read of them.
template <typename T>
struct LayerNormRows {
  const T *x, *gamma, *beta;  // gamma and beta null where absent
  int64_t rows, n;
};

// Upstream's LayerNormKernelImplInternal: per row y = (x rstd + (-rstd mean)) gamma + beta, two
// FMAs (gamma 1 and beta 0 where absent).
template <typename T>
TN_CLONES void layer_norm_rows(const LayerNormRows<T>& a, T eps, T* y, T* mean, T* rstd, int64_t first,
                               int64_t last) {
  for (int64_t i = first; i < last; ++i) {
    const T* x = a.x + i * a.n;
    auto [mu, var] = rowwise_moments(x, a.n);
    T r = T(1) / std::sqrt(var + eps), shift = -r * mu, *out = y + i * a.n;
    // Weight and bias both given (the common case) in a loop without the general one's
    // per-element choices.
    if (const T* gamma = a.gamma, *beta = a.beta; gamma && beta) {
      for (int64_t j = 0; j < a.n; ++j) out[j] = std::fma(std::fma(x[j], r, shift), gamma[j], beta[j]);
    } else {
      for (int64_t j = 0; j < a.n; ++j)
        out[j] = std::fma(std::fma(x[j], r, shift), a.gamma ? a.gamma[j] : T(1), a.beta ? a.beta[j] : T(0));
    }
    mean[i] = mu;
    rstd[i] = r;
  }
}

// Upstream's input gradient per row: ds = sum dy x gamma and db = sum dy gamma as its vectorized
// reductions, b = (db mean - ds) rstd^3 / n, c = -b mean - db rstd / n, dx = rstd dy gamma + b x + c.
template <typename T>
TN_CLONES void layer_norm_input_grad(const LayerNormRows<T>& a, const T* grad, const T* mean, const T* rstd,
                                     T* dx, int64_t first, int64_t last) {
  const T scale = T(1) / T(a.n), *w = a.gamma;
  for (int64_t i = first; i < last; ++i) {
    const T *dy = grad + i * a.n, *x = a.x + i * a.n;
    T ds, db;
    if (w) {
      ds = vector_reduce<T>(
          a.n, [&](auto& out, auto j) { out = at(dy, j) * at(x, j) * at(w, j); },
          [&](auto& acc, auto j) { acc = multiply_add(at(dy, j) * at(x, j), at(w, j), acc); });
      db = vector_reduce<T>(
          a.n, [&](auto& out, auto j) { out = at(dy, j) * at(w, j); },
          [&](auto& acc, auto j) { acc = multiply_add(at(dy, j), at(w, j), acc); });
    } else {
      ds = vector_reduce<T>(
          a.n, [&](auto& out, auto j) { out = at(dy, j) * at(x, j); },
          [&](auto& acc, auto j) { acc = multiply_add(at(dy, j), at(x, j), acc); });
      db = vector_reduce<T>(
          a.n, [&](auto& out, auto j) { out = at(dy, j); }, [&](auto& acc, auto j) { acc += at(dy, j); });
    }
    T r = rstd[i], b = std::fma(db, mean[i], -ds) * r * r * r * scale,
      c = std::fma(-b, mean[i], -(db * r * scale));
    T* out = dx + i * a.n;  // without a weight, r dy (times 1); two loops, which the compiler vectorizes
    if (w)
      for (int64_t j = 0; j < a.n; ++j) out[j] = std::fma(b, x[j], r * dy[j] * w[j]) + c;
    else
      for (int64_t j = 0; j < a.n; ++j) out[j] = std::fma(b, x[j], r * dy[j]) + c;
  }
}

// Upstream's weight and bias gradients: each thread of its parallel_for over the rows (split as
// it splits them among torch.get_num_threads() threads) adds dy (rstd x - rstd mean) and dy
// into its own buffer, row by row; the buffers are added in thread order after.
template <typename T>
TN_CLONES void layer_norm_parameter_grads(const LayerNormRows<T>& a, const T* grad, const T* mean,
                                          const T* rstd, T* dgamma, T* dbeta) {
  if (dgamma) std::fill_n(dgamma, a.n, T(0));
  if (dbeta) std::fill_n(dbeta, a.n, T(0));
  if (a.rows == 0) return;
  int64_t threads = std::min<int64_t>(intra_op_threads(), a.rows), per = (a.rows + threads - 1) / threads;
  std::vector<T> gamma_part(size_t(a.n)), beta_part(size_t(a.n));
  for (int64_t first = 0; first < a.rows; first += per) {
    std::fill(gamma_part.begin(), gamma_part.end(), T(0));
    std::fill(beta_part.begin(), beta_part.end(), T(0));
    for (int64_t i = first; i < std::min(a.rows, first + per); ++i) {
      const T *dy = grad + i * a.n, *x = a.x + i * a.n;
      T r = rstd[i], shift = -r * mean[i];
      for (int64_t j = 0; j < a.n; ++j) {
        gamma_part[size_t(j)] = std::fma(dy[j], std::fma(r, x[j], shift), gamma_part[size_t(j)]);
        beta_part[size_t(j)] += dy[j];
      }
    }
    for (int64_t j = 0; j < a.n; ++j) {
      if (dgamma) dgamma[j] += gamma_part[size_t(j)];
      if (dbeta) dbeta[j] += beta_part[size_t(j)];
    }
  }
}

#pragma GCC pop_options

// The rows and row length of layer_norm's input: normalized_shape must be its trailing dims.
std::pair<int64_t, int64_t> layer_norm_shape(const Tensor& x, const Shape& normalized) {
  int64_t k = int64_t(normalized.size());
  if (k > x.dim() || !std::equal(normalized.begin(), normalized.end(), x.sizes().end() - k))
    throw Error("Given normalized_shape=" + shape_str(normalized) + ", expected input with shape [*, " +
                shape_str(normalized).substr(1) + ", but got input of size" + shape_str(x.sizes()));
  int64_t rows = 1, n = 1;
  for (int64_t d = 0; d < x.dim(); ++d) (d < x.dim() - k ? rows : n) *= x.size(d);
  return {rows, n};
}

// layer_norm's float and double kernels; bfloat16 computed in float. The type they compute in.
ScalarType layer_norm_compute_type(ScalarType t) {
  if (t != ScalarType::Float && t != ScalarType::Double && t != ScalarType::BFloat16)
    dtype_not_implemented("LayerNormKernelImpl", t);
  return t == ScalarType::Double ? ScalarType::Double : ScalarType::Float;
}

// A dense copy in type `t` of an optional tensor (undefined where absent), and its data or null.
Tensor dense_or_undefined(const std::optional<Tensor>& p, ScalarType t) {
  return p ? p->to(t).contiguous() : Tensor();
}
template <typename T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data_as<T>() : nullptr;
}

// aten::native_layer_norm -> (output, mean, rstd), the statistics shaped as the input with the
// normalized dims 1.
std::tuple<Tensor, Tensor, Tensor> native_layer_norm(const Tensor& input, const Shape& normalized,
                                                     const std::optional<Tensor>& weight,
                                                     const std::optional<Tensor>& bias, double eps) {
  auto [rows, n] = layer_norm_shape(input, normalized);
  ScalarType t = input.dtype(), c = layer_norm_compute_type(t);
  Tensor x = input.to(c).contiguous(), w = dense_or_undefined(weight, c), b = dense_or_undefined(bias, c);
  Tensor y = Tensor::empty(input.sizes(), c), mean = Tensor::empty({rows}, c),
         rstd = Tensor::empty({rows}, c);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    LayerNormRows<T> a{x.data_as<T>(), data_or_null<T>(w), data_or_null<T>(b), rows, n};
    T *out = y.data_as<T>(), *m = mean.data_as<T>(), *s = rstd.data_as<T>();
    // Rows are independent: each in one thread, whichever (upstream splits them too).
    parallel_for(rows, units_per_grain(n),
                 [&](int64_t begin, int64_t end) { layer_norm_rows<T>(a, T(eps), out, m, s, begin, end); });
  };
  if (!y.is_meta()) c == ScalarType::Double ? run(0.0) : run(0.0f);  // meta: the shapes are the results
  Shape statistics(input.sizes().begin(), input.sizes().end() - int64_t(normalized.size()));
  statistics.resize(size_t(input.dim()), 1);
  return {y.to(t), ops::reshape(mean, statistics).to(t), ops::reshape(rstd, statistics).to(t)};
}

// aten::native_layer_norm_backward -> (input, weight, bias gradients) where `mask` asks for them.
std::tuple<Tensor, Tensor, Tensor> native_layer_norm_backward(
    const Tensor& grad, const Tensor& input, const Shape& normalized, const Tensor& mean, const Tensor& rstd,
    const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, const std::vector<bool>& mask) {
  auto [rows, n] = layer_norm_shape(input, normalized);
  ScalarType t = input.dtype(), c = layer_norm_compute_type(t);
  Tensor x = input.to(c).contiguous(), dy = grad.to(c).contiguous(), w = dense_or_undefined(weight, c);
  Tensor mu = mean.to(c).contiguous(), r = rstd.to(c).contiguous();
  Tensor dx = mask[0] ? Tensor::empty(input.sizes(), c) : Tensor();
  Tensor dw = mask[1] && weight ? Tensor::empty({n}, c) : Tensor();
  Tensor db = mask[2] ? Tensor::empty({n}, c) : Tensor();
  auto run = [&](auto zero) {
    using T = decltype(zero);
    LayerNormRows<T> a{x.data_as<T>(), data_or_null<T>(w), nullptr, rows, n};
    const T *g = dy.data_as<T>(), *m = mu.data_as<T>(), *s = r.data_as<T>();
    if (T* d = data_or_null<T>(dx))
      parallel_for(rows, units_per_grain(n),
                   [&](int64_t begin, int64_t end) { layer_norm_input_grad(a, g, m, s, d, begin, end); });
    if (dw.defined() || db.defined())
      layer_norm_parameter_grads(a, g, m, s, data_or_null<T>(dw), data_or_null<T>(db));
  };
  if (!x.is_meta()) c == ScalarType::Double ? run(0.0) : run(0.0f);  // meta: the shapes are the results
  auto shaped = [&](const Tensor& p, const std::optional<Tensor>& like) {
    return p.defined() ? ops::reshape(p, like ? like->sizes() : normalized).to(like ? like->dtype() : t) : p;
  };
  return {dx.defined() ? dx.to(t) : dx, shaped(dw, weight), shaped(db, bias)};
}

}  // namespace

// Upstream's layer_norm is native_layer_norm's output; called through the door, so the call
// records NativeLayerNormBackward0 (record.cpp, kDecomposed).
TN_KERNEL("aten::layer_norm", {
  return std::get<0>(ops::native_layer_norm(a.tensor(0), a.int_list(1), a.optional_tensor(2),
                                            a.optional_tensor(3), a.real(4)));
});
TN_KERNEL("aten::native_layer_norm", {
  auto [y, mean, rstd] =
      native_layer_norm(a.tensor(0), a.int_list(1), a.optional_tensor(2), a.optional_tensor(3), a.real(4));
  return IValue::tuple({y, mean, rstd});
});
TN_KERNEL("aten::native_layer_norm_backward", {
  auto [dx, dw, db] =
      native_layer_norm_backward(a.tensor(0), a.tensor(1), a.int_list(2), a.tensor(3), a.tensor(4),
                                 a.optional_tensor(5), a.optional_tensor(6), a[7].get<std::vector<bool>>());
  auto result = [](const Tensor& r) { return r.defined() ? IValue(r) : IValue(); };
  return IValue::tuple({result(dx), result(dw), result(db)});
});
// Decomposed for autograd (record.cpp): native_batch_norm's node saves the batch statistics the
// output was normalized with, as upstream's, so the backward need not recompute them.
// An input without elements (a batch of none) is upstream's _batch_norm_impl_index's case: a copy
// scaled by weight[0] and shifted by bias[0], so gradients reach both; nothing else is read.
TN_KERNEL("aten::batch_norm", {
  const Tensor& x = a.tensor(0);
  std::optional<Tensor> weight = a.optional_tensor(1), bias = a.optional_tensor(2);
  if (x.dim() >= 2 && x.numel() == 0) {
    Tensor out = ops::clone(x, std::nullopt);
    if (weight) out = ops::mul(out, ops::select(*weight, 0, 0));
    if (bias) out = ops::add(out, ops::select(*bias, 0, 0), Scalar(int64_t{1}));
    return out;
  }
  return std::get<0>(ops::native_batch_norm(x, weight, bias, a.optional_tensor(3), a.optional_tensor(4),
                                            a.boolean(5), a.real(6), a.real(7)));
});
TN_KERNEL("aten::native_batch_norm", {
  auto [out, mean, invstd] =
      native_batch_norm(a.tensor(0), a.optional_tensor(1), a.optional_tensor(2), a.optional_tensor(3),
                        a.optional_tensor(4), a.boolean(5), a.real(6), a.real(7));
  return IValue::tuple({out, mean, invstd});
});
TN_KERNEL("aten::batch_norm_update_stats", {
  auto [mean, var] =
      batch_norm_update_stats(a.tensor(0), a.optional_tensor(1), a.optional_tensor(2), a.real(3));
  return IValue::tuple({mean, var});
});
TN_KERNEL("aten::native_batch_norm_backward", {
  auto [dx, dw, db] = native_batch_norm_backward(
      a.tensor(0), a.tensor(1), a.optional_tensor(2), a.optional_tensor(3), a.optional_tensor(4),
      a.optional_tensor(5), a.optional_tensor(6), a.boolean(7), a.real(8), a[9].get<std::vector<bool>>());
  auto result = [](const Tensor& r) { return r.defined() ? IValue(r) : IValue(); };
  return IValue::tuple({result(dx), result(dw), result(db)});
});
TN_KERNEL("aten::group_norm", {
  const Tensor& x = a.tensor(0);
  int64_t groups = a.integer(1), n = x.size(0), c = x.size(1);
  if (groups <= 0) throw Error("group_norm: num_groups must be positive, but got " + std::to_string(groups));
  if (c % groups != 0)
    throw Error(
        "Expected number of channels in input to be divisible by num_groups, but got input of shape " +
        shape_str(x.sizes()) + " and num_groups=" + std::to_string(groups));
  return affine(normalize_rows(x, n * groups, a.real(4)), a.optional_tensor(2), a.optional_tensor(3), x.dim(),
                true);
});
TN_KERNEL("aten::instance_norm", {
  const Tensor& x = a.tensor(0);
  if (!a.boolean(5)) {
    // Through the door, so that the running statistics' normalization is differentiated too.
    return ops::batch_norm(x, a.optional_tensor(1), a.optional_tensor(2), a.optional_tensor(3),
                           a.optional_tensor(4), false, a.real(6), a.real(7), false);
  }
  int64_t n = x.size(0), c = x.size(1);
  return affine(normalize_rows(x, n * c, a.real(7)), a.optional_tensor(1), a.optional_tensor(2), x.dim(),
                true);
});

}  // namespace tn
