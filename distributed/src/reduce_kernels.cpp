#include "reduce_kernels.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>
#include <type_traits>

#include "core/enum_name.h"

namespace tn::dist {

const char* reduce_op_name(ReduceOp op) {
  // In the enum's order.
  static constexpr const char* kNames[] = {"SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "AVG"};
  static_assert(std::size(kNames) == static_cast<size_t>(ReduceOp::Avg) + 1);
  return enum_name(op, kNames, "unknown reduce op");
}

namespace {

template <typename T>
constexpr bool is_floating =
    std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// Arithmetic in the width upstream's CPU kernels use for one element: float for the 16-bit
// floats (then rounded back), and unsigned for integers so overflow wraps like theirs.
template <typename T>
struct ComputeType {
  using type = T;
};
template <>
struct ComputeType<Half> {
  using type = float;
};
template <>
struct ComputeType<BFloat16> {
  using type = float;
};
template <typename T>
requires(std::is_integral_v<T> && !std::is_same_v<T, bool>) struct ComputeType<T> {
  using type = std::make_unsigned_t<T>;
};
template <typename T>
using Compute = typename ComputeType<T>::type;

// `op` is a template parameter so each loop below is one straight-line operation the compiler
// can vectorize; a run-time switch per element cost a quarter of a large allreduce.
template <ReduceOp op, typename T>
T combine(T a, T b) {
  using C = Compute<T>;
  const C x = static_cast<C>(a), y = static_cast<C>(b);
  if constexpr (std::is_same_v<T, bool>) {
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Max:
      case ReduceOp::Bor:
        return a || b;
      case ReduceOp::Product:
      case ReduceOp::Min:
      case ReduceOp::Band:
        return a && b;
      case ReduceOp::Bxor:
        return a != b;
      case ReduceOp::Avg:
        break;
    }
    return a;
  } else if constexpr (is_floating<T>) {
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg:
        return static_cast<T>(x + y);
      case ReduceOp::Product:
        return static_cast<T>(x * y);
      // torch.minimum/maximum: NaN wins, otherwise the first operand on ties.
      case ReduceOp::Min:
        return std::isnan(x) ? a : std::isnan(y) ? b : (y < x ? b : a);
      case ReduceOp::Max:
        return std::isnan(x) ? a : std::isnan(y) ? b : (y > x ? b : a);
      default:
        break;
    }
    return a;
  } else {
    switch (op) {
      case ReduceOp::Sum:
        return static_cast<T>(static_cast<C>(x + y));
      case ReduceOp::Product:
        return static_cast<T>(static_cast<C>(x * y));
      case ReduceOp::Min:
        return std::min(a, b);
      case ReduceOp::Max:
        return std::max(a, b);
      case ReduceOp::Band:
        return static_cast<T>(a & b);
      case ReduceOp::Bor:
        return static_cast<T>(a | b);
      case ReduceOp::Bxor:
        return static_cast<T>(a ^ b);
      case ReduceOp::Avg:
        break;
    }
    return a;
  }
}

template <typename T>
void average_typed(T* values, int num_sources, size_t count) {
  if constexpr (is_floating<T>)
    for (size_t i = 0; i < count; ++i)
      values[i] = static_cast<T>(static_cast<Compute<T>>(values[i]) / static_cast<Compute<T>>(num_sources));
}

template <ReduceOp op, typename T>
void reduce_typed(T* dst, const void* const* sources, int num_sources, size_t count) {
  // A block of accumulators on the stack: each source is read once per block, and dst may
  // alias a source because a block is written only after every source has been read.
  constexpr size_t kBlock = 1024;
  T acc[kBlock];
  for (size_t begin = 0; begin < count; begin += kBlock) {
    const size_t n = std::min(kBlock, count - begin);
    std::copy_n(static_cast<const T*>(sources[0]) + begin, n, acc);
    for (int s = 1; s < num_sources; ++s) {
      const T* src = static_cast<const T*>(sources[s]) + begin;
      for (size_t i = 0; i < n; ++i) acc[i] = combine<op>(acc[i], src[i]);
    }
    if (op == ReduceOp::Avg) average_typed(acc, num_sources, n);
    std::copy_n(acc, n, dst + begin);
  }
}

}  // namespace

void check_reducible(ScalarType dtype, ReduceOp op, const char* operation) {
  const bool floating = dtype == ScalarType::Float || dtype == ScalarType::Double ||
                        dtype == ScalarType::Half || dtype == ScalarType::BFloat16;
  const bool known = floating || dtype == ScalarType::Bool || dtype == ScalarType::Byte ||
                     dtype == ScalarType::Char || dtype == ScalarType::Short || dtype == ScalarType::Int ||
                     dtype == ScalarType::Long;
  const std::string what =
      std::string(operation) + " with ReduceOp." + reduce_op_name(op) + " on " + scalar_type_name(dtype);
  if (!known) throw InvalidArgument(what + " is not supported: ProcessGroupLocal reduces real dtypes only");
  if (floating && (op == ReduceOp::Band || op == ReduceOp::Bor || op == ReduceOp::Bxor))
    throw InvalidArgument(what + " is not supported: bitwise reductions need an integer or bool dtype");
  if (!floating && op == ReduceOp::Avg)
    throw InvalidArgument(what +
                          " is not supported: an integer average would truncate; reduce with SUM "
                          "and divide, or use a floating dtype");
}

void reduce_in_order(ScalarType dtype, ReduceOp op, void* dst, const void* const* sources, int num_sources,
                     size_t count) {
  TN_DISPATCH_ALL_TYPES(dtype, "reduce", [&](auto tag) {
    using T = TN_TYPE(tag);
    auto run = [&]<ReduceOp kOp>() {
      reduce_typed<kOp, T>(static_cast<T*>(dst), sources, num_sources, count);
    };
    switch (op) {
      case ReduceOp::Sum:
        return run.template operator()<ReduceOp::Sum>();
      case ReduceOp::Product:
        return run.template operator()<ReduceOp::Product>();
      case ReduceOp::Min:
        return run.template operator()<ReduceOp::Min>();
      case ReduceOp::Max:
        return run.template operator()<ReduceOp::Max>();
      case ReduceOp::Band:
        return run.template operator()<ReduceOp::Band>();
      case ReduceOp::Bor:
        return run.template operator()<ReduceOp::Bor>();
      case ReduceOp::Bxor:
        return run.template operator()<ReduceOp::Bxor>();
      case ReduceOp::Avg:
        return run.template operator()<ReduceOp::Avg>();
    }
  });
}

void finish_average(ScalarType dtype, void* values, int num_sources, size_t count) {
  TN_DISPATCH_ALL_TYPES(dtype, "average", [&](auto tag) {
    using T = TN_TYPE(tag);
    average_typed(static_cast<T*>(values), num_sources, count);
  });
}

}  // namespace tn::dist
