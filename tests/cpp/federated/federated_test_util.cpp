// The federated tests' shared helpers that are not templates (see the header).
#include "federated_test_util.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <iomanip>
#include <limits>
#include <set>
#include <utility>

namespace tn::federated {

Reason reason_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const UpdateRefused& error) {
    return error.reason;
  }
  ADD_FAILURE() << "expected UpdateRefused";
  return Reason::Malformed;
}

std::vector<DeviceId> devices(size_t count) {
  std::vector<DeviceId> ids;
  for (size_t i = 0; i < count; ++i) ids.push_back("d" + std::to_string(i));
  return ids;
}

size_t width_of(ScalarType dtype) {
  switch (dtype) {
    case ScalarType::Half:
    case ScalarType::BFloat16:
      return 2;
    case ScalarType::Float:
      return 4;
    default:
      return 8;
  }
}

// sign * mantissa * 2^exponent for IEEE binary16: 5 exponent bits (bias 15), 10 mantissa bits.
long double decode_half(uint16_t bits) {
  int exponent = (bits >> 10) & 0x1f;
  long double mantissa = bits & 0x3ff;
  long double sign = (bits & 0x8000) ? -1 : 1;
  if (exponent == 31) return mantissa != 0 ? NAN : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

// bfloat16 is the upper half of a float32.
long double decode_bfloat16(uint16_t bits) { return std::bit_cast<float>(uint32_t(bits) << 16); }

long double decode(ScalarType dtype, const std::byte* element) {
  switch (dtype) {
    case ScalarType::Half:
      return decode_half(read_as<uint16_t>(element));
    case ScalarType::BFloat16:
      return decode_bfloat16(read_as<uint16_t>(element));
    case ScalarType::Float:
      return read_as<float>(element);
    default:
      return read_as<double>(element);
  }
}

// The 16-bit pattern whose value is exactly `value` (a test needs few, so a scan will do).
uint16_t bits_of(ScalarType dtype, long double value) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    long double decoded =
        dtype == ScalarType::Half ? decode_half(uint16_t(bits)) : decode_bfloat16(uint16_t(bits));
    if (decoded == value && std::signbit(decoded) == std::signbit(value)) return uint16_t(bits);
  }
  ADD_FAILURE() << double(value) << " is not representable in " << scalar_type_name(dtype);
  return 0;
}

// Writes `value`, which must be representable in dtype, at `element`.
void encode(ScalarType dtype, long double value, std::byte* element) {
  switch (dtype) {
    case ScalarType::Half:
    case ScalarType::BFloat16: {
      uint16_t bits = bits_of(dtype, value);
      std::memcpy(element, &bits, 2);
      break;
    }
    case ScalarType::Float: {
      float narrow = float(value);
      EXPECT_TRUE(narrow == value || (std::isnan(narrow) && std::isnan(value))) << double(value);
      std::memcpy(element, &narrow, 4);
      break;
    }
    default: {
      double narrow = double(value);
      std::memcpy(element, &narrow, 8);
    }
  }
}

// A random value representable in dtype, of magnitude roughly 2^-6 .. 2^4, now and then zero.
long double random_value(ScalarType dtype, std::mt19937_64& rng, std::byte* element) {
  uint64_t r = rng();
  if (r % 50 == 0) {
    std::memset(element, 0, width_of(dtype));
    return 0;
  }
  switch (dtype) {
    case ScalarType::Half: {
      uint16_t bits = uint16_t(((r >> 8) & 1) << 15 | (9 + (r >> 9) % 10) << 10 | (r >> 20) % 1024);
      std::memcpy(element, &bits, 2);
      return decode_half(bits);
    }
    case ScalarType::BFloat16: {
      uint16_t bits = uint16_t(((r >> 8) & 1) << 15 | (121 + (r >> 9) % 10) << 7 | (r >> 20) % 128);
      std::memcpy(element, &bits, 2);
      return decode_bfloat16(bits);
    }
    case ScalarType::Float: {
      float value = float(std::ldexp(double(int64_t(r >> 11) - (int64_t(1) << 52)), -50));
      std::memcpy(element, &value, 4);
      return value;
    }
    default: {
      double value = std::ldexp(double(int64_t(r >> 11) - (int64_t(1) << 52)), -50);
      std::memcpy(element, &value, 8);
      return value;
    }
  }
}

Tracked exact(long double value) { return {value, 0}; }
Tracked rounded(long double value, long double inherited) {
  return {value, inherited + kUnit * (std::fabs(value) + inherited) + kUnderflow};
}
Tracked operator+(Tracked a, Tracked b) { return rounded(a.value + b.value, a.error + b.error); }
Tracked operator-(Tracked a, Tracked b) { return rounded(a.value - b.value, a.error + b.error); }
Tracked operator*(Tracked a, Tracked b) {
  return rounded(a.value * b.value,
                 std::fabs(a.value) * b.error + std::fabs(b.value) * a.error + a.error * b.error);
}
Tracked operator/(Tracked a, Tracked b) {
  long double magnitude = std::fabs(b.value);
  EXPECT_GT(magnitude, b.error) << "a divisor's error bound reaches zero";
  return rounded(a.value / b.value,
                 (a.error * magnitude + std::fabs(a.value) * b.error) / (magnitude * (magnitude - b.error)));
}
Tracked sqrt(Tracked a) {
  long double root = std::sqrt(a.value);
  long double lowest = std::sqrt(std::max<long double>(a.value - a.error, 0));
  return rounded(root, root + lowest > 0 ? a.error / (root + lowest) : std::sqrt(a.error));
}

// Whether the `dtype` element at `element` is the round-to-nearest of a real within
// reference.error of reference.value: its rounding interval, half the gap to each neighbour on
// either side, must meet [value - error, value + error].
testing::AssertionResult rounds_from(ScalarType dtype, const std::byte* element, Tracked reference) {
  long double y = decode(dtype, element);
  if (!std::isfinite(y)) return testing::AssertionFailure() << "result " << double(y) << " is not finite";
  long double magnitude = std::fabs(y), gap_up, gap_down;
  if (dtype == ScalarType::Half || dtype == ScalarType::BFloat16) {
    uint16_t bits = read_as<uint16_t>(element) & 0x7fff;
    auto value_of = [&](uint16_t b) {
      return dtype == ScalarType::Half ? decode_half(b) : decode_bfloat16(b);
    };
    long double below = bits == 0 ? -value_of(1) : value_of(uint16_t(bits - 1));
    long double above = value_of(uint16_t(bits + 1));
    gap_down = magnitude - below;
    gap_up = std::isfinite(above) ? above - magnitude : gap_down;
  } else if (dtype == ScalarType::Float) {
    float f = float(magnitude);
    gap_down = f == 0 ? std::numeric_limits<float>::denorm_min() : f - std::nextafter(f, 0.0f);
    float next = std::nextafter(f, INFINITY);
    gap_up = std::isfinite(next) ? next - f : gap_down;
  } else {
    double d = double(magnitude);
    gap_down = d == 0 ? std::numeric_limits<double>::denorm_min() : d - std::nextafter(d, 0.0);
    double next = std::nextafter(d, INFINITY);
    gap_up = std::isfinite(next) ? next - d : gap_down;
  }
  bool negative = std::signbit(y);
  long double low = y - (negative ? gap_up : gap_down) / 2, high = y + (negative ? gap_down : gap_up) / 2;
  if (reference.value + reference.error >= low && reference.value - reference.error <= high)
    return testing::AssertionSuccess();
  return testing::AssertionFailure() << scalar_type_name(dtype) << " result " << std::setprecision(21)
                                     << double(y) << " is not a rounding of " << reference.value << " +- "
                                     << reference.error;
}

NamedTensor tensor_from(const TensorSpec& spec, const std::vector<long double>& values) {
  std::vector<std::byte> bytes(spec.nbytes());
  for (size_t j = 0; j < values.size(); ++j) {
    if (spec.dtype == ScalarType::Long) {
      int64_t integer = int64_t(values[j]);
      std::memcpy(bytes.data() + 8 * j, &integer, 8);
    } else {
      encode(spec.dtype, values[j], bytes.data() + width_of(spec.dtype) * j);
    }
  }
  return copy_tensor(spec.name, spec.dtype, spec.shape, bytes);
}

NamedTensor random_tensor(const TensorSpec& spec, std::mt19937_64& rng, std::vector<long double>& values) {
  std::vector<std::byte> bytes(spec.nbytes());
  values.assign(size_t(spec.numel()), 0);
  for (size_t j = 0; j < values.size(); ++j) {
    if (spec.dtype == ScalarType::Long) {
      int64_t integer = int64_t(rng() % 1000);
      std::memcpy(bytes.data() + 8 * j, &integer, 8);
      values[j] = integer;
    } else {
      values[j] = random_value(spec.dtype, rng, bytes.data() + width_of(spec.dtype) * j);
    }
  }
  return copy_tensor(spec.name, spec.dtype, spec.shape, bytes);
}

// A model as a network might have it: a weight of `size` elements, a small 2-d tensor of the
// same dtype, a tensor of another floating dtype, and an integer counter that is not averaged.
ModelSpec test_spec(ScalarType dtype, int64_t size) {
  ScalarType other = dtype == ScalarType::Float ? ScalarType::Double : ScalarType::Float;
  return ModelSpec({{"layer.weight", dtype, {size}},
                    {"layer.bias", dtype, {2, 3}},
                    {"head.weight", other, {4}},
                    {"bn.num_batches_tracked", ScalarType::Long, {}}});
}

Model random_model(const ModelSpec& spec, std::mt19937_64& rng, Values& values) {
  Model model;
  values.resize(spec.tensors().size());
  for (size_t k = 0; k < spec.tensors().size(); ++k)
    model.tensors.push_back(random_tensor(spec.tensors()[k], rng, values[k]));
  return model;
}

// `clients` updates of round 1 on model version 0, devices named so that arrival order and
// device-id order differ.
Federation make_federation(const ModelSpec& spec, Model global, Values global_values, size_t clients,
                           uint64_t seed) {
  std::mt19937_64 rng(seed);
  Federation federation{spec, std::move(global), std::move(global_values), {}, {}, {}};
  std::set<std::string> ids;
  while (ids.size() < clients) ids.insert("device-" + std::to_string(rng() % 100000));
  for (const std::string& id : ids) {
    Values values;
    Update update{id, 1, 0, int64_t(1 + rng() % 1000), random_model(spec, rng, values)};
    federation.values.push_back(std::move(values));
    federation.examples.push_back(update.num_examples);
    federation.updates.push_back(std::move(update));
  }
  std::shuffle(federation.updates.begin(), federation.updates.end(), rng);
  return federation;
}

Federation make_federation(ScalarType dtype, int64_t size, size_t clients, uint64_t seed) {
  ModelSpec spec = test_spec(dtype, size);
  std::mt19937_64 rng(seed ^ 0x5eed);
  Values global_values;
  Model global = random_model(spec, rng, global_values);
  return make_federation(spec, std::move(global), std::move(global_values), clients, seed);
}

std::string describe(ScalarType dtype, int64_t size, size_t clients) {
  return std::string(scalar_type_name(dtype)) + ", " + std::to_string(size) + " elements, " +
         std::to_string(clients) + " clients";
}

// Every floating tensor of `result` against its reference ([tensor][element]); integer tensors
// must be the global model's, shared rather than copied.
void expect_matches(const Model& result, const Federation& federation,
                    const std::vector<std::vector<Tracked>>& want) {
  ASSERT_EQ(result.tensors.size(), federation.global.tensors.size());
  for (size_t k = 0; k < result.tensors.size(); ++k) {
    const NamedTensor& got = result.tensors[k];
    const NamedTensor& global = federation.global.tensors[k];
    ASSERT_EQ(got.name, global.name);
    ASSERT_EQ(got.dtype, global.dtype);
    ASSERT_EQ(got.shape, global.shape);
    ASSERT_EQ(got.nbytes, global.nbytes);
    if (!is_aggregated(got.dtype)) {
      EXPECT_EQ(got.data.get(), global.data.get()) << got.name << " should be the global model's buffer";
      continue;
    }
    ASSERT_EQ(want[k].size(), size_t(got.numel()));
    size_t failures = 0;
    for (size_t j = 0; j < want[k].size(); ++j) {
      testing::AssertionResult ok =
          rounds_from(got.dtype, got.data.get() + j * width_of(got.dtype), want[k][j]);
      if (!ok && failures++ < 3) ADD_FAILURE() << got.name << "[" << j << "]: " << ok.message();
    }
    EXPECT_EQ(failures, 0u) << got.name;
  }
}

bool same_bytes(const Model& a, const Model& b) {
  if (a.tensors.size() != b.tensors.size()) return false;
  for (size_t k = 0; k < a.tensors.size(); ++k) {
    const NamedTensor &x = a.tensors[k], &y = b.tensors[k];
    if (x.name != y.name || x.dtype != y.dtype || x.shape != y.shape || x.nbytes != y.nbytes) return false;
    if (x.nbytes && std::memcmp(x.data.get(), y.data.get(), x.nbytes) != 0) return false;
  }
  return true;
}

// The next round's federation, starting from the model a strategy returned.
Federation next_round(const Federation& previous, const Model& result, size_t clients, uint64_t seed) {
  Values global_values(previous.spec.tensors().size());
  for (size_t k = 0; k < result.tensors.size(); ++k) {
    const NamedTensor& tensor = result.tensors[k];
    if (!is_aggregated(tensor.dtype)) {
      global_values[k] = previous.global_values[k];
      continue;
    }
    for (int64_t j = 0; j < tensor.numel(); ++j)
      global_values[k].push_back(
          decode(tensor.dtype, tensor.data.get() + j * int64_t(width_of(tensor.dtype))));
  }
  return make_federation(previous.spec, result, std::move(global_values), clients, seed);
}

// The float64 sums a hub reduce in ascending device order delivers: sum_i n_i x_i, computed here
// term by term in the same order.
WeightedSum float64_sums(const Federation& federation) {
  WeightedSum sums;
  for (size_t k = 0; k < federation.spec.tensors().size(); ++k) {
    const TensorSpec& spec = federation.spec.tensors()[k];
    if (!is_aggregated(spec.dtype)) continue;
    std::vector<double> sum(federation.global_values[k].size(), 0.0);
    for (size_t i = 0; i < federation.values.size(); ++i)
      for (size_t j = 0; j < sum.size(); ++j) {
        double product = double(federation.examples[i]) * double(federation.values[i][k][j]);
        sum[j] = sum[j] + product;
      }
    sums.sum.tensors.push_back(
        copy_tensor(spec.name, ScalarType::Double, spec.shape, std::as_bytes(std::span<const double>(sum))));
  }
  for (int64_t n : federation.examples) sums.total_weight += double(n);
  return sums;
}

}  // namespace tn::federated
