// Shared kernel machinery: type promotion, broadcasting strided loops, and calling
// other operators through the door.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <type_traits>

#include "core/coalesce.h"
#include "core/parallel.h"
#include "ops.h"
#include "typed_ops.h"
#include "vml.h"

namespace tn {

// The computation type of a storage type: every floating type computes in double and
// rounds once when stored. For +, -, *, / and sqrt that equals computing in the
// storage type (double has more than 2p+2 bits for each of them, so the double
// rounding is innocuous); for everything else it is at least as accurate as upstream.
template <typename T>
constexpr bool is_float_v = std::is_floating_point_v<T>;

template <typename T>
using compute_t =
    std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16> || std::is_same_v<T, float>,
                       double, T>;

// Upstream's result_type over tensors and Python numbers (wrapped numbers rank lowest,
// then 0-dim tensors, then the rest; a higher category from a lower rank still wins).
class ResultType {
 public:
  void add(const Tensor& t);
  void add(const Scalar& s);
  ScalarType get() const;

 private:
  ScalarType dim_ = ScalarType::Undefined, zero_ = ScalarType::Undefined, wrapped_ = ScalarType::Undefined;
};

ScalarType result_type(const Tensor& a, const Tensor& b);
// Integer and bool inputs of floating functions (exp, sqrt, div) give the default dtype.
ScalarType float_type(ScalarType t);

// Strides of `t` seen at `shape` after broadcasting (0 on broadcast dimensions).
Shape broadcast_strides(const Tensor& t, const Shape& shape);

// Upstream's infer_dense_strides: dense strides over `sizes` in the stride order of
// `strides` (what .to, clone and *_like give a tensor that is not dense).
Shape dense_strides_like(const Shape& sizes, const Shape& strides);
// An uninitialized tensor with these (dense) strides.
Tensor empty_with_strides(const Shape& sizes, const Shape& strides, ScalarType dtype);
// The output TensorIterator allocates for `inputs` broadcast to `shape`, in their layout
// (a transposed input gives a transposed result, channels last gives channels last):
// inputs all of `shape` and all contiguous, all channels last or all dense with equal
// strides give that layout; otherwise dims are ordered by the inputs' strides, the first
// input with differing nonzero strides deciding each pair (broadcast dims skipped, ties
// kept in order). `common` is the dtype the inputs are converted to first.
Tensor empty_for_operands(const Shape& shape, const std::vector<Tensor>& inputs, ScalarType common,
                          ScalarType dtype);
// `t` converted to `dtype` with memory_format=preserve: a dense tensor keeps its strides.
Tensor to_keeping_layout(const Tensor& t, ScalarType dtype);

// Whether an in-place call's self (`into`; null in a functional call) can be the output of an
// elementwise loop computing `shape` in `dtype` from `inputs`, as upstream's in-place kernels
// write self with no temporary and no second pass: self has that shape and dtype, and every
// input is either self's very elements or shares no memory with it, so each element is read
// before the same element is written and no other is; self is non-overlapping and dense, so a
// flat loop over its memory visits each of its elements once.
bool writes_into(const Tensor* into, const Shape& shape, ScalarType dtype, const std::vector<Tensor>& inputs);
// The output of an elementwise loop: `into` where writes_into allows, else a new tensor laid out
// as empty_for_operands lays it.
inline Tensor output_for(const Tensor* into, const Shape& shape, const std::vector<Tensor>& inputs,
                         ScalarType common, ScalarType dtype) {
  if (writes_into(into, shape, dtype, inputs)) return *into;
  return empty_for_operands(shape, inputs, common, dtype);
}

// A hot loop that calls std::fma, cloned for x86-64-v3 (AVX2 + FMA: std::fma is one instruction,
// where the baseline calls libm per element) and the baseline, chosen by the CPU at load time (an
// "arch=haswell" clone would be chosen only on a CPU that is a Haswell). Its file turns
// contraction off around it (#pragma GCC optimize("fp-contract=off")) so that the x86-64-v3
// clone fuses nothing std::fma does not name.
#define TN_CLONES [[gnu::target_clones("arch=x86-64-v3", "default")]]

// An element function whose flat loops (map_unary's, map_binary's, map_ternary's) run as
// TN_CLONES: one that calls std::fma (multiply_add), an instruction in the x86-64-v3 clone and a
// libm call per element in the baseline, or a hot one that AVX2's wider vectors speed up (the
// arithmetic optimizers run over every parameter, sqrt). Cloned{[](double x, double y) { ... }}.
template <typename F>
struct Cloned {
  F f;
  template <typename... T>
  auto operator()(T... x) const {
    return f(x...);
  }
};
template <typename F>
constexpr bool is_cloned_v = false;
template <typename F>
constexpr bool is_cloned_v<Cloned<F>> = true;

#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
template <typename Body>
TN_CLONES void cloned_loop(int64_t begin, int64_t end, const Body& body) {
  for (int64_t i = begin; i < end; ++i) body(i);
}
#pragma GCC pop_options

// body(i) for every i in [begin, end): cloned when the element function F is Cloned.
template <typename F, typename Body>
void row_loop(int64_t begin, int64_t end, const Body& body) {
  if constexpr (is_cloned_v<std::decay_t<F>>)
    cloned_loop(begin, end, body);
  else
    for (int64_t i = begin; i < end; ++i) body(i);
}

// body(i) for every i below n, split between threads as upstream's loops are (row_loop).
template <typename F, typename Body>
void flat_loop(int64_t n, const Body& body) {
  parallel_for(n, kGrainSize, [&](int64_t begin, int64_t end) { row_loop<F>(begin, end, body); });
}

// Calls row(offsets, length, steps) for every row of `shape`'s coalesced layout (coalesce), in
// row-major order: each operand's offset of the row's first element and its step along the row,
// in elements. `split` rows between threads (elementwise loops, whose rows are independent).
template <size_t N, typename Row>
void strided_rows(const Shape& shape, const std::array<Shape, N>& strides, Row&& row, bool split = false) {
  int64_t total = 1;
  for (int64_t s : shape) total *= s;
  if (total == 0) return;
  const Coalesced<N> layout = coalesce<N>(shape, strides);
  const int64_t length = layout.sizes.back();
  auto rows = [&](int64_t first, int64_t last) {
    rows_in_range<N>(layout, first * length, last * length, row);
  };
  if (split)
    parallel_for(total / length, units_per_grain(length), rows);
  else
    rows(0, total / length);
}

// Calls f(offset_0, ..., offset_{N-1}) for every element of `shape` in row-major order, offsets
// in elements.
template <size_t N, typename F>
void strided_loop(const Shape& shape, const std::array<Shape, N>& strides, F&& f) {
  strided_rows<N>(
      shape, strides,
      [&](const std::array<int64_t, N>& first, int64_t length, const std::array<int64_t, N>& steps) {
        for (int64_t i = 0; i < length; ++i) {
          std::array<int64_t, N> offsets;
          for (size_t k = 0; k < N; ++k) offsets[k] = first[k] + i * steps[k];
          f(offsets);
        }
      });
}

// `t` with its dims in the order upstream's TensorIterator visits a lone output (slowest
// first): a row-major walk of the view visits the elements as upstream's serial loops do,
// in memory order for a permuted tensor. Where a generator's draws land depends on it.
Tensor in_iteration_order(const Tensor& t);
// The same for operands of one shape (broadcast ones with stride 0) that one loop visits
// together: the output first, whose strides lead TensorIterator's ordering.
std::vector<Tensor> in_iteration_order(const std::vector<Tensor>& operands);

// Calls f({offset}) for every element of `t`, in in_iteration_order's order.
template <typename F>
void for_each_in_iteration_order(const Tensor& t, F&& f) {
  Tensor order = in_iteration_order(t);
  strided_loop<1>(order.sizes(), {order.strides()}, f);
}

// The element type f's results are stored as: a predicate's (f returns bool) fill a Bool
// tensor, anything else is stored as the compute type in_t. Fixed by f's type, so each call
// instantiates the loops for one output type, not for both.
template <typename in_t, typename R>
using stored_t = std::conditional_t<std::is_same_v<R, bool>, bool, in_t>;

template <typename out_t>
ScalarType stored_dtype(ScalarType compute) {
  return std::is_same_v<out_t, bool> ? ScalarType::Bool : compute;
}

// out[i] = f(a[i]): input converted to `compute` (whose C++ type is in_t), output stored as
// stored_t. Typed by the caller's dispatch, so each call instantiates one set of loops, not
// one per dtype pair.
template <typename in_t, typename F>
Tensor map_unary(const Tensor& a, ScalarType compute, F&& f) {
  using out_t = stored_t<in_t, std::invoke_result_t<F&, compute_t<in_t>>>;
  Tensor in = a.to(compute);
  Tensor out = empty_for_operands(a.sizes(), {a}, compute, stored_dtype<out_t>(compute));
  if (out.is_meta()) return out;  // the meta device: the shape and dtype are the result
  out_t* po = out.data_as<out_t>();
  const in_t* x = in.data_as<in_t>();
  // The common case (contiguous, or dense and laid out as the output): one flat loop over
  // memory that the compiler can vectorize, split between threads as upstream's.
  if (in.strides() == out.strides()) {
    flat_loop<F>(in.numel(), [&](int64_t i) { po[i] = out_t(f(compute_t<in_t>(x[i]))); });
    return out;
  }
  strided_loop<2>(a.sizes(), {out.strides(), in.strides()},
                  [&](const std::array<int64_t, 2>& o) { po[o[0]] = out_t(f(compute_t<in_t>(x[o[1]]))); });
  return out;
}

// A bool tensor of pred(x) over floating elements; integers and bool are never NaN or
// infinite, so they all answer `integer_answer` (isnan, isinf, isfinite, isposinf, isneginf).
template <typename Pred>
Tensor float_predicate(const Tensor& x, const char* name, Pred pred, bool integer_answer) {
  return TN_DISPATCH_ALL_TYPES(x.dtype(), name, [&](auto tag) {
    using scalar_t = TN_TYPE(tag);
    using c = compute_t<scalar_t>;
    return map_unary<scalar_t>(x, x.dtype(), [&](c v) -> bool {
      if constexpr (std::is_floating_point_v<c>) return pred(v);
      return integer_answer;
    });
  });
}

// out = f(a, b) broadcast; typed like map_unary. `into`: an in-place call's self, written
// directly where output_for allows.
template <typename in_t, typename F>
Tensor map_binary(const Tensor& a, const Tensor& b, ScalarType compute, F&& f, const Tensor* into = nullptr) {
  using c = compute_t<in_t>;
  using out_t = stored_t<in_t, std::invoke_result_t<F&, c, c>>;
  Shape shape = broadcast_shapes(a.sizes(), b.sizes());
  Tensor x = a.to(compute), y = b.to(compute);
  Tensor out = output_for(into, shape, {a, b}, compute, stored_dtype<out_t>(compute));
  if (out.is_meta()) return out;
  const in_t* px = x.data_as<in_t>();
  const in_t* py = y.data_as<in_t>();
  out_t* po = out.data_as<out_t>();
  // Flat loops over memory for the common layouts: both operands laid out as the output
  // (which is dense), or one of them a single element.
  int64_t n = out.numel();
  bool x_dense = x.sizes() == shape && x.strides() == out.strides();
  bool y_dense = y.sizes() == shape && y.strides() == out.strides();
  if (x_dense && y_dense) {
    flat_loop<F>(n, [&](int64_t i) { po[i] = out_t(f(c(px[i]), c(py[i]))); });
  } else if (x_dense && y.numel() == 1) {
    c b0 = c(py[0]);
    flat_loop<F>(n, [&](int64_t i) { po[i] = out_t(f(c(px[i]), b0)); });
  } else if (y_dense && x.numel() == 1) {
    c a0 = c(px[0]);
    flat_loop<F>(n, [&](int64_t i) { po[i] = out_t(f(a0, c(py[i]))); });
  } else {
    // Rows of the coalesced layout, split between threads. A row where one operand is a single
    // value (a [N, C, 1, 1] scale over [N, C, H, W], a bias over rows) or every operand is dense
    // gets a flat loop the compiler vectorizes.
    auto row = [&](const std::array<int64_t, 3>& at, int64_t length, const std::array<int64_t, 3>& step) {
      out_t* o = po + at[0];
      const in_t* xs = px + at[1];
      const in_t* ys = py + at[2];
      if (step[0] == 1 && step[1] == 1 && step[2] == 0) {
        c y0 = c(ys[0]);
        row_loop<F>(0, length, [&](int64_t i) { o[i] = out_t(f(c(xs[i]), y0)); });
      } else if (step[0] == 1 && step[1] == 0 && step[2] == 1) {
        c x0 = c(xs[0]);
        row_loop<F>(0, length, [&](int64_t i) { o[i] = out_t(f(x0, c(ys[i]))); });
      } else if (step[0] == 1 && step[1] == 1 && step[2] == 1) {
        row_loop<F>(0, length, [&](int64_t i) { o[i] = out_t(f(c(xs[i]), c(ys[i]))); });
      } else {
        for (int64_t i = 0; i < length; ++i)
          o[i * step[0]] = out_t(f(c(xs[i * step[1]]), c(ys[i * step[2]])));
      }
    };
    strided_rows<3>(shape, {out.strides(), broadcast_strides(x, shape), broadcast_strides(y, shape)}, row,
                    true);
  }
  return out;
}

// out = f(a, b, c) broadcast; typed (and `into`) like map_binary, output stored as in_t.
template <typename in_t, typename F>
Tensor map_ternary(const Tensor& a, const Tensor& b, const Tensor& c, ScalarType compute, F&& f,
                   const Tensor* into = nullptr) {
  using ct = compute_t<in_t>;
  Shape shape = broadcast_shapes(broadcast_shapes(a.sizes(), b.sizes()), c.sizes());
  Tensor x = a.to(compute), y = b.to(compute), z = c.to(compute);
  Tensor out = output_for(into, shape, {a, b, c}, compute, compute);
  if (out.is_meta()) return out;
  const in_t* px = x.data_as<in_t>();
  const in_t* py = y.data_as<in_t>();
  const in_t* pz = z.data_as<in_t>();
  in_t* po = out.data_as<in_t>();
  // One flat loop over memory when every operand is laid out as the output (optimizers' addcmul_
  // and addcdiv_ on a parameter's state and gradient).
  auto dense = [&](const Tensor& t) { return t.sizes() == shape && t.strides() == out.strides(); };
  if (dense(x) && dense(y) && dense(z)) {
    flat_loop<F>(out.numel(), [&](int64_t i) { po[i] = in_t(f(ct(px[i]), ct(py[i]), ct(pz[i]))); });
    return out;
  }
  // Rows of the coalesced layout, split between threads (map_binary's).
  auto row = [&](const std::array<int64_t, 4>& at, int64_t length, const std::array<int64_t, 4>& step) {
    for (int64_t i = 0; i < length; ++i)
      po[at[0] + i * step[0]] =
          in_t(f(ct(px[at[1] + i * step[1]]), ct(py[at[2] + i * step[2]]), ct(pz[at[3] + i * step[3]])));
  };
  strided_rows<4>(
      shape,
      {out.strides(), broadcast_strides(x, shape), broadcast_strides(y, shape), broadcast_strides(z, shape)},
      row, true);
  return out;
}

// A reduction over some dims: reduced dims moved last and made contiguous, so each
// output element reduces one contiguous run of `inner` values.
struct ReducePlan {
  Shape out_shape;    // with keepdim applied
  Shape kept_shape;   // non-reduced dims in order
  int64_t inner = 1;  // elements reduced per output
  Tensor values;      // input permuted (kept dims first) and contiguous
};
// `dims` empty or absent reduces everything, as upstream's dim=[] does.
ReducePlan plan_reduce(const Tensor& self, const std::optional<std::vector<int64_t>>& dims, bool keepdim);

// Reduces with an accumulator: init, step(acc, x, j) per element, finish(acc, n).
template <typename Acc, typename Out, typename In, typename Step, typename Finish>
void reduce_loop(const ReducePlan& plan, Tensor& out, Acc init, Step step, Finish finish) {
  if (out.is_meta()) return;
  const In* in = plan.values.template data_as<In>();
  Out* o = out.template data_as<Out>();
  int64_t outer = out.numel();
  for (int64_t i = 0; i < outer; ++i) {
    Acc acc = init;
    const In* row = in + i * plan.inner;
    for (int64_t j = 0; j < plan.inner; ++j) acc = step(acc, row[j], j);
    o[i] = finish(acc, plan.inner);
  }
}

// The elements in order as a 1-D tensor (a view when already contiguous).
Tensor flat(const Tensor& t);

// A contiguous tensor seen along one dim: `outer` blocks of `size` rows of `inner` values;
// a column is one value of `inner` in one block, the dim's `size` values `inner` apart.
struct AlongDim {
  int64_t outer = 1, size = 1, inner = 1;
  AlongDim(const Shape& sizes, int64_t dim) : size(sizes.empty() ? 1 : sizes[size_t(dim)]) {
    for (int64_t d = 0; d < int64_t(sizes.size()); ++d) {
      if (d < dim) outer *= sizes[size_t(d)];
      if (d > dim) inner *= sizes[size_t(d)];
    }
  }
  int64_t start(int64_t column) const { return column / inner * size * inner + column % inner; }
};

// A tensor as rows along `dim` (moved last, contiguous), for scans and per-row work.
struct Rows {
  Tensor data;          // contiguous, shape = moved
  int64_t length = 1;   // row length (size of dim; 1 for 0-dim tensors)
  int64_t count = 0;    // number of rows
  Shape moved;          // the permuted shape
  Shape perm;           // perm[i] = source dim of moved dim i
  int64_t dim = 0;      // wrapped dim
  bool scalar = false;  // the source was 0-dim (treated as one row of one)
};
Rows rows_along(const Tensor& t, int64_t dim);
// Lays rows (contiguous, `count` rows of `length`) back with the row dim at `rows.dim`;
// `length` may differ from the source's (1 for a per-row result), `keepdim` false drops it.
Tensor from_rows(const Tensor& data, const Rows& rows, int64_t length, bool keepdim);

// Reduction dims as schemas give them: none or empty means every dim.
using Dims = std::optional<std::vector<int64_t>>;

Tensor scalar_tensor(const Scalar& s);  // a wrapped-number 0-dim tensor
// A Python float as a wrapped number: ranks below tensors in promotion, as `x * 0.5` does.
inline Tensor float_number(double v) { return scalar_tensor(Scalar(v)); }
// A per-channel [C] tensor as [1, C, 1, ...] of rank `ndim`, broadcasting along dim 1.
inline Tensor per_channel(const Tensor& p, int64_t ndim) {
  Shape shape(size_t(ndim), 1);
  shape[1] = p.numel();
  return ops::reshape(p, shape);
}
inline Tensor scalar_arg(const Args& a, size_t i) { return scalar_tensor(a.scalar(i)); }

constexpr double kPi = 3.141592653589793238462643383279502884;

// Integral (and bool) inputs accumulate and return int64 (sum, prod, cumsum, nansum).
inline ScalarType integral_to_long(ScalarType t, std::optional<ScalarType> dtype) {
  return dtype.value_or(is_integral(t, true) ? ScalarType::Long : t);
}

// out[i] = f(a[i]) on the floating version of `a` (integers promote to the default
// dtype), computed in double; `half_kernel` names upstream's kernel when it has no
// float16 CPU implementation (nullptr: float16 works).
template <typename F>
Tensor float_unary(const Tensor& a, const char* half_kernel, F f);

// The "*_vml_cpu" kernels: on a CPU with AVX2, upstream's SLEEF functions element by
// element (float32, float64, and bfloat16 through float32, as upstream's vectors do);
// elsewhere `fallback` in double.
template <typename F>
Tensor vml_unary(const Tensor& a, const char* half_kernel, VmlOp op, F fallback) {
  ScalarType t = float_type(a.dtype());
  if (t == ScalarType::Half) dtype_not_implemented(half_kernel, t);
  if (!vml_available()) return float_unary(a, half_kernel, fallback);
  ScalarType compute = t == ScalarType::Double ? ScalarType::Double : ScalarType::Float;
  Tensor out = empty_for_operands(a.sizes(), {a}, compute, compute);
  if (out.is_meta()) return to_keeping_layout(out, t);
  // The input laid out as the output, so one flat pass over memory computes every element.
  Tensor in = a.to(compute);
  if (in.strides() != out.strides()) {
    in = empty_with_strides(a.sizes(), out.strides(), compute);
    in.copy_from(a);
  }
  // SLEEF computes every element, the tail's too, so where threads split does not matter.
  parallel_for(in.numel(), kGrainSize, [&](int64_t begin, int64_t end) {
    if (compute == ScalarType::Double)
      vml_apply(op, in.data_as<double>() + begin, out.data_as<double>() + begin, end - begin);
    else
      vml_apply(op, in.data_as<float>() + begin, out.data_as<float>() + begin, end - begin);
  });
  return to_keeping_layout(out, t);
}

// Upstream's cpu_kernel_vec on a CPU with AVX2 runs its vectorized lambda (SLEEF math)
// on whole blocks of `block` elements (2 * Vectorized<T>::size()) along TensorIterator's
// innermost coalesced dimension, and its scalar lambda (libm) on each row's remainder and
// on rows whose inputs are not contiguous there (one broadcast input is allowed); so
// which function an element gets depends on the shape and the inputs' layouts. Returns,
// in row-major order of `shape`, true for the elements the vectorized lambda computes.
// `inputs` are the operands as given (their strides, before conversion to `common`).
std::vector<bool> vectorized_elements(const Shape& shape, const std::vector<Tensor>& inputs,
                                      ScalarType common, int64_t block);

// The mean over `dims` (none or empty: all) in `t`, added in input order in double and
// rounded once: upstream's order for batch_norm's statistics, and at least as accurate
// as its float accumulation for float16/bfloat16.
Tensor sequential_mean(const Tensor& self, const std::optional<std::vector<int64_t>>& dims, bool keepdim,
                       ScalarType t);

// Upstream's cascade sum (sum and nansum of float32/float64) over `dims` (none or empty:
// all) of `self` converted to `t`, in its order: the same TensorIterator layout, the
// same choice of inner/outer, vectorized/scalar loops and the same multi-level
// accumulators, in the storage type. `ignore_nan` counts NaN as 0 (nansum).
Tensor cascade_sum(const Tensor& self, ScalarType t, const std::optional<std::vector<int64_t>>& dims,
                   bool keepdim, bool ignore_nan);

// Upstream's float32 2-norm over `dims` (none or empty: all), in its order: the
// vectorized last-dim kernel when exactly one contiguous dim is reduced, else one
// FMA-contracted running sum per result in TensorIterator's order.
Tensor norm2_float(const Tensor& self, const std::optional<std::vector<int64_t>>& dims, bool keepdim);

// float and double: upstream computes an expression of several operations in the storage
// type, rounding after each (compute_t's one rounding from double equals that only for a
// single operation).
template <typename scalar_t>
constexpr bool in_storage_type_v = std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, double>;

// A Scalar argument (alpha, value) as upstream's kernel holds it: in the storage type.
template <typename scalar_t>
compute_t<scalar_t> scalar_argument(const Scalar& s) {
  if constexpr (in_storage_type_v<scalar_t>)
    return s.to<scalar_t>();
  else
    return s.to<compute_t<scalar_t>>();
}

// x * y + z as upstream's float and double kernels compute it: its compiler contracts a
// multiply feeding an add into one FMA, in its vector and scalar loops alike (add's
// x + alpha * y rounds once).
template <typename scalar_t, typename T>
T multiply_add(T x, T y, T z) {
  if constexpr (in_storage_type_v<scalar_t>)
    return std::fma(scalar_t(x), scalar_t(y), scalar_t(z));
  else
    return T(x * y + z);
}

// x + alpha * y as upstream's add kernel rounds it: once (a fused multiply-add, which for
// alpha 1 is the plain sum).
template <typename scalar_t, typename T>
T add_scaled(T x, T y, T alpha) {
  return alpha == T(1) ? T(x + y) : multiply_add<scalar_t>(alpha, y, x);
}

// `x` holds result's dtype and shape with result's (dense) strides, so one flat pass over
// memory visits both alike.
inline bool laid_out_as(const Tensor& x, const Tensor& result) {
  return x.dtype() == result.dtype() && x.sizes() == result.sizes() && x.strides() == result.strides();
}

// cpu_kernel_vec when every input is laid out as the result: TensorIterator coalesces them
// into one row in memory order and splits it between threads, and each chunk runs the
// vectorized lambda on its whole blocks from the chunk's start and the scalar one on the rest.
template <typename T, size_t N, typename ScalarFn, typename VectorFn>
void cpu_kernel_vec_dense(const std::array<Tensor, N>& inputs, Tensor& result, ScalarFn scalar,
                          VectorFn vector) {
  std::array<const T*, N> in;
  for (size_t k = 0; k < N; ++k) in[k] = inputs[k].template data_as<T>();
  T* out = result.data_as<T>();
  int64_t block = vml_available() ? 64 / int64_t(sizeof(T)) : 0;
  parallel_for(result.numel(), kGrainSize, [&](int64_t begin, int64_t end) {
    int64_t body = block ? (end - begin) / block * block : 0;
    if constexpr (N == 1) {
      if (body) vector(in[0] + begin, out + begin, body);
      for (int64_t i = begin + body; i < end; ++i) out[i] = scalar(in[0][i]);
    } else {
      if (body) vector(in[0] + begin, in[1] + begin, out + begin, body);
      for (int64_t i = begin + body; i < end; ++i) out[i] = scalar(in[0][i], in[1][i]);
    }
  });
}

// An elementwise float/double kernel as upstream's cpu_kernel_vec computes it: `scalar`
// (taking and returning T, so float stays float as in upstream's scalar lambda) on the
// elements vectorized_elements leaves to it, `vector(in..., out, n)` on the others,
// packed (lanes are independent, so packing does not change their bits).
template <typename T, size_t N, typename ScalarFn, typename VectorFn>
Tensor cpu_kernel_vec(const std::array<Tensor, N>& inputs, ScalarFn scalar, VectorFn vector) {
  static_assert(N == 1 || N == 2);
  constexpr ScalarType t = std::is_same_v<T, double> ? ScalarType::Double : ScalarType::Float;
  Shape shape = inputs[0].sizes();
  for (size_t k = 1; k < N; ++k) shape = broadcast_shapes(shape, inputs[k].sizes());
  Tensor result = empty_for_operands(shape, std::vector<Tensor>(inputs.begin(), inputs.end()), t, t);
  if (result.is_meta()) return result;  // the meta device: the shape and dtype are the result
  if (std::all_of(inputs.begin(), inputs.end(), [&](const Tensor& x) { return laid_out_as(x, result); })) {
    cpu_kernel_vec_dense<T, N>(inputs, result, scalar, vector);
    return result;
  }
  std::vector<bool> vectorized = vectorized_elements(shape, std::vector<Tensor>(inputs.begin(), inputs.end()),
                                                     t, 64 / int64_t(sizeof(T)));
  // Computed in row-major order (vectorized_elements' order), then laid out as upstream's.
  Tensor out = result.is_contiguous() ? result : Tensor::empty(shape, t);
  std::array<Tensor, N> dense;
  std::array<const T*, N> in;
  for (size_t k = 0; k < N; ++k) {
    dense[k] = ops::expand(inputs[k].to(t), shape, false).contiguous();
    in[k] = dense[k].template data_as<T>();
  }
  T* po = out.data_as<T>();
  std::array<std::vector<T>, N> packed;
  std::vector<int64_t> where;
  int64_t n = out.numel();
  for (int64_t i = 0; i < n; ++i) {
    if (vectorized[size_t(i)]) {
      where.push_back(i);
      for (size_t k = 0; k < N; ++k) packed[k].push_back(in[k][i]);
    } else if constexpr (N == 1) {
      po[i] = scalar(in[0][i]);
    } else {
      po[i] = scalar(in[0][i], in[1][i]);
    }
  }
  if (!where.empty()) {
    std::vector<T> results(where.size());
    if constexpr (N == 1)
      vector(packed[0].data(), results.data(), int64_t(where.size()));
    else
      vector(packed[0].data(), packed[1].data(), results.data(), int64_t(where.size()));
    for (size_t j = 0; j < where.size(); ++j) po[where[j]] = results[j];
  }
  if (!out.same(result)) result.copy_from(out);
  return result;
}

// Binary on the float result type of both operands (integers promote to the default dtype).
// float32 operands reach `f` as float, so a generic `f` computes in float as upstream's
// scalar kernels do; one taking double computes in double.
template <typename F>
Tensor float_binary(const Tensor& a, const Tensor& b, const char* half_kernel, F f) {
  ScalarType t = float_type(result_type(a, b));
  if (t == ScalarType::Half && half_kernel) dtype_not_implemented(half_kernel, t);
  return TN_DISPATCH_ALL_TYPES(t, "binary", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    if constexpr (std::is_same_v<scalar_t, float>)
      return map_binary<scalar_t>(a, b, t,
                                  [&](double x, double y) -> double { return f(float(x), float(y)); });
    else if constexpr (std::is_floating_point_v<compute_t<scalar_t>>)
      return map_binary<scalar_t>(a, b, t, [&](double x, double y) -> double { return f(x, y); });
    else
      return Tensor();
  });
}

template <typename F>
Tensor float_unary(const Tensor& a, const char* half_kernel, F f) {
  ScalarType t = float_type(a.dtype());
  if (t == ScalarType::Half && half_kernel) dtype_not_implemented(half_kernel, t);
  return TN_DISPATCH_ALL_TYPES(t, "unary", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    if constexpr (std::is_floating_point_v<compute_t<scalar_t>>)
      return map_unary<scalar_t>(a, t, [&](double x) -> double { return f(x); });
    else
      return Tensor();
  });
}

// out (m x n, rows contiguous) = beta * out + alpha * a @ b, through BLAS for float32 and
// float64 as upstream's addmm; beta == 0 ignores out's contents.
void gemm(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha);

// clamp by Python numbers (neither NaN) computed into a float32/float64 `self` whose elements
// are dense, as upstream's in-place clamp writes self with no temporary; false, and nothing
// written, for any other self.
bool clamp_in_place(const Tensor& self, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi);
// An in-place call finished as the door finishes one that has no kernel of its own: `result`,
// the functional's, checked against self's dtype by the family's rules, then copied into self
// (unless the kernel wrote self itself: output_for).
Tensor write_in_place(const Tensor& self, const std::string& family, const Tensor& result);

// Upstream's check_linalg_norm_dtype: a norm's dtype= is a floating type the input widens to.
void check_linalg_norm_dtype(std::optional<ScalarType> dtype, ScalarType input, const char* name);

}  // namespace tn
