// Factories: empty/zeros/ones/full and their _like and new_ forms, scalar_tensor, arange, linspace, logspace,
// eye, tril_indices, triu_indices.
#include <cmath>
#include <limits>
#include <numeric>

#include "common.h"
#include "core/overlap.h"
#include "typed_ops.h"

namespace tn {

namespace {

ScalarType dtype_or_default(const Args& a, size_t i) { return a.optional_dtype(i).value_or(default_dtype()); }

// memory_format=preserve (the default of *_like and clone): a dense, non-overlapping
// input's strides are kept; anything else is laid out densely in its stride order
// (upstream's infer_dense_strides).
Tensor empty_like(const Tensor& self, ScalarType dtype, std::optional<int64_t> memory_format) {
  bool preserve = !memory_format || *memory_format == int64_t(MemoryFormat::Preserve);
  if (!preserve) return Tensor::empty(self.sizes(), dtype);
  return empty_with_strides(
      self.sizes(),
      is_non_overlapping_and_dense(self) ? self.strides() : dense_strides_like(self.sizes(), self.strides()),
      dtype);
}

Tensor full_like(const Tensor& self, const Scalar& value, ScalarType dtype,
                 std::optional<int64_t> memory_format) {
  Tensor out = empty_like(self, dtype, memory_format);
  out.copy_from(scalar_tensor(value));
  return out;
}

Tensor full(const Shape& size, const Scalar& value, std::optional<ScalarType> dtype) {
  ScalarType t = dtype ? *dtype : (value.is_float() ? default_dtype() : value.type());
  Tensor out = Tensor::empty(size, t);
  out.copy_from(scalar_tensor(value));
  return out;
}

// Upstream 1.13.1's AVX2 linspace and arange, run on one thread, fill whole blocks of two 32-byte
// vectors and then the elements after the last whole block one at a time. A vector's base is
// computed like a lone element (for linspace its first index picks the formula for every lane)
// and lane j adds j * step to the base. `Rule` gives both for one element type.
template <typename scalar_t, typename Rule>
void fill_in_vector_blocks(scalar_t* p, int64_t steps, const Rule& rule) {
  constexpr int64_t lanes = 32 / int64_t(sizeof(scalar_t));
  int64_t blocked = steps / (2 * lanes) * (2 * lanes);
  for (int64_t first = 0; first < blocked; first += lanes) {
    scalar_t base = rule.element(first);
    for (int64_t j = 0; j < lanes; ++j) p[first + j] = rule.lane(base, j);
  }
  for (int64_t i = blocked; i < steps; ++i) p[i] = rule.element(i);
}

// float and double: a lone element fuses its multiply-add (upstream's kernel is built with FMA
// contraction); a lane rounds its product before the add (upstream's arange of a vector).
template <typename T>
struct FloatLinspace {
  T start, end, step;
  int64_t steps;
  T element(int64_t i) const {
    return i < steps / 2 ? std::fma(step, T(i), start) : std::fma(-step, T(steps - i - 1), end);
  }
  T lane(T base, int64_t j) const {
    T offset = T(j) * step;
    return base + offset;
  }
};

// float16 and bfloat16: every operation is rounded to the type, the index included, as
// upstream's Half and BFloat16 operators do (their products cannot fuse).
template <typename T>
struct ReducedLinspace {
  T start, end, step;
  int64_t steps;
  static T times(T a, int64_t n) { return T(float(a) * float(T(float(n)))); }
  T element(int64_t i) const {
    return i < steps / 2 ? T(float(start) + float(times(step, i)))
                         : T(float(end) - float(times(step, steps - i - 1)));
  }
  T lane(T base, int64_t j) const { return T(float(base) + float(times(step, j))); }
};

// Integers: the step is a double, a lone element's multiply-add fuses, and every value is
// truncated to the type, a vector's base before its lanes add to it.
template <typename T>
struct IntegerLinspace {
  double start, end, step;
  int64_t steps;
  static T truncated(double value) {
    // Rounding past an end can leave [lowest, max] only for 64-bit ends near +-2^63.
    if (!(value > -0x1p63 && value < 0x1p63)) throw Error("linspace: a value past int64's range");
    return T(int64_t(value));
  }
  T element(int64_t i) const {
    return truncated(i < steps / 2 ? std::fma(step, double(i), start)
                                   : std::fma(-step, double(steps - i - 1), end));
  }
  T lane(T base, int64_t j) const { return truncated(double(base) + double(j) * step); }
};

// How upstream's Scalar accessors name their types in an overflow refusal.
template <typename scalar_t>
const char* end_type_name() {
  if constexpr (std::is_same_v<scalar_t, Half>)
    return "at::Half";
  else if constexpr (std::is_same_v<scalar_t, BFloat16>)
    return "at::BFloat16";
  else if constexpr (std::is_same_v<scalar_t, float>)
    return "float";
  else if constexpr (std::is_same_v<scalar_t, double>)
    return "double";
  else if constexpr (std::is_same_v<scalar_t, uint8_t>)
    return "uint8_t";
  else if constexpr (std::is_same_v<scalar_t, int8_t>)
    return "int8_t";
  else if constexpr (std::is_same_v<scalar_t, int16_t>)
    return "int16_t";
  else if constexpr (std::is_same_v<scalar_t, int32_t>)
    return "int";
  else
    return "int64_t";
}

// Upstream's checked conversion into the output type, refused in its words when the value lies
// outside the type's range (inf fits a floating type; a negative integer, not a negative float,
// wraps into an unsigned type when its magnitude fits).
template <typename scalar_t>
void check_fits(double value, bool is_integer) {
  using limits = std::numeric_limits<scalar_t>;
  double lowest = std::is_same_v<scalar_t, Half>       ? -65504.0
                  : std::is_same_v<scalar_t, BFloat16> ? -0x1.fep127
                                                       : double(limits::lowest());
  double highest = -lowest;
  if constexpr (std::is_integral_v<scalar_t>) highest = double(limits::max());
  if (std::is_unsigned_v<scalar_t> && is_integer) lowest = -highest;
  bool fits = (value >= lowest && value <= highest) ||
              (std::is_floating_point_v<compute_t<scalar_t>> && std::isinf(value));
  if (!fits)
    throw Error(std::string("value cannot be converted to type ") + end_type_name<scalar_t>() +
                " without overflow");
}

template <typename scalar_t>
scalar_t checked_end(const Scalar& value) {
  if (value.is_float())
    check_fits<scalar_t>(value.to_double(), false);
  else if (!value.is_bool())
    check_fits<scalar_t>(double(value.to_int()), true);
  return value.to<scalar_t>();
}

template <typename scalar_t>
void linspace_typed(scalar_t* p, const Scalar& start, const Scalar& end, int64_t steps) {
  // The ends are converted to the output type first (one step fills with the start alone, so
  // the end goes unchecked), the step computed in that type.
  scalar_t first = checked_end<scalar_t>(start);
  if (steps == 1) {
    p[0] = first;
    return;
  }
  scalar_t last = checked_end<scalar_t>(end);
  if constexpr (std::is_integral_v<scalar_t>) {
    double step = (double(last) - double(first)) / double(steps - 1);
    fill_in_vector_blocks(p, steps, IntegerLinspace<scalar_t>{double(first), double(last), step, steps});
  } else if constexpr (std::is_floating_point_v<scalar_t>) {
    fill_in_vector_blocks(p, steps,
                          FloatLinspace<scalar_t>{first, last, (last - first) / scalar_t(steps - 1), steps});
  } else {
    scalar_t range = scalar_t(float(last) - float(first));
    scalar_t step = scalar_t(float(range) / float(scalar_t(float(steps - 1))));
    fill_in_vector_blocks(p, steps, ReducedLinspace<scalar_t>{first, last, step, steps});
  }
}

Tensor linspace(const Scalar& start, const Scalar& end, int64_t steps, std::optional<ScalarType> dtype) {
  if (steps < 0) throw Error("number of steps must be non-negative");
  ScalarType t = dtype.value_or(default_dtype());
  if (t == ScalarType::Bool) dtype_not_implemented("linspace_cpu", t);
  Tensor out = Tensor::empty({steps}, t);
  if (steps == 0) return out;
  TN_DISPATCH_ALL_TYPES(t, "linspace", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    linspace_typed(out.template data_as<scalar_t>(), start, end, steps);
  });
  return out;
}

// A logspace value stored in the output type. Upstream stores a double that may lie past an integer
// type's range, which x86's truncating conversion (cvttsd2si) answers deterministically: the
// lowest int64 past int64's range, else the lowest int32 past int32's range, narrower types
// keeping the low bits of the int32.
template <typename scalar_t>
scalar_t logspace_value(double value) {
  if constexpr (std::is_same_v<scalar_t, int64_t>) {
    bool fits = value >= -0x1p63 && value < 0x1p63;
    return fits ? int64_t(value) : std::numeric_limits<int64_t>::lowest();
  } else if constexpr (std::is_integral_v<scalar_t>) {
    bool fits = value > -0x1p31 - 1 && value < 0x1p31;
    return scalar_t(fits ? int32_t(value) : std::numeric_limits<int32_t>::lowest());
  } else {
    return scalar_t(value);
  }
}

// end - start as upstream's logspace takes it: in the output type (bfloat16 rounding to it),
// integers exactly in int64 (int32 ends further apart than int32 holds are where upstream overflows).
template <typename scalar_t>
double logspace_range(scalar_t first, scalar_t last) {
  if constexpr (std::is_integral_v<scalar_t>) {
    int64_t range = 0;
    if (__builtin_sub_overflow(int64_t(last), int64_t(first), &range))
      throw Error("logspace: end - start past int64's range");
    return double(range);
  } else if constexpr (std::is_floating_point_v<scalar_t>) {
    return double(last - first);
  } else {
    return double(scalar_t(float(last) - float(first)));
  }
}

// Upstream's logspace is a loop of its own, not linspace's kernel: element by element, the
// exponent in double without fused multiply-adds (start + step*i in the first half, end -
// step*(steps-i-1) in the second) and the range taken in the output type.
template <typename scalar_t>
void logspace_typed(scalar_t* p, const Scalar& start, const Scalar& end, int64_t steps, double base) {
  if (steps == 1) {  // a fill with the power, checked like any filled value
    double power = std::pow(base, start.to_double());
    check_fits<scalar_t>(power, false);
    p[0] = logspace_value<scalar_t>(power);
    return;
  }
  scalar_t first = checked_end<scalar_t>(start), last = checked_end<scalar_t>(end);
  double step = logspace_range(first, last) / double(steps - 1);
  for (int64_t i = 0; i < steps; ++i) {
    double exponent =
        i < steps / 2 ? double(first) + step * double(i) : double(last) - step * double(steps - i - 1);
    p[i] = logspace_value<scalar_t>(std::pow(base, exponent));
  }
}

Tensor logspace(const Scalar& start, const Scalar& end, int64_t steps, double base,
                std::optional<ScalarType> dtype) {
  if (steps < 0) throw Error("number of steps must be non-negative");
  ScalarType t = dtype.value_or(default_dtype());
  // One step is a fill, which float16 has; more need upstream's loop, which it lacks.
  if (t == ScalarType::Bool || (t == ScalarType::Half && steps > 1)) dtype_not_implemented("logspace_cpu", t);
  Tensor out = Tensor::empty({steps}, t);
  if (steps == 0) return out;
  TN_DISPATCH_ALL_TYPES(t, "logspace", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    logspace_typed(out.template data_as<scalar_t>(), start, end, steps, base);
  });
  return out;
}

// A floating arange: upstream accumulates in double (float32, float64) or float (float16,
// bfloat16); a lone element fuses start + step * i in that type, a lane adds j * step to the
// vector's base, which is already in the output type.
template <typename T, typename acc_t>
struct FloatArange {
  acc_t start, step;
  T element(int64_t i) const { return T(std::fma(step, acc_t(i), start)); }
  T lane(T base, int64_t j) const {
    // Measured: float64's lanes fuse here (not in linspace), the narrower types' do not.
    if constexpr (std::is_same_v<T, double>) return std::fma(acc_t(j), step, base);
    acc_t offset = acc_t(j) * step;
    return T(acc_t(base) + offset);
  }
};

// An integer arange as upstream's: start, end and step truncated to int64 (a step under one in
// magnitude is zero), the count from those for int64 and from the given values for the narrower
// types, each element start + step * i in int64 converted to the type.
Tensor integer_arange(const Scalar& start, const Scalar& end, const Scalar& step, ScalarType t) {
  int64_t first = start.to_int(), last = end.to_int(), stride = step.to_int();
  if (stride == 0) throw Error("step must be nonzero");
  if ((stride > 0 && last < first) || (stride < 0 && last > first))
    throw Error("upper bound and larger bound inconsistent with step sign");
  int64_t span = 0;
  if (__builtin_sub_overflow(last, first, &span)) throw Error("arange: end - start past int64's range");
  double count = t == ScalarType::Long ? double(span) / double(stride)
                                       : (end.to_double() - start.to_double()) / step.to_double();
  Tensor out = Tensor::empty({int64_t(std::ceil(count))}, t);
  TN_DISPATCH_ALL_TYPES(t, "arange", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    scalar_t* p = out.data_as<scalar_t>();
    for (int64_t i = 0; i < out.numel(); ++i) p[i] = scalar_t(first + stride * i);
  });
  return out;
}

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, std::optional<ScalarType> dtype) {
  bool any_float = start.is_float() || end.is_float() || step.is_float();
  ScalarType t = dtype.value_or(any_float ? default_dtype() : ScalarType::Long);
  if (t == ScalarType::Bool) dtype_not_implemented("arange_cpu", t);
  if (!is_floating(t)) return integer_arange(start, end, step, t);
  double s = start.to_double(), e = end.to_double(), st = step.to_double();
  if (st == 0) throw Error("step must be nonzero");
  if ((st > 0 && e < s) || (st < 0 && e > s))
    throw Error("upper bound and larger bound inconsistent with step sign");
  int64_t n = int64_t(std::ceil((e - s) / st));
  Tensor out = Tensor::empty({n}, t);
  TN_DISPATCH_ALL_TYPES(t, "arange", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    if constexpr (std::is_floating_point_v<compute_t<scalar_t>>) {
      using acc_t = std::conditional_t<sizeof(scalar_t) == 2, float, double>;
      fill_in_vector_blocks(out.data_as<scalar_t>(), n, FloatArange<scalar_t, acc_t>{acc_t(s), acc_t(st)});
    }
  });
  return out;
}

Tensor eye(int64_t n, int64_t m, std::optional<ScalarType> dtype) {
  if (n < 0) throw Error("n must be greater or equal to 0, got " + std::to_string(n));
  if (m < 0) throw Error("m must be greater or equal to 0, got " + std::to_string(m));
  if (dtype == ScalarType::BFloat16) dtype_not_implemented("eye", *dtype);
  Tensor out = full({n, m}, Scalar(int64_t{0}), dtype.value_or(default_dtype()));
  TN_DISPATCH_ALL_TYPES(out.dtype(), "eye", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    for (int64_t i = 0; i < std::min(n, m); ++i)
      out.data_as<scalar_t>()[i * m + i] = Scalar(int64_t{1}).to<scalar_t>();
  });
  return out;
}

// eye.out zeroes `out` and fills its diagonal through out's own strides, as upstream does:
// on an expanded out the ones land where that walk puts them.
Tensor eye_into(const Tensor& out, int64_t n, int64_t m) {
  if (n < 0) throw Error("n must be greater or equal to 0, got " + std::to_string(n));
  if (m < 0) throw Error("m must be greater or equal to 0, got " + std::to_string(m));
  if (out.dtype() == ScalarType::BFloat16) dtype_not_implemented("eye", out.dtype());
  if (out.sizes() != Shape{n, m}) out.resize({n, m});
  ops::fill_(out, Scalar(int64_t{0}));
  Tensor diagonal = out.view_as_strided({std::min(n, m)}, {out.stride(0) + out.stride(1)}, out.offset());
  ops::fill_(diagonal, Scalar(int64_t{1}));
  return out;
}

Tensor index_pairs(int64_t row, int64_t col, int64_t offset, bool lower) {
  std::vector<int64_t> rows, cols;
  for (int64_t i = 0; i < row; ++i)
    for (int64_t j = 0; j < col; ++j)
      if (lower ? j - i <= offset : j - i >= offset) {
        rows.push_back(i);
        cols.push_back(j);
      }
  int64_t n = int64_t(rows.size());
  Tensor out = Tensor::empty({2, n}, ScalarType::Long);
  std::copy(rows.begin(), rows.end(), out.data_as<int64_t>());
  std::copy(cols.begin(), cols.end(), out.data_as<int64_t>() + n);
  return out;
}

}  // namespace

TN_KERNEL("aten::empty.memory_format", { return Tensor::empty(a.int_list(0), dtype_or_default(a, 1)); });
// Upstream only resizes the out tensor: what it holds stays.
TN_KERNEL("aten::empty.out", {
  const Tensor& out = a.tensor(2);
  out.resize(a.int_list(0));
  return out;
});
TN_KERNEL("aten::empty_strided", {
  Shape size = a.int_list(0), stride = a.int_list(1);
  int64_t extent = 1;
  for (size_t i = 0; i < size.size(); ++i) extent += (size[i] - 1) * stride[i];
  ScalarType t = dtype_or_default(a, 2);
  auto storage = std::make_shared<Storage>(size_t(std::max<int64_t>(extent, 0)) * element_size(t));
  return Tensor::from_storage(storage, size, stride, 0, t);
});
TN_KERNEL("aten::zeros", { return full(a.int_list(0), Scalar(int64_t{0}), dtype_or_default(a, 1)); });
TN_KERNEL("aten::ones", { return full(a.int_list(0), Scalar(int64_t{1}), dtype_or_default(a, 1)); });
TN_KERNEL("aten::full", { return full(a.int_list(0), a.scalar(1), a.optional_dtype(2)); });
TN_KERNEL("aten::scalar_tensor", {
  Tensor t = Tensor::empty({}, dtype_or_default(a, 1));
  t.copy_from(scalar_tensor(a.scalar(0)));
  return t;
});
TN_KERNEL("aten::empty_like", {
  return empty_like(a.tensor(0), a.optional_dtype(1).value_or(a.tensor(0).dtype()), a.optional_integer(5));
});
TN_KERNEL("aten::zeros_like", {
  return full_like(a.tensor(0), Scalar(int64_t{0}), a.optional_dtype(1).value_or(a.tensor(0).dtype()),
                   a.optional_integer(5));
});
TN_KERNEL("aten::ones_like", {
  return full_like(a.tensor(0), Scalar(int64_t{1}), a.optional_dtype(1).value_or(a.tensor(0).dtype()),
                   a.optional_integer(5));
});
TN_KERNEL("aten::full_like", {
  return full_like(a.tensor(0), a.scalar(1), a.optional_dtype(2).value_or(a.tensor(0).dtype()),
                   a.optional_integer(6));
});
TN_KERNEL("aten::new_empty",
          { return Tensor::empty(a.int_list(1), a.optional_dtype(2).value_or(a.tensor(0).dtype())); });
TN_KERNEL("aten::new_zeros", {
  return full(a.int_list(1), Scalar(int64_t{0}), a.optional_dtype(2).value_or(a.tensor(0).dtype()));
});
TN_KERNEL("aten::new_ones", {
  return full(a.int_list(1), Scalar(int64_t{1}), a.optional_dtype(2).value_or(a.tensor(0).dtype()));
});
TN_KERNEL("aten::new_full",
          { return full(a.int_list(1), a.scalar(2), a.optional_dtype(3).value_or(a.tensor(0).dtype())); });
TN_KERNEL("aten::arange",
          { return arange(Scalar(int64_t{0}), a.scalar(0), Scalar(int64_t{1}), a.optional_dtype(1)); });
TN_KERNEL("aten::arange.start",
          { return arange(a.scalar(0), a.scalar(1), Scalar(int64_t{1}), a.optional_dtype(2)); });
TN_KERNEL("aten::arange.start_step",
          { return arange(a.scalar(0), a.scalar(1), a.scalar(2), a.optional_dtype(3)); });
TN_KERNEL("aten::linspace",
          { return linspace(a.scalar(0), a.scalar(1), a.integer(2), a.optional_dtype(3)); });
TN_KERNEL("aten::eye", { return eye(a.integer(0), a.integer(0), a.optional_dtype(1)); });
TN_KERNEL("aten::eye.m", { return eye(a.integer(0), a.integer(1), a.optional_dtype(2)); });
TN_KERNEL("aten::eye.out", { return eye_into(a.tensor(1), a.integer(0), a.integer(0)); });
TN_KERNEL("aten::eye.m_out", { return eye_into(a.tensor(2), a.integer(0), a.integer(1)); });
TN_KERNEL("aten::tril_indices", {
  return index_pairs(a.integer(0), a.integer(1), a.integer(2), true)
      .to(a.optional_dtype(3).value_or(ScalarType::Long));
});
TN_KERNEL("aten::triu_indices", {
  return index_pairs(a.integer(0), a.integer(1), a.integer(2), false)
      .to(a.optional_dtype(3).value_or(ScalarType::Long));
});
TN_KERNEL("aten::logspace",
          { return logspace(a.scalar(0), a.scalar(1), a.integer(2), a.real(3), a.optional_dtype(4)); });

}  // namespace tn
