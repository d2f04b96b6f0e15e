#include "numeric.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "federated/errors.h"

namespace tn::federated::detail {
namespace {

// double -> float rounding to odd: truncate, then set the last bit if anything was cut off.
// Rounding that float to nearest-even float16/bfloat16 then gives exactly the correctly rounded
// double -> float16/bfloat16, because float keeps at least two more bits than either target at
// every magnitude they can represent (Boldo and Melquiond, "Emulation of FMA and correctly
// rounded sums: proved algorithms using rounding to odd", 2008). Going through float with
// round-to-nearest instead would round twice and sometimes land one unit off.
float round_to_odd_float(double value) {
  float nearest = static_cast<float>(value);
  if (static_cast<double>(nearest) == value || std::isnan(value)) return nearest;
  float truncated =
      std::fabs(static_cast<double>(nearest)) > std::fabs(value) ? std::nextafter(nearest, 0.0f) : nearest;
  return std::bit_cast<float>(std::bit_cast<uint32_t>(truncated) | 1u);
}

template <typename T>
double to_double(T value) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return static_cast<double>(static_cast<float>(value));
  } else {
    return static_cast<double>(value);
  }
}

template <typename T>
T round_once(double value) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T(round_to_odd_float(value));
  } else {
    return static_cast<T>(value);
  }
}

template <typename F>
decltype(auto) dispatch_aggregated(ScalarType dtype, F&& body) {
  switch (dtype) {
    case ScalarType::Float:
      return body(TypeTag<float>{});
    case ScalarType::Double:
      return body(TypeTag<double>{});
    case ScalarType::Half:
      return body(TypeTag<Half>{});
    case ScalarType::BFloat16:
      return body(TypeTag<BFloat16>{});
    default:
      throw Error(std::string("federated: dtype ") + scalar_type_name(dtype) + " is not aggregated");
  }
}

// Exponent bits all ones means infinity or NaN in every IEEE-style format.
template <typename Bits>
int64_t first_all_ones_exponent(const std::byte* data, int64_t numel, Bits exponent_mask) {
  for (int64_t i = 0; i < numel; ++i) {
    Bits bits;
    std::memcpy(&bits, data + i * int64_t(sizeof(Bits)), sizeof(Bits));
    if ((bits & exponent_mask) == exponent_mask) return i;
  }
  return -1;
}

// The integer a product lies within rounding noise of, if any (see ceil_of_product).
std::optional<size_t> near_integer(double product) {
  double nearest = std::round(product);
  if (std::fabs(product - nearest) <= std::ldexp(product, -50)) return size_t(nearest);
  return std::nullopt;
}

}  // namespace

void load_as_double(const NamedTensor& tensor, int64_t begin, std::span<double> out) {
  dispatch_aggregated(tensor.dtype, [&](auto tag) {
    using T = TN_TYPE(tag);
    const T* source = reinterpret_cast<const T*>(tensor.data.get()) + begin;
    for (size_t j = 0; j < out.size(); ++j) out[j] = to_double(source[j]);
  });
}

void store_rounded(std::span<const double> values, ScalarType dtype, std::byte* dest, int64_t begin) {
  dispatch_aggregated(dtype, [&](auto tag) {
    using T = TN_TYPE(tag);
    T* target = reinterpret_cast<T*>(dest) + begin;
    for (size_t j = 0; j < values.size(); ++j) target[j] = round_once<T>(values[j]);
  });
}

int64_t first_non_finite(ScalarType dtype, const std::byte* data, int64_t numel) {
  switch (dtype) {
    case ScalarType::Float:
      return first_all_ones_exponent<uint32_t>(data, numel, 0x7f800000u);
    case ScalarType::Double:
      return first_all_ones_exponent<uint64_t>(data, numel, 0x7ff0000000000000ull);
    case ScalarType::Half:
      return first_all_ones_exponent<uint16_t>(data, numel, 0x7c00u);
    case ScalarType::BFloat16:
      return first_all_ones_exponent<uint16_t>(data, numel, 0x7f80u);
    default:
      return -1;  // integers and bools are always finite
  }
}

NewTensor allocate_tensor(const TensorSpec& spec) {
  size_t nbytes = spec.nbytes();
  std::shared_ptr<std::byte[]> buffer(new std::byte[nbytes == 0 ? 1 : nbytes]);
  std::byte* bytes = buffer.get();
  return {
      NamedTensor{spec.name, spec.dtype, spec.shape, std::shared_ptr<const std::byte>(buffer, bytes), nbytes},
      bytes};
}

std::string index_str(const Shape& shape, int64_t flat) {
  Shape index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return shape_str(index);
}

size_t ceil_of_product(double factor, size_t count) {
  double product = factor * double(count);
  return near_integer(product).value_or(size_t(std::ceil(product)));
}

size_t floor_of_product(double factor, size_t count) {
  double product = factor * double(count);
  return near_integer(product).value_or(size_t(std::floor(product)));
}

void refuse_non_finite_result(const std::string& strategy, const NamedTensor& result) {
  int64_t bad = first_non_finite(result.dtype, result.data.get(), result.numel());
  if (bad < 0) return;
  throw AggregationFailed(strategy + ": tensor '" + result.name + "' element " + std::to_string(bad) +
                          " (index " + index_str(result.shape, bad) + ") is not finite in " +
                          scalar_type_name(result.dtype) + " after aggregation; the model is left unchanged");
}

Model map_aggregated_tensors(const std::string& strategy, const Model& global, int64_t chunk,
                             const std::function<void(size_t k, int64_t begin, std::span<double> y)>& fill) {
  Model result;
  std::vector<double> y(static_cast<size_t>(chunk));
  for (size_t k = 0; k < global.tensors.size(); ++k) {
    const NamedTensor& tensor = global.tensors[k];
    if (!is_aggregated(tensor.dtype)) {
      result.tensors.push_back(tensor);
      continue;
    }
    NewTensor out = allocate_tensor(tensor.spec());
    const int64_t numel = tensor.numel();
    for (int64_t begin = 0; begin < numel; begin += chunk) {
      const std::span<double> values(y.data(), size_t(std::min(chunk, numel - begin)));
      fill(k, begin, values);
      store_rounded(values, tensor.dtype, out.bytes, begin);
    }
    refuse_non_finite_result(strategy, out.tensor);
    result.tensors.push_back(std::move(out.tensor));
  }
  return result;
}

}  // namespace tn::federated::detail
