// Shared kernel machinery: type promotion, broadcasting strided loops, and calling
// other operators through the door.
#pragma once

#include <cmath>
#include <type_traits>

#include "ops.h"

namespace tn {

// The computation type of a storage type: half and bfloat16 compute in float.
template <typename T>
using compute_t = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

// Upstream's result_type over tensors and Python numbers (wrapped numbers rank lowest,
// then 0-dim tensors, then the rest; a higher category from a lower rank still wins).
class ResultType {
 public:
  void add(const Tensor& t);
  void add(const Scalar& s);
  ScalarType get() const;

 private:
  ScalarType dim_ = ScalarType::Undefined, zero_ = ScalarType::Undefined,
             wrapped_ = ScalarType::Undefined;
};

ScalarType result_type(const Tensor& a, const Tensor& b);
// Integer and bool inputs of floating functions (exp, sqrt, div) give the default dtype.
ScalarType float_type(ScalarType t);

// Strides of `t` seen at `shape` after broadcasting (0 on broadcast dimensions).
Shape broadcast_strides(const Tensor& t, const Shape& shape);

// Calls f(offset_0, ..., offset_{N-1}) for every element of `shape`, offsets in elements.
template <size_t N, typename F>
void strided_loop(const Shape& shape, const std::array<Shape, N>& strides, F&& f) {
  int64_t total = 1;
  for (int64_t s : shape) total *= s;
  if (total == 0) return;
  int64_t nd = int64_t(shape.size());
  if (nd == 0) {
    std::array<int64_t, N> offsets{};
    f(offsets);
    return;
  }
  int64_t inner = shape[nd - 1];
  std::array<int64_t, N> inner_stride;
  for (size_t k = 0; k < N; ++k) inner_stride[k] = strides[k][nd - 1];
  Shape outer_shape(shape.begin(), shape.end() - 1);
  IndexCounter counter(outer_shape);
  int64_t outer_total = total / inner;
  for (int64_t o = 0; o < outer_total; ++o, counter.next()) {
    std::array<int64_t, N> base{};
    for (int64_t d = 0; d < nd - 1; ++d)
      for (size_t k = 0; k < N; ++k) base[k] += counter.index()[d] * strides[k][d];
    for (int64_t i = 0; i < inner; ++i) {
      std::array<int64_t, N> offsets;
      for (size_t k = 0; k < N; ++k) offsets[k] = base[k] + i * inner_stride[k];
      f(offsets);
    }
  }
}

// out[i] = f(a[i]): input converted to `compute` (whose C++ type is in_t), output
// stored as in_t or, when `out_type` is Bool, as bool. Typed by the caller's dispatch,
// so each call instantiates two loops, not one per dtype pair.
template <typename in_t, typename F>
Tensor map_unary(const Tensor& a, ScalarType compute, ScalarType out_type, F&& f) {
  Tensor in = a.to(compute);
  Tensor out = Tensor::empty(a.sizes(), out_type);
  auto run = [&](auto* po) {
    using out_t = std::remove_pointer_t<decltype(po)>;
    const in_t* x = in.data_as<in_t>();
    strided_loop<2>(a.sizes(), {out.strides(), in.strides()}, [&](const std::array<int64_t, 2>& o) {
      po[o[0]] = out_t(f(compute_t<in_t>(x[o[1]])));
    });
  };
  if (out_type == ScalarType::Bool) run(out.data_as<bool>());
  else run(out.data_as<in_t>());
  return out;
}

// out = f(a, b) broadcast; typed like map_unary.
template <typename in_t, typename F>
Tensor map_binary(const Tensor& a, const Tensor& b, ScalarType compute, ScalarType out_type, F&& f) {
  Shape shape = broadcast_shapes(a.sizes(), b.sizes());
  Tensor x = a.to(compute), y = b.to(compute);
  Tensor out = Tensor::empty(shape, out_type);
  const in_t* px = x.data_as<in_t>();
  const in_t* py = y.data_as<in_t>();
  auto run = [&](auto* po) {
    using out_t = std::remove_pointer_t<decltype(po)>;
    strided_loop<3>(shape, {out.strides(), broadcast_strides(x, shape), broadcast_strides(y, shape)},
                    [&](const std::array<int64_t, 3>& o) {
                      po[o[0]] = out_t(f(compute_t<in_t>(px[o[1]]), compute_t<in_t>(py[o[2]])));
                    });
  };
  if (out_type == ScalarType::Bool) run(out.data_as<bool>());
  else run(out.data_as<in_t>());
  return out;
}

// Calls an operator through the door and returns its first result.
IValue call_op(const std::string& qualified_name, const std::string& overload, Stack args);
Tensor call_tensor_op(const std::string& qualified_name, const std::string& overload, Stack args);

Tensor scalar_tensor(const Scalar& s);  // a wrapped-number 0-dim tensor

}  // namespace tn
