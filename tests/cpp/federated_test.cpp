// The federated coordinator's library: every strategy against a reference written here from the
// papers' formulas, the refusals of update validation, device selection, the round state
// machine and the task's retries and checkpoints.
//
// How results are compared. The library computes in double and rounds once to the tensor's
// dtype. The references below compute the same formulas in long double and carry, next to each
// value, a bound on how far the library's double evaluation can be from it (Tracked). A result
// element passes when it is the round-to-nearest, in its dtype, of some real number within that
// bound of the reference value. Where the bound is far below half a unit in the last place of
// the dtype (float16, bfloat16, float32 and every exact case) that pins the result to one value,
// the correctly rounded one; it leaves a choice only when the exact result lies within the bound
// of a rounding boundary (double rounding). For float64 results the bound itself is the
// tolerance. No tolerance is chosen by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <iomanip>
#include <map>
#include <random>
#include <set>

#include "federated/contribution.h"
#include "federated/errors.h"
#include "federated/model.h"
#include "federated/round.h"
#include "federated/selection.h"
#include "federated/strategy.h"
#include "federated/validation.h"
#include "test_support.h"

namespace tn::federated {
namespace {

using json = nlohmann::json;
using Reason = UpdateRefused::Reason;
using namespace std::chrono_literals;

using tn::test::message_of;

Reason reason_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const UpdateRefused& error) {
    return error.reason;
  }
  ADD_FAILURE() << "expected UpdateRefused";
  return Reason::Malformed;
}

// ---------------------------------------------------------------------------------------------
// Number formats, decoded here from their bit layouts (not through tn_core or the library).

const ScalarType kFloatTypes[] = {ScalarType::Float, ScalarType::Double, ScalarType::Half,
                                  ScalarType::BFloat16};

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

template <typename T>
T read_as(const std::byte* element) {
  T value;
  std::memcpy(&value, element, sizeof(T));
  return value;
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

// ---------------------------------------------------------------------------------------------
// Tracked: a reference value and a bound on the distance of the library's double result from it.
//
// Each double operation of the library returns the exact result of its (already inexact)
// operands times (1 + d), |d| <= 2^-53: round to nearest, and no fused multiply-add (the library
// is built with -ffp-contract=off). The reference is itself evaluated in long double, |d| <=
// 2^-64 per operation. So each operation adds (2^-53 + 2^-64) times the magnitude of its result
// to the errors it inherits from its operands, plus the smallest subnormal for underflow; the
// inherited part follows from the operation's derivative (below). Operands read from tensors are
// exact in both.
struct Tracked {
  long double value = 0;
  long double error = 0;
};

constexpr long double kUnit = 0x1p-53L + 0x1p-64L;
constexpr long double kUnderflow = 0x1p-1074L;

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

// ---------------------------------------------------------------------------------------------
// Models and federations of random updates.

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

using Values = std::vector<std::vector<long double>>;  // [tensor][element]

struct Federation {
  ModelSpec spec;
  Model global;
  Values global_values;
  std::vector<Update> updates;    // in arrival order (shuffled)
  std::vector<Values> values;     // [client in device-id order][tensor][element]
  std::vector<int64_t> examples;  // in device-id order
};

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

// ---------------------------------------------------------------------------------------------
// References, from the papers' formulas, per floating tensor and element.

using Reference = std::vector<std::vector<Tracked>>;  // [tensor][element]; integer tensors empty

template <typename F>
Reference per_element(const Federation& federation, F element) {
  Reference reference(federation.spec.tensors().size());
  for (size_t k = 0; k < reference.size(); ++k) {
    if (!is_aggregated(federation.spec.tensors()[k].dtype)) continue;
    for (size_t j = 0; j < federation.global_values[k].size(); ++j) reference[k].push_back(element(k, j));
  }
  return reference;
}

// McMahan et al. 2017: sum_i n_i x_i / sum_i n_i, the terms taken in device-id order.
Reference weighted_mean(const Federation& federation) {
  int64_t total = 0;
  for (int64_t n : federation.examples) total += n;
  return per_element(federation, [&](size_t k, size_t j) {
    Tracked sum = exact(0);
    for (size_t i = 0; i < federation.values.size(); ++i)
      sum = sum + exact(federation.examples[i]) * exact(federation.values[i][k][j]);
    return sum / exact(total);
  });
}

std::vector<long double> column(const Federation& federation, size_t k, size_t j) {
  std::vector<long double> values;
  for (const Values& client : federation.values) values.push_back(client[k][j]);
  std::sort(values.begin(), values.end());
  return values;
}

Reference coordinate_median(const Federation& federation) {
  return per_element(federation, [&](size_t k, size_t j) {
    std::vector<long double> values = column(federation, k, j);
    size_t n = values.size();
    if (n % 2 == 1) return exact(values[n / 2]);
    return exact(0.5L) * exact(values[n / 2 - 1]) + exact(0.5L) * exact(values[n / 2]);
  });
}

// beta = cut_numerator / cut_denominator, so floor(beta * n) is exact integer arithmetic here.
Reference trimmed_mean(const Federation& federation, size_t cut_numerator, size_t cut_denominator) {
  return per_element(federation, [&](size_t k, size_t j) {
    std::vector<long double> values = column(federation, k, j);
    size_t cut = values.size() * cut_numerator / cut_denominator;
    Tracked sum = exact(0);
    for (size_t i = cut; i < values.size() - cut; ++i) sum = sum + exact(values[i]);
    return sum / exact(values.size() - 2 * cut);
  });
}

// Blanchard et al. 2017. Returns the reference of the mean of the m updates with the lowest
// scores (ties to the lower device id), after checking that no error bound could reorder the
// m-th and (m+1)-th scores. Two scores that sum the very same pair distances (with n - f - 2 = 1,
// a pair of mutual nearest neighbours) are equal in the library too, so the tie is real.
Reference multi_krum(const Federation& federation, size_t f, size_t m) {
  const size_t n = federation.values.size();
  std::vector<std::vector<Tracked>> distance(n, std::vector<Tracked>(n));
  for (size_t a = 0; a < n; ++a)
    for (size_t b = 0; b < n; ++b) {
      Tracked sum = exact(0);
      for (size_t k = 0; k < federation.spec.tensors().size(); ++k) {
        if (!is_aggregated(federation.spec.tensors()[k].dtype)) continue;
        for (size_t j = 0; j < federation.global_values[k].size(); ++j) {
          Tracked difference = exact(federation.values[a][k][j]) - exact(federation.values[b][k][j]);
          sum = sum + difference * difference;
        }
      }
      distance[a][b] = sum;
    }
  struct Score {
    Tracked value;
    size_t update;
    std::vector<std::pair<size_t, size_t>> pairs;  // the distances summed
  };
  std::vector<Score> scores;
  for (size_t a = 0; a < n; ++a) {
    std::vector<size_t> others;
    for (size_t b = 0; b < n; ++b)
      if (b != a) others.push_back(b);
    std::stable_sort(others.begin(), others.end(),
                     [&](size_t x, size_t y) { return distance[a][x].value < distance[a][y].value; });
    // The library sums its own k smallest distances; each is within the largest error bound
    // of ours, which bounds the difference of the two sums of k smallest as well.
    long double largest_error = 0;
    for (size_t b : others) largest_error = std::max(largest_error, distance[a][b].error);
    Score score{exact(0), a, {}};
    for (size_t i = 0; i < n - f - 2; ++i) {
      score.value = score.value + Tracked{distance[a][others[i]].value, largest_error};
      score.pairs.push_back({std::min(a, others[i]), std::max(a, others[i])});
    }
    std::sort(score.pairs.begin(), score.pairs.end());
    scores.push_back(std::move(score));
  }
  std::stable_sort(scores.begin(), scores.end(),
                   [](const Score& x, const Score& y) { return x.value.value < y.value.value; });
  if (m < n && scores[m - 1].pairs != scores[m].pairs) {
    const Tracked &last_kept = scores[m - 1].value, &first_dropped = scores[m].value;
    EXPECT_GT(first_dropped.value - last_kept.value, first_dropped.error + last_kept.error)
        << "scores too close to tell which update the library keeps";
  }
  std::vector<size_t> kept;
  for (size_t i = 0; i < m; ++i) kept.push_back(scores[i].update);
  std::sort(kept.begin(), kept.end());
  return per_element(federation, [&](size_t k, size_t j) {
    Tracked sum = exact(0);
    for (size_t i : kept) sum = sum + exact(federation.values[i][k][j]);
    return sum / exact(m);
  });
}

// FedAvgM (Hsu et al. 2019) and FedAdagrad/FedAdam/FedYogi (Reddi et al. 2021, Algorithm 2)
// carried across rounds: state per element, as the papers write it.
struct ServerOptimizerReference {
  std::string kind;
  long double eta, beta_1, beta_2, tau;
  std::vector<std::vector<Tracked>> m, v;  // [tensor][element]; empty before the first round

  Reference step(const Federation& federation) {
    Reference average = weighted_mean(federation);
    bool first = m.empty();
    if (first) m = v = Reference(federation.spec.tensors().size());
    return per_element(federation, [&](size_t k, size_t j) {
      if (first) {
        m[k].push_back(exact(0));
        v[k].push_back(exact(tau) * exact(tau));
      }
      Tracked x = exact(federation.global_values[k][j]);
      Tracked delta = average[k][j] - x;
      if (kind == "fedavgm") {
        m[k][j] = exact(beta_1) * m[k][j] + delta;
        return x + exact(eta) * m[k][j];
      }
      m[k][j] = exact(beta_1) * m[k][j] + (exact(1) - exact(beta_1)) * delta;
      Tracked squared = delta * delta;
      if (kind == "fedadagrad") {
        v[k][j] = v[k][j] + squared;
      } else if (kind == "fedadam") {
        v[k][j] = exact(beta_2) * v[k][j] + (exact(1) - exact(beta_2)) * squared;
      } else {
        Tracked difference = v[k][j] - squared;
        EXPECT_GT(std::fabs(difference.value), difference.error)
            << "the sign of v - delta^2 is not determined";
        long double sign = difference.value > 0 ? 1 : (difference.value < 0 ? -1 : 0);
        v[k][j] = v[k][j] - (exact(1) - exact(beta_2)) * squared * exact(sign);
      }
      return x + exact(eta) * m[k][j] / (sqrt(v[k][j]) + exact(tau));
    });
  }
};

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

const int64_t kSizes[] = {0, 1, 7, 16389};  // 16389 crosses the library's 16384-element chunks

// ---------------------------------------------------------------------------------------------
// Strategies against their references.

TEST(Strategies, FedAvgAndFedProxAreTheExampleWeightedMean) {
  uint64_t seed = 1;
  for (const char* name : {"fedavg", "fedprox"})
    for (ScalarType dtype : kFloatTypes)
      for (int64_t size : kSizes)
        for (size_t clients : {1, 2, 5, 8}) {
          SCOPED_TRACE(std::string(name) + ", " + describe(dtype, size, clients));
          Federation federation = make_federation(dtype, size, clients, seed++);
          auto strategy = make_strategy(
              name, name == std::string("fedprox") ? json{{"proximal_mu", 0.1}} : json::object());
          expect_matches(strategy->aggregate(federation.global, federation.updates), federation,
                         weighted_mean(federation));
        }
}

TEST(Strategies, ServerOptimizersFollowTheirUpdateRulesOverSeveralRounds) {
  // The reference's parameters are the same double literals the library parses from JSON.
  struct Setting {
    std::string name;
    json params;
    ServerOptimizerReference reference;
  };
  uint64_t seed = 100;
  for (ScalarType dtype : kFloatTypes)
    for (int64_t size : {int64_t{0}, int64_t{1}, int64_t{16389}})
      for (size_t clients : {1, 3, 6}) {
        std::vector<Setting> settings = {
            {"fedavgm",
             {{"server_learning_rate", 0.7}, {"server_momentum", 0.9}},
             {"fedavgm", 0.7, 0.9, 0, 0, {}, {}}},
            {"fedadagrad",
             {{"eta", 0.1}, {"tau", 1e-3}, {"beta_1", 0.5}},
             {"fedadagrad", 0.1, 0.5, 0, 1e-3, {}, {}}},
            {"fedadam",
             {{"eta", 0.1}, {"tau", 1e-3}, {"beta_1", 0.9}, {"beta_2", 0.99}},
             {"fedadam", 0.1, 0.9, 0.99, 1e-3, {}, {}}},
            {"fedyogi",
             {{"eta", 0.05}, {"tau", 1e-3}, {"beta_1", 0.9}, {"beta_2", 0.99}},
             {"fedyogi", 0.05, 0.9, 0.99, 1e-3, {}, {}}},
        };
        for (Setting& setting : settings) {
          SCOPED_TRACE(setting.name + ", " + describe(dtype, size, clients));
          auto strategy = make_strategy(setting.name, setting.params);
          Federation federation = make_federation(dtype, size, clients, seed++);
          for (int round = 0; round < 3; ++round) {
            SCOPED_TRACE("round " + std::to_string(round));
            Reference want = setting.reference.step(federation);
            Model result = strategy->aggregate(federation.global, federation.updates);
            expect_matches(result, federation, want);
            // The float64 state, too, is what the equations give.
            StrategyState state = strategy->export_state();
            EXPECT_EQ(state.meta["rounds"], round + 1);
            for (const NamedTensor& tensor : state.tensors.tensors) {
              ASSERT_EQ(tensor.dtype, ScalarType::Double);
              bool is_v = tensor.name.starts_with("v/");
              std::string tensor_name = tensor.name.substr(tensor.name.find('/') + 1);
              size_t k = 0;
              while (federation.spec.tensors()[k].name != tensor_name) ++k;
              const auto& reference_state = is_v ? setting.reference.v[k] : setting.reference.m[k];
              for (size_t j = 0; j < reference_state.size(); ++j)
                ASSERT_TRUE(rounds_from(ScalarType::Double, tensor.data.get() + 8 * j, reference_state[j]))
                    << tensor.name << "[" << j << "]";
            }
            federation = next_round(federation, result, clients, seed++);
          }
        }
      }
}

TEST(Strategies, FedMedianIsTheCoordinateWiseMedian) {
  uint64_t seed = 200;
  for (ScalarType dtype : kFloatTypes)
    for (int64_t size : kSizes)
      for (size_t clients : {1, 2, 3, 4, 7, 64}) {  // 64 clients make the library's chunks 16384 long
        SCOPED_TRACE(describe(dtype, size, clients));
        Federation federation = make_federation(dtype, size, clients, seed++);
        expect_matches(make_strategy("fedmedian")->aggregate(federation.global, federation.updates),
                       federation, coordinate_median(federation));
      }
}

TEST(Strategies, MedianOfAnOddCountIsExactlyOneOfTheValues) {
  // The reference error is zero here, so rounds_from demands equality; this checks that directly.
  Federation federation = make_federation(ScalarType::Float, 1000, 5, 250);
  Model result = make_strategy("fedmedian")->aggregate(federation.global, federation.updates);
  for (size_t j = 0; j < 1000; ++j)
    ASSERT_EQ(decode(ScalarType::Float, result.tensors[0].data.get() + 4 * j), column(federation, 0, j)[2]);
}

TEST(Strategies, TrimmedMeanCutsBetaFromEachEnd) {
  uint64_t seed = 300;
  struct Beta {
    double value;
    size_t numerator, denominator;
  };
  for (Beta beta : {Beta{0.0, 0, 1}, Beta{0.2, 1, 5}, Beta{0.25, 1, 4}, Beta{0.45, 9, 20}})
    for (ScalarType dtype : kFloatTypes)
      // The chunking this shares with the median is crossed in the median's test.
      for (int64_t size : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1000}})
        for (size_t clients : {1, 2, 4, 5, 9, 20}) {
          SCOPED_TRACE("beta " + std::to_string(beta.value) + ", " + describe(dtype, size, clients));
          Federation federation = make_federation(dtype, size, clients, seed++);
          auto strategy = make_strategy("trimmed_mean", {{"beta", beta.value}});
          expect_matches(strategy->aggregate(federation.global, federation.updates), federation,
                         trimmed_mean(federation, beta.numerator, beta.denominator));
        }
}

TEST(Strategies, KrumAndMultiKrumKeepTheLowestScores) {
  uint64_t seed = 400;
  struct Setting {
    size_t f, m, clients;
  };
  for (Setting s : {Setting{0, 1, 3}, Setting{1, 1, 5}, Setting{1, 3, 6}, Setting{2, 1, 7}, Setting{2, 5, 9}})
    for (ScalarType dtype : kFloatTypes)
      for (int64_t size : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{2000}}) {
        SCOPED_TRACE("f " + std::to_string(s.f) + ", m " + std::to_string(s.m) + ", " +
                     describe(dtype, size, s.clients));
        Federation federation = make_federation(dtype, size, s.clients, seed++);
        auto strategy = s.m == 1 ? make_strategy("krum", {{"f", s.f}})
                                 : make_strategy("multi_krum", {{"f", s.f}, {"m", s.m}});
        expect_matches(strategy->aggregate(federation.global, federation.updates), federation,
                       multi_krum(federation, s.f, s.m));
      }
}

TEST(Strategies, KrumIgnoresByzantineOutliers) {
  // Five honest updates near 1.0 and two Byzantine ones at 1000: Krum returns an honest update
  // exactly, Multi-Krum (m = n - f) the mean of the honest ones.
  ModelSpec spec({{"w", ScalarType::Float, {3}}});
  Model global{{tensor_from(spec.tensors()[0], {0, 0, 0})}};
  std::vector<Update> updates;
  std::vector<std::vector<long double>> honest;
  for (int i = 0; i < 7; ++i) {
    std::vector<long double> values = i < 5 ? std::vector<long double>{1 + i / 64.0L, 1 - i / 128.0L, 1}
                                            : std::vector<long double>{1000, -1000, 1000};
    if (i < 5) honest.push_back(values);
    updates.push_back(
        {"d" + std::to_string(i), 1, 0, i < 5 ? 10 : 1000000, {{tensor_from(spec.tensors()[0], values)}}});
  }
  Model krum = make_strategy("krum", {{"f", 2}})->aggregate(global, updates);
  std::vector<long double> chosen;
  for (int j = 0; j < 3; ++j) chosen.push_back(decode(ScalarType::Float, krum.tensors[0].data.get() + 4 * j));
  EXPECT_NE(std::find(honest.begin(), honest.end(), chosen), honest.end());
  Model multi = make_strategy("multi_krum", {{"f", 2}, {"m", 5}})->aggregate(global, updates);
  EXPECT_EQ(decode(ScalarType::Float, multi.tensors[0].data.get()), (5 + (0 + 1 + 2 + 3 + 4) / 64.0L) / 5);
}

TEST(Strategies, TheOrderOfArrivalDoesNotChangeABit) {
  const std::vector<std::pair<std::string, json>> strategies = {
      {"fedavg", json::object()},          {"fedprox", {{"proximal_mu", 1}}}, {"fedavgm", json::object()},
      {"fedadagrad", json::object()},      {"fedadam", json::object()},       {"fedyogi", json::object()},
      {"fedmedian", json::object()},       {"trimmed_mean", {{"beta", 0.2}}}, {"krum", {{"f", 1}}},
      {"multi_krum", {{"f", 1}, {"m", 3}}}};
  for (ScalarType dtype : kFloatTypes) {
    Federation federation = make_federation(dtype, 3001, 9, 500 + uint64_t(dtype));
    for (const auto& [name, params] : strategies) {
      SCOPED_TRACE(name + ", " + scalar_type_name(dtype));
      Model first = make_strategy(name, params)->aggregate(federation.global, federation.updates);
      std::vector<Update> permuted = federation.updates;
      std::mt19937_64 rng(7);
      for (int trial = 0; trial < 3; ++trial) {
        std::shuffle(permuted.begin(), permuted.end(), rng);
        Model again = make_strategy(name, params)->aggregate(federation.global, permuted);
        EXPECT_TRUE(same_bytes(first, again));
      }
    }
  }
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

TEST(Strategies, WeightedSumEntryPointGivesTheSameBitsAsTheUpdates) {
  const std::vector<std::pair<std::string, json>> strategies = {
      {"fedavg", json::object()},     {"fedprox", {{"proximal_mu", 0.5}}}, {"fedavgm", json::object()},
      {"fedadagrad", json::object()}, {"fedadam", json::object()},         {"fedyogi", json::object()}};
  for (ScalarType dtype : kFloatTypes) {
    Federation federation = make_federation(dtype, 20000, 6, 600 + uint64_t(dtype));
    WeightedSum sums = float64_sums(federation);
    for (const auto& [name, params] : strategies) {
      SCOPED_TRACE(name + ", " + scalar_type_name(dtype));
      auto from_updates = make_strategy(name, params);
      auto from_sum = make_strategy(name, params);
      ASSERT_TRUE(from_sum->aggregates_from_weighted_sum());
      for (int round = 0; round < 2; ++round) {  // the second round runs on the carried state
        Model a = from_updates->aggregate(federation.global, federation.updates);
        Model b = from_sum->aggregate_from_weighted_sum(federation.global, sums);
        EXPECT_TRUE(same_bytes(a, b));
      }
    }
  }
}

// The hub sums the devices' packed contributions in ascending device-id order, as its
// deadline reduce does; the FedAvg family must aggregate that sum to the same bits as the
// individual updates.
TEST(Contribution, HubSumOfPackedUpdatesAggregatesLikeTheUpdates) {
  for (ScalarType dtype : kFloatTypes) {
    SCOPED_TRACE(scalar_type_name(dtype));
    Federation federation = make_federation(dtype, 5000, 5, 900 + uint64_t(dtype));
    ContributionLayout layout(federation.spec);
    std::vector<const Update*> by_id;
    for (const Update& update : federation.updates) by_id.push_back(&update);
    std::sort(by_id.begin(), by_id.end(),
              [](const Update* a, const Update* b) { return a->device_id < b->device_id; });
    std::vector<double> sum(layout.elements(), 0.0), packed(layout.elements());
    for (const Update* update : by_id) {
      layout.pack(update->model, update->num_examples, UpdateLimits{}, packed);
      EXPECT_EQ(layout.check(packed, UpdateLimits{}), std::nullopt);
      for (size_t i = 0; i < sum.size(); ++i) sum[i] = sum[i] + packed[i];
    }
    WeightedSum expected = float64_sums(federation);
    WeightedSum got = layout.weighted_sum(sum);
    EXPECT_EQ(got.total_weight, expected.total_weight);
    EXPECT_TRUE(same_bytes(got.sum, expected.sum));
    for (const char* name : {"fedavg", "fedadam"}) {
      auto from_updates = make_strategy(name, json::object());
      auto from_sum = make_strategy(name, json::object());
      EXPECT_TRUE(same_bytes(from_updates->aggregate(federation.global, federation.updates),
                             from_sum->aggregate_from_weighted_sum(federation.global, got)))
          << name;
    }
  }
}

TEST(Contribution, HubRefusesNonFiniteValuesAndBadCountsByName) {
  Federation federation = make_federation(ScalarType::Float, 10, 1, 77);
  ContributionLayout layout(federation.spec);
  std::vector<double> packed(layout.elements());
  layout.pack(federation.updates[0].model, 3, UpdateLimits{}, packed);
  auto refused = [&](size_t index, double value) {
    std::vector<double> bad = packed;
    bad[index] = value;
    return layout.check(bad, UpdateLimits{}).value_or("accepted");
  };
  EXPECT_EQ(refused(12, std::nan("")), "tensor 'layer.bias' has a non-finite value at index 2");
  EXPECT_NE(refused(0, INFINITY).find("'layer.weight'"), std::string::npos);
  EXPECT_NE(refused(layout.elements() - 1, 0).find("example count"), std::string::npos);
  EXPECT_NE(refused(layout.elements() - 1, 2.5).find("example count"), std::string::npos);
  EXPECT_EQ(layout.check(std::span<const double>(packed).first(3), UpdateLimits{}).value_or("accepted"),
            "the contribution has 3 elements, the layout " + std::to_string(layout.elements()));
  EXPECT_THROW(layout.pack(federation.updates[0].model, 0, UpdateLimits{}, packed), UpdateRefused);
  // Checked in parts, as segments land at the hub: the same verdicts, indices within the tensor.
  std::vector<double> bad = packed;
  bad[12] = std::nan("");
  std::span<const double> all(bad);
  EXPECT_EQ(layout.check_part(0, all.first(11), UpdateLimits{}), std::nullopt);
  EXPECT_EQ(layout.check_part(11, all.subspan(11, 3), UpdateLimits{}).value_or("accepted"),
            "tensor 'layer.bias' has a non-finite value at index 2");
  EXPECT_EQ(layout.check_part(14, all.subspan(14), UpdateLimits{}), std::nullopt);
  bad.back() = -1;
  EXPECT_NE(layout.check_part(14, std::span<const double>(bad).subspan(14), UpdateLimits{})
                .value_or("accepted")
                .find("example count"),
            std::string::npos);
  EXPECT_NE(
      layout.check_part(layout.elements(), all.first(1), UpdateLimits{}).value_or("accepted").find("beyond"),
      std::string::npos);
}

const std::vector<std::pair<std::string, json>> kRobustStrategies = {{"fedmedian", json::object()},
                                                                     {"trimmed_mean", {{"beta", 0.3}}},
                                                                     {"krum", {{"f", 2}}},
                                                                     {"multi_krum", {{"f", 1}, {"m", 3}}}};

// What a hub keeps of the robust strategies' round: each device's packed Values contribution
// [x ..., n, tag], in device-id order, as its deadline reduce leaves them apart.
std::vector<std::vector<double>> packed_values(const Federation& federation,
                                               const ContributionLayout& layout) {
  std::vector<const Update*> by_id;
  for (const Update& update : federation.updates) by_id.push_back(&update);
  std::sort(by_id.begin(), by_id.end(),
            [](const Update* a, const Update* b) { return a->device_id < b->device_id; });
  std::vector<std::vector<double>> packed;
  for (const Update* update : by_id) {
    packed.emplace_back(layout.elements());
    layout.pack(update->model, update->num_examples, UpdateLimits{}, packed.back());
  }
  return packed;
}

// The robust strategies read the packed values a range at a time, chunks cutting tensors
// mid-way or not, and must give the bits of aggregate() on the individual updates.
TEST(Contribution, RobustStrategiesReadingPackedValuesGiveTheBitsOfTheUpdates) {
  for (ScalarType dtype : kFloatTypes) {
    Federation federation = make_federation(dtype, 1000, 7, 950 + uint64_t(dtype));
    ContributionLayout layout(federation.spec, ContributionKind::Values);
    std::vector<std::vector<double>> packed = packed_values(federation, layout);
    for (size_t i = 0; i < packed.size(); ++i) {
      EXPECT_EQ(layout.check(packed[i], UpdateLimits{}), std::nullopt);
      // The values themselves, then the example count and the tag: nothing is weighted.
      EXPECT_EQ(packed[i][0], double(federation.values[i][0][0]));
      EXPECT_EQ(packed[i][packed[i].size() - 2], double(federation.examples[i]));
    }
    // 1000 weight elements, 6 bias, 4 head: 7 and 333 cut tensors mid-way, 4 cuts the bias, 0
    // is the strategies' own chunking.
    for (int64_t chunk : {int64_t{0}, int64_t{1}, int64_t{4}, int64_t{7}, int64_t{333}}) {
      size_t largest_read = 0;
      UpdatesReader reader =
          layout.updates_reader(packed.size(), [&](size_t update, size_t first, std::span<double> out) {
            largest_read = std::max(largest_read, out.size());
            std::copy_n(packed[update].begin() + std::ptrdiff_t(first), out.size(), out.begin());
          });
      reader.chunk_elements = chunk;
      for (const auto& [name, params] : kRobustStrategies) {
        SCOPED_TRACE(name + ", " + scalar_type_name(dtype) + ", chunks of " + std::to_string(chunk));
        largest_read = 0;
        Model expected = make_strategy(name, params)->aggregate(federation.global, federation.updates);
        Model got = make_strategy(name, params)->aggregate_from_updates(federation.global, reader);
        EXPECT_TRUE(same_bytes(expected, got));
        if (chunk > 0) {
          EXPECT_LE(largest_read, size_t(chunk));
        }
      }
    }
  }
}

TEST(Contribution, EachKindIsReadOnlyAsItsOwn) {
  Federation federation = make_federation(ScalarType::Float, 10, 5, 960);
  ContributionLayout weighted(federation.spec), values(federation.spec, ContributionKind::Values);
  EXPECT_EQ(contribution_kind_for(*make_strategy("fedadam")), ContributionKind::WeightedSum);
  for (const auto& [name, params] : kRobustStrategies)
    EXPECT_EQ(contribution_kind_for(*make_strategy(name, params)), ContributionKind::Values) << name;
  EXPECT_EQ(message_of<ParameterRefused>(
                [&] { values.weighted_sum_reader([](size_t, std::span<double> out) { out[0] = 1; }); }),
            "contribution sum: the layout's contributions are values");
  EXPECT_EQ(message_of<ParameterRefused>(
                [&] { weighted.updates_reader(5, [](size_t, size_t, std::span<double>) {}); }),
            "contributions: the layout's contributions are weighted sums");
  // A Values contribution is one element longer (its tag), so one packed as weighted sums (by a
  // device that predates the kinds) cannot pass for values: the hub's reduce refuses its size,
  // and a contribution of the right size without the tag is refused by the check, segment by
  // segment as well as whole.
  EXPECT_EQ(values.elements(), weighted.elements() + 1);
  std::vector<double> packed(values.elements());
  values.pack(federation.updates[0].model, 4, UpdateLimits{}, packed);
  EXPECT_EQ(values.check(packed, UpdateLimits{}), std::nullopt);
  EXPECT_EQ(packed[weighted.elements() - 1], 4.0);  // n follows the values, as in a weighted sum
  packed.back() = 4.0;
  const std::string untagged =
      "the contribution does not end with the values tag: it was not packed as values";
  EXPECT_EQ(values.check(packed, UpdateLimits{}).value_or("accepted"), untagged);
  EXPECT_EQ(values.check_part(packed.size() - 1, std::span<const double>(packed).last(1), UpdateLimits{})
                .value_or("accepted"),
            untagged);
  std::vector<double> as_weighted(weighted.elements());
  weighted.pack(federation.updates[0].model, 4, UpdateLimits{}, as_weighted);
  EXPECT_NE(values.check(as_weighted, UpdateLimits{}).value_or("accepted").find("elements"),
            std::string::npos);
}

TEST(Contribution, UpdatesReadersRefuseWhatDoesNotFitByName) {
  Federation federation = make_federation(ScalarType::Float, 10, 5, 970);
  ContributionLayout layout(federation.spec, ContributionKind::Values);
  std::vector<std::vector<double>> packed = packed_values(federation, layout);
  UpdatesReader reader =
      layout.updates_reader(packed.size(), [&](size_t update, size_t first, std::span<double> out) {
        std::copy_n(packed[update].begin() + std::ptrdiff_t(first), out.size(), out.begin());
      });
  std::vector<double> out(3);
  const NamedTensor& bias = federation.global.tensors[1];
  EXPECT_EQ(message_of<Refused>([&] { reader.read(5, bias, 0, out); }), "contributions: update 5 of 5");
  EXPECT_EQ(message_of<Refused>([&] { reader.read(0, bias, 4, out); }),
            "contributions: elements 4 to 7 lie beyond tensor 'layer.bias'");
  EXPECT_EQ(message_of<Refused>([&] { reader.read(0, federation.global.tensors[3], 0, {}); }),
            "contributions: the model's tensor 'bn.num_batches_tracked' is not in the contribution layout");
  // Krum's n >= 2f + 3 holds for the reader as for the updates.
  EXPECT_EQ(message_of<Refused>([&] {
              make_strategy("krum", {{"f", 2}})->aggregate_from_updates(federation.global, reader);
            }),
            "krum: needs at least 2f+3 = 7 updates, got 5");
  UpdatesReader none{0, reader.read};
  EXPECT_EQ(message_of<Refused>(
                [&] { make_strategy("fedmedian")->aggregate_from_updates(federation.global, none); }),
            "fedmedian: needs at least 1 update, got 0");
  // A read that fails refuses the updates, and the strategy's rounds do not advance.
  UpdatesReader failing{5, [](size_t, const NamedTensor&, int64_t, std::span<double>) {
                          throw Refused("the hub could not read its spool");
                        }};
  auto median = make_strategy("fedmedian");
  EXPECT_EQ(message_of<Refused>([&] { median->aggregate_from_updates(federation.global, failing); }),
            "the hub could not read its spool");
  EXPECT_EQ(median->rounds(), 0u);
  EXPECT_EQ(message_of<Unsupported>(
                [&] { make_strategy("fedavg")->aggregate_from_updates(federation.global, reader); }),
            "fedavg: aggregates from the weighted sum, which needs the example counts");
}

TEST(Strategies, RobustStrategiesRefuseAWeightedSumByName) {
  Federation federation = make_federation(ScalarType::Float, 4, 5, 650);
  WeightedSum sums = float64_sums(federation);
  for (const auto& [name, params] :
       std::vector<std::pair<std::string, json>>{{"fedmedian", json::object()},
                                                 {"trimmed_mean", json::object()},
                                                 {"krum", json::object()},
                                                 {"multi_krum", {{"m", 2}}}}) {
    auto strategy = make_strategy(name, params);
    EXPECT_FALSE(strategy->aggregates_from_weighted_sum());
    EXPECT_EQ(
        message_of<Unsupported>([&] { strategy->aggregate_from_weighted_sum(federation.global, sums); }),
        name + ": cannot aggregate from a weighted sum, it needs the individual updates");
  }
}

TEST(Strategies, ExportAndRestoreContinueBitForBit) {
  const std::vector<std::pair<std::string, json>> strategies = {
      {"fedavg", json::object()},     {"fedavgm", {{"server_momentum", 0.8}}},
      {"fedadagrad", json::object()}, {"fedadam", json::object()},
      {"fedyogi", {{"tau", 0.01}}},   {"fedmedian", json::object()},
      {"krum", json::object()}};
  for (ScalarType dtype : kFloatTypes)
    for (const auto& [name, params] : strategies) {
      SCOPED_TRACE(name + ", " + scalar_type_name(dtype));
      std::vector<Federation> rounds = {make_federation(dtype, 17000, 5, 700)};
      auto uninterrupted = make_strategy(name, params);
      std::vector<Model> results;
      for (int round = 0; round < 3; ++round) {
        results.push_back(uninterrupted->aggregate(rounds.back().global, rounds.back().updates));
        rounds.push_back(next_round(rounds.back(), results.back(), 5, 710 + uint64_t(round)));
      }

      auto killed = make_strategy(name, params);
      for (int round = 0; round < 2; ++round)
        killed->aggregate(rounds[size_t(round)].global, rounds[size_t(round)].updates);
      // What a coordinator would write to disk and read back after kill -9: JSON text and bytes
      // in fresh buffers.
      StrategyState saved = killed->export_state();
      killed.reset();
      StrategyState loaded{json::parse(saved.meta.dump()), {}};
      for (const NamedTensor& tensor : saved.tensors.tensors)
        loaded.tensors.tensors.push_back(
            copy_tensor(tensor.name, tensor.dtype, tensor.shape, {tensor.data.get(), tensor.nbytes}));
      auto resumed = restore_strategy(loaded);
      EXPECT_EQ(resumed->rounds(), 2u);
      Model third = resumed->aggregate(rounds[2].global, rounds[2].updates);
      EXPECT_TRUE(same_bytes(third, results[2]));
      StrategyState after_uninterrupted = uninterrupted->export_state(),
                    after_resumed = resumed->export_state();
      EXPECT_EQ(after_uninterrupted.meta, after_resumed.meta);
      EXPECT_TRUE(same_bytes(after_uninterrupted.tensors, after_resumed.tensors));
    }
}

TEST(Strategies, RestoreRefusesAStateThatDoesNotFit) {
  Federation federation = make_federation(ScalarType::Float, 5, 3, 800);
  auto adam = make_strategy("fedadam");
  adam->aggregate(federation.global, federation.updates);
  StrategyState state = adam->export_state();

  EXPECT_EQ(message_of<ParameterRefused>([&] { make_strategy("fedyogi")->restore_state(state); }),
            "fedyogi: the saved state belongs to strategy \"fedadam\"");
  EXPECT_NE(message_of<ParameterRefused>([&] {
              make_strategy("fedadam", {{"eta", 0.2}})->restore_state(state);
            }).find("fedadam: the saved state has parameters"),
            std::string::npos);
  StrategyState foreign = state;
  foreign.tensors.tensors[0].name = "momentum/layer.weight";
  EXPECT_EQ(
      message_of<ParameterRefused>([&] { make_strategy("fedadam")->restore_state(foreign); }),
      "fedadam: the saved state has tensor 'momentum/layer.weight', which is not one of its state tensors");
  StrategyState unpaired = state;
  std::erase_if(unpaired.tensors.tensors, [](const NamedTensor& t) { return t.name == "v/layer.bias"; });
  EXPECT_EQ(message_of<ParameterRefused>([&] { make_strategy("fedadam")->restore_state(unpaired); }),
            "fedadam: the saved state has 'm/layer.bias' without its 'v/layer.bias'");
  EXPECT_EQ(message_of<ParameterRefused>([&] {
              make_strategy("fedavg")->restore_state(
                  {{{"strategy", "fedavg"}, {"params", make_strategy("fedavg")->params()}, {"rounds", 1}},
                   state.tensors});
            }),
            "fedavg: the saved state has tensor '" + state.tensors.tensors[0].name +
                "', which is not kept by this strategy");
  // A state of another model is refused at the next aggregate, naming the tensor.
  auto resumed = restore_strategy(state);
  Federation other = make_federation(ScalarType::Float, 6, 3, 801);
  EXPECT_EQ(message_of<ParameterRefused>([&] { resumed->aggregate(other.global, other.updates); }),
            "fedadam: state 'm/layer.weight' has shape [5], the model's tensor has [6]");
}

TEST(Strategies, AnAggregateThatOverflowsIsRefusedAndChangesNothing) {
  // float16 tops out at 65504: momentum pushes the mean 60000 past it.
  ModelSpec spec({{"w", ScalarType::Half, {2}}});
  Model global{{tensor_from(spec.tensors()[0], {0, 1})}};
  std::vector<Update> updates = {{"a", 1, 0, 1, {{tensor_from(spec.tensors()[0], {60000, 1})}}}};
  auto strategy = make_strategy("fedavgm", {{"server_learning_rate", 2.0}});
  EXPECT_EQ(message_of<AggregationFailed>([&] { strategy->aggregate(global, updates); }),
            "fedavgm: tensor 'w' element 0 (index [0]) is not finite in float16 after aggregation; the model "
            "is left "
            "unchanged");
  EXPECT_EQ(strategy->rounds(), 0u);
  EXPECT_TRUE(strategy->export_state().tensors.tensors.empty());
}

TEST(Strategies, AggregateRefusesUpdatesThatDoNotFitTheModel) {
  Federation federation = make_federation(ScalarType::Float, 5, 3, 900);
  auto fedavg = make_strategy("fedavg");
  EXPECT_EQ(message_of<Refused>([&] { fedavg->aggregate(federation.global, {}); }),
            "fedavg: needs at least 1 update, got 0");
  std::vector<Update> twice = federation.updates;
  twice.push_back(twice[0]);
  EXPECT_EQ(reason_of([&] { fedavg->aggregate(federation.global, twice); }), Reason::Duplicate);
  std::vector<Update> reshaped = federation.updates;
  reshaped[1].model.tensors[0].shape = {1, 5};
  EXPECT_EQ(message_of<UpdateRefused>([&] { fedavg->aggregate(federation.global, reshaped); }),
            "fedavg: update from '" + reshaped[1].device_id +
                "': tensor 'layer.weight' does not match the global model's dtype, shape or size");
  std::vector<Update> short_buffer = federation.updates;
  short_buffer[0].model.tensors[0].nbytes -= 4;
  EXPECT_EQ(reason_of([&] { fedavg->aggregate(federation.global, short_buffer); }), Reason::Malformed);
  std::vector<Update> no_examples = federation.updates;
  no_examples[2].num_examples = 0;
  EXPECT_EQ(reason_of([&] { fedavg->aggregate(federation.global, no_examples); }), Reason::BadExamples);
}

TEST(Strategies, KrumNeedsEnoughUpdates) {
  Federation federation = make_federation(ScalarType::Float, 4, 5, 950);
  EXPECT_EQ(message_of<Refused>([&] {
              make_strategy("krum", {{"f", 2}})->aggregate(federation.global, federation.updates);
            }),
            "krum: needs at least 2f+3 = 7 updates, got 5");
  EXPECT_EQ(make_strategy("krum", {{"f", 2}})->min_updates(), 7u);
  EXPECT_EQ(
      message_of<Refused>([&] {
        make_strategy("multi_krum", {{"f", 1}, {"m", 5}})->aggregate(federation.global, federation.updates);
      }),
      "multi_krum: keeping m = 5 of 5 updates with f = 1 needs m <= n - f = 4");
  EXPECT_EQ(make_strategy("multi_krum", {{"f", 1}, {"m", 5}})->min_updates(), 6u);
}

TEST(Strategies, WeightedSumIsCheckedAgainstTheModel) {
  Federation federation = make_federation(ScalarType::Float, 4, 3, 960);
  WeightedSum sums = float64_sums(federation);
  auto fedavg = make_strategy("fedavg");
  WeightedSum no_weight = sums;
  no_weight.total_weight = 0;
  EXPECT_EQ(message_of<Refused>([&] { fedavg->aggregate_from_weighted_sum(federation.global, no_weight); }),
            "fedavg: the weighted sum's total weight 0.000000 must be positive and finite");
  WeightedSum missing = sums;
  missing.sum.tensors.pop_back();
  EXPECT_EQ(message_of<Refused>([&] { fedavg->aggregate_from_weighted_sum(federation.global, missing); }),
            "fedavg: the weighted sum lacks tensor 'head.weight'");
  WeightedSum with_counter = sums;
  with_counter.sum.tensors.push_back(federation.global.tensors[3]);
  EXPECT_EQ(
      message_of<Refused>([&] { fedavg->aggregate_from_weighted_sum(federation.global, with_counter); }),
      "fedavg: the weighted sum has 4 tensors, the model has 3 floating ones");
  WeightedSum not_finite = sums;
  std::vector<double> nan_values = {1, NAN, 3, 4};
  not_finite.sum.tensors[0] = copy_tensor("layer.weight", ScalarType::Double, {4},
                                          std::as_bytes(std::span<const double>(nan_values)));
  EXPECT_EQ(message_of<Refused>([&] { fedavg->aggregate_from_weighted_sum(federation.global, not_finite); }),
            "fedavg: the weighted sum's tensor 'layer.weight' element 1 is not finite");
}

TEST(Strategies, EvaluationIsTheExampleWeightedMean) {
  auto strategy = make_strategy("fedavg");
  std::vector<EvaluationResult> results = {{"c", 30, 0.25, {{"accuracy", 0.9}}},
                                           {"a", 10, 1.5, {{"accuracy", 0.5}, {"f1", 0.4}}},
                                           {"b", 7, 0.125, {}}};
  EvaluationSummary summary = strategy->aggregate_evaluate(results);
  EXPECT_EQ(summary.num_examples, 47);
  EXPECT_EQ(summary.contributors, (std::vector<DeviceId>{"a", "b", "c"}));
  // In device order: a, b, c.
  Tracked loss = (exact(10) * exact(1.5) + exact(7) * exact(0.125) + exact(30) * exact(0.25)) / exact(47);
  Tracked accuracy = (exact(10) * exact(double(0.5)) + exact(30) * exact(double(0.9))) / exact(40);
  EXPECT_TRUE(rounds_from(ScalarType::Double, reinterpret_cast<const std::byte*>(&summary.loss), loss));
  EXPECT_TRUE(rounds_from(ScalarType::Double,
                          reinterpret_cast<const std::byte*>(&summary.metrics.at("accuracy")), accuracy));
  EXPECT_EQ(summary.metrics.at("f1"), 0.4);

  EXPECT_EQ(message_of<Refused>([&] { strategy->aggregate_evaluate({}); }),
            "fedavg: no evaluation results to aggregate");
  std::vector<EvaluationResult> twice = {{"a", 1, 0, {}}, {"a", 2, 0, {}}};
  EXPECT_EQ(message_of<Refused>([&] { strategy->aggregate_evaluate(twice); }),
            "fedavg: evaluation from 'a' is listed twice");
  std::vector<EvaluationResult> empty = {{"a", 0, 0, {}}};
  EXPECT_EQ(message_of<Refused>([&] { strategy->aggregate_evaluate(empty); }),
            "fedavg: evaluation from 'a': 0 examples, must be at least 1");
  std::vector<EvaluationResult> nan_loss = {{"a", 1, NAN, {}}};
  EXPECT_EQ(message_of<Refused>([&] { strategy->aggregate_evaluate(nan_loss); }),
            "fedavg: evaluation from 'a': the loss is not finite");
  std::vector<EvaluationResult> inf_metric = {{"a", 1, 0, {{"auc", INFINITY}}}};
  EXPECT_EQ(message_of<Refused>([&] { strategy->aggregate_evaluate(inf_metric); }),
            "fedavg: evaluation from 'a': metric 'auc' is not finite");
}

// ---------------------------------------------------------------------------------------------
// The factory.

TEST(Factory, KnowsEveryStrategyAndWhatItCanAggregateFrom) {
  std::map<std::string, bool> from_sum = {{"fedavg", true},     {"fedprox", true},       {"fedavgm", true},
                                          {"fedadagrad", true}, {"fedadam", true},       {"fedyogi", true},
                                          {"fedmedian", false}, {"trimmed_mean", false}, {"krum", false},
                                          {"multi_krum", false}};
  EXPECT_EQ(strategy_names().size(), from_sum.size());
  for (const std::string& name : strategy_names()) {
    json params = name == "fedprox"      ? json{{"proximal_mu", 0.01}}
                  : name == "multi_krum" ? json{{"m", 2}}
                                         : json::object();
    auto strategy = make_strategy(name, params);
    EXPECT_EQ(strategy->name(), name);
    EXPECT_EQ(strategy->aggregates_from_weighted_sum(), from_sum.at(name)) << name;
    // params() holds every parameter with its default, and rebuilds an equal strategy.
    EXPECT_EQ(make_strategy(name, strategy->params())->params(), strategy->params());
  }
  EXPECT_EQ(make_strategy("fedadam")->params(), (json{{"eta", 0.1},
                                                      {"eta_l", 0.1},
                                                      {"tau", 1e-9},
                                                      {"beta_1", 0.9},
                                                      {"beta_2", 0.99},
                                                      {"fit_config", json::object()},
                                                      {"evaluate_config", json::object()}}));
}

TEST(Factory, ClientConfigsCarryTheClientSideParameters) {
  auto prox = make_strategy("fedprox", {{"proximal_mu", 0.01}, {"fit_config", {{"local_epochs", 2}}}});
  EXPECT_EQ(prox->configure_fit(), (json{{"proximal_mu", 0.01}, {"local_epochs", 2}}));
  EXPECT_EQ(make_strategy("fedyogi")->configure_fit(), (json{{"eta_l", 0.0316}}));
  EXPECT_EQ(make_strategy("fedavg", {{"evaluate_config", {{"batch_size", 64}}}})->configure_evaluate(),
            (json{{"batch_size", 64}}));
  EXPECT_EQ(message_of<ParameterRefused>([] {
              make_strategy("fedprox", {{"proximal_mu", 0.01}, {"fit_config", {{"proximal_mu", 1}}}});
            }),
            "fedprox: fit_config may not set 'proximal_mu', the strategy sends it");
}

TEST(Factory, RefusesUnknownNamesAndBadParametersByName) {
  EXPECT_EQ(
      message_of<ParameterRefused>([] { make_strategy("fedsgd"); }),
      "unknown strategy 'fedsgd' (known: fedavg, fedprox, fedavgm, fedadagrad, fedadam, fedyogi, fedmedian, "
      "trimmed_mean, krum, multi_krum)");
  EXPECT_EQ(
      message_of<ParameterRefused>([] {
        make_strategy("fedavgm", {{"momentum", 0.9}});
      }),
      "fedavgm: unknown parameter 'momentum' (known: evaluate_config, fit_config, server_learning_rate, "
      "server_momentum)");
  EXPECT_EQ(message_of<ParameterRefused>([] { make_strategy("fedavg", json::array()); }),
            "fedavg: parameters must be a JSON object, got []");
  EXPECT_EQ(message_of<ParameterRefused>([] { make_strategy("fedprox"); }),
            "fedprox: parameter 'proximal_mu' is required");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              make_strategy("fedprox", {{"proximal_mu", -1}});
            }),
            "fedprox: parameter 'proximal_mu' = -1 is outside [0, inf]");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              make_strategy("fedadam", {{"beta_1", 1}});
            }),
            "fedadam: parameter 'beta_1' = 1 is outside [0, 1)");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              make_strategy("fedyogi", {{"tau", 0}});
            }),
            "fedyogi: parameter 'tau' = 0 is outside (0, inf]");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              make_strategy("fedadagrad", {{"eta", "fast"}});
            }),
            "fedadagrad: parameter 'eta' must be a number, got \"fast\"");
  EXPECT_EQ(
      message_of<ParameterRefused>([] {
        make_strategy("fedadagrad", {{"beta_2", 0.9}});
      }),
      "fedadagrad: unknown parameter 'beta_2' (known: beta_1, eta, eta_l, evaluate_config, fit_config, tau)");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              make_strategy("trimmed_mean", {{"beta", 0.5}});
            }),
            "trimmed_mean: parameter 'beta' = 0.5 is outside [0, 0.5)");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              make_strategy("krum", {{"f", -1}});
            }),
            "krum: parameter 'f' = -1 is outside [0, 4294967296]");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              make_strategy("krum", {{"f", 1.5}});
            }),
            "krum: parameter 'f' must be an integer, got 1.5");
  EXPECT_EQ(message_of<ParameterRefused>([] { make_strategy("multi_krum"); }),
            "multi_krum: parameter 'm' is required");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              make_strategy("fedavg", {{"fit_config", 3}});
            }),
            "fedavg: parameter 'fit_config' must be a JSON object, got 3");
}

// ---------------------------------------------------------------------------------------------
// Update validation.

struct ValidationFixture : testing::Test {
  ModelSpec spec = ModelSpec({{"conv.weight", ScalarType::Float, {2, 3}},
                              {"conv.bias", ScalarType::Half, {2}},
                              {"norm.scale", ScalarType::BFloat16, {2}},
                              {"head.weight", ScalarType::Double, {3}},
                              {"steps", ScalarType::Long, {}}});
  UpdateLimits limits{1000, 5000};

  Update valid() const {
    Update update{"phone-1", 7, 3, 100, {}};
    for (const TensorSpec& tensor : spec.tensors())
      update.model.tensors.push_back(
          tensor_from(tensor, std::vector<long double>(size_t(tensor.numel()), 1)));
    return update;
  }
  std::string refusal(const Update& update) const {
    return message_of<UpdateRefused>([&] { validate_update(update, spec, 7, 3, limits); });
  }
  Reason reason(const Update& update) const {
    return reason_of([&] { validate_update(update, spec, 7, 3, limits); });
  }
  // `update` with element `index` of tensor `k` replaced by the raw bits `bits`.
  template <typename Bits>
  Update with_bits(size_t k, int64_t index, Bits bits) const {
    Update update = valid();
    NamedTensor& tensor = update.model.tensors[k];
    std::vector<std::byte> bytes(tensor.data.get(), tensor.data.get() + tensor.nbytes);
    std::memcpy(bytes.data() + index * int64_t(sizeof(Bits)), &bits, sizeof(Bits));
    tensor = copy_tensor(tensor.name, tensor.dtype, tensor.shape, bytes);
    return update;
  }
};

TEST_F(ValidationFixture, AcceptsAnUpdateThatFits) {
  EXPECT_NO_THROW(validate_update(valid(), spec, 7, 3, limits));
  Update reordered = valid();
  std::reverse(reordered.model.tensors.begin(), reordered.model.tensors.end());
  EXPECT_NO_THROW(validate_update(reordered, spec, 7, 3, limits));
}

TEST_F(ValidationFixture, RefusesWrongNames) {
  Update missing = valid();
  missing.model.tensors.erase(missing.model.tensors.begin() + 1);
  EXPECT_EQ(refusal(missing), "update from 'phone-1': tensor 'conv.bias' is missing");
  Update extra = valid();
  extra.model.tensors.push_back(tensor_from({"extra", ScalarType::Float, {1}}, {1}));
  EXPECT_EQ(refusal(extra), "update from 'phone-1': unexpected tensor 'extra'");
  Update twice = valid();
  twice.model.tensors.push_back(twice.model.tensors[0]);
  EXPECT_EQ(refusal(twice), "update from 'phone-1': tensor 'conv.weight' is listed twice");
  Update renamed = valid();
  renamed.model.tensors[0].name = "conv.weights";
  EXPECT_EQ(refusal(renamed), "update from 'phone-1': unexpected tensor 'conv.weights'");
  EXPECT_EQ(reason(renamed), Reason::Malformed);
}

TEST_F(ValidationFixture, RefusesWrongShapesDtypesAndByteCounts) {
  Update reshaped = valid();
  reshaped.model.tensors[0].shape = {3, 2};
  EXPECT_EQ(refusal(reshaped),
            "update from 'phone-1': tensor 'conv.weight' has shape [3, 2], expected [2, 3]");
  Update retyped = valid();
  retyped.model.tensors[1] = tensor_from({"conv.bias", ScalarType::Float, {2}}, {1, 1});
  EXPECT_EQ(refusal(retyped),
            "update from 'phone-1': tensor 'conv.bias' has dtype float32, expected float16");
  Update complex = valid();
  complex.model.tensors[0].dtype = ScalarType(9);  // upstream's ComplexFloat code
  EXPECT_EQ(refusal(complex),
            "update from 'phone-1': tensor 'conv.weight' has dtype code 9, expected float32");
  Update counter_as_float = valid();
  counter_as_float.model.tensors[4] = tensor_from({"steps", ScalarType::Double, {}}, {1});
  EXPECT_EQ(refusal(counter_as_float),
            "update from 'phone-1': tensor 'steps' has dtype float64, expected int64");
  Update truncated = valid();
  truncated.model.tensors[0].nbytes = 20;
  EXPECT_EQ(refusal(truncated),
            "update from 'phone-1': tensor 'conv.weight' holds 20 bytes, shape [2, 3] of float32 needs 24");
  Update no_data = valid();
  no_data.model.tensors[3].data.reset();
  EXPECT_EQ(refusal(no_data),
            "update from 'phone-1': tensor 'head.weight' holds 0 bytes, shape [3] of float64 needs 24");
  EXPECT_EQ(reason(no_data), Reason::Malformed);
}

TEST_F(ValidationFixture, RefusesNaNAndInfinityNamingTensorAndIndex) {
  Update nan_float = with_bits<uint32_t>(0, 5, 0x7fc00000u);
  EXPECT_EQ(refusal(nan_float),
            "update from 'phone-1': tensor 'conv.weight' element 5 (index [1, 2]) is NaN");
  EXPECT_EQ(reason(nan_float), Reason::NonFinite);
  EXPECT_EQ(refusal(with_bits<uint16_t>(1, 1, 0xfc00)),  // float16 -inf
            "update from 'phone-1': tensor 'conv.bias' element 1 (index [1]) is infinite");
  EXPECT_EQ(refusal(with_bits<uint16_t>(2, 0, 0x7f81)),  // bfloat16 signalling NaN
            "update from 'phone-1': tensor 'norm.scale' element 0 (index [0]) is NaN");
  EXPECT_EQ(refusal(with_bits<uint64_t>(3, 2, 0x7ff0000000000000ull)),
            "update from 'phone-1': tensor 'head.weight' element 2 (index [2]) is infinite");
  // The first bad element is named, and the largest finite values are not refused.
  Update two_bad = with_bits<uint32_t>(0, 4, 0x7f800000u);
  std::vector<std::byte> bytes(two_bad.model.tensors[0].data.get(), two_bad.model.tensors[0].data.get() + 24);
  uint32_t nan = 0xffc00000u;
  std::memcpy(bytes.data() + 8, &nan, 4);
  two_bad.model.tensors[0] = copy_tensor("conv.weight", ScalarType::Float, {2, 3}, bytes);
  EXPECT_EQ(refusal(two_bad), "update from 'phone-1': tensor 'conv.weight' element 2 (index [0, 2]) is NaN");
  EXPECT_NO_THROW(validate_update(with_bits<uint16_t>(1, 0, 0x7bff), spec, 7, 3, limits));
  EXPECT_NO_THROW(validate_update(with_bits<uint32_t>(0, 0, 0x7f7fffffu), spec, 7, 3, limits));
}

TEST_F(ValidationFixture, RefusesOversizedUpdatesBeforeReadingThem) {
  Update huge = valid();
  huge.model.tensors.push_back(wrap_tensor("padding", ScalarType::Float, {250}, nullptr, 1000));
  EXPECT_EQ(refusal(huge), "update from 'phone-1': 1064 bytes exceed the limit of 1000");
  EXPECT_EQ(reason(huge), Reason::TooLarge);
}

TEST_F(ValidationFixture, RefusesOtherRoundsAndVersions) {
  Update late = valid();
  late.round_id = 6;
  EXPECT_EQ(refusal(late),
            "update from 'phone-1': round 6 is over, the current round is 7 (a late or replayed update)");
  EXPECT_EQ(reason(late), Reason::WrongRound);
  Update early = valid();
  early.round_id = 8;
  EXPECT_EQ(refusal(early), "update from 'phone-1': round 8 has not started, the current round is 7");
  Update stale = valid();
  stale.model_version = 2;
  EXPECT_EQ(refusal(stale), "update from 'phone-1': trained on model version 2, round 7 trains version 3");
  EXPECT_EQ(reason(stale), Reason::WrongVersion);
}

TEST_F(ValidationFixture, RefusesExampleCountsOutOfBounds) {
  for (int64_t count : {int64_t{0}, int64_t{-5}, int64_t{5001}}) {
    Update update = valid();
    update.num_examples = count;
    EXPECT_EQ(refusal(update),
              "update from 'phone-1': " + std::to_string(count) + " examples, must be between 1 and 5000");
    EXPECT_EQ(reason(update), Reason::BadExamples);
  }
  Update anonymous = valid();
  anonymous.device_id.clear();
  EXPECT_EQ(refusal(anonymous), "update: the device id is empty");
}

TEST(ModelSpecs, RefuseWhatCannotBeAModel) {
  EXPECT_EQ(message_of<ParameterRefused>([] {
              ModelSpec({{"a", ScalarType::Float, {1}}, {"a", ScalarType::Float, {2}}});
            }),
            "model: tensor 'a' is listed twice");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              ModelSpec({{"", ScalarType::Float, {1}}});
            }),
            "model: a tensor has an empty name");
  EXPECT_EQ(
      message_of<ParameterRefused>([] {
        ModelSpec({{"z", ScalarType(10), {1}}});
      }),
      "model: tensor 'z' has dtype code 10, which is not supported (uint8, int8, int16, int32, int64, bool, "
      "float16, bfloat16, float32, float64)");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              ModelSpec({{"n", ScalarType::Float, {2, -1}}});
            }),
            "model: tensor 'n' has shape [2, -1], which has a negative dimension or too many elements");
  EXPECT_EQ(
      message_of<ParameterRefused>([] {
        ModelSpec({{"big", ScalarType::Float, {int64_t{1} << 31, int64_t{1} << 31}}});
      }),
      "model: tensor 'big' has shape [2147483648, 2147483648], which has a negative dimension or too many "
      "elements");
  Model inconsistent{{wrap_tensor("w", ScalarType::Float, {4}, nullptr, 16)}};
  EXPECT_EQ(message_of<ParameterRefused>([&] { inconsistent.spec(); }),
            "model: tensor 'w' holds 0 bytes, its shape [4] of float32 needs 16");
}

TEST(ModelSpecs, WrappedTensorsShareTheirBytes) {
  auto buffer = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3});
  std::shared_ptr<const std::byte> bytes(buffer, reinterpret_cast<const std::byte*>(buffer->data()));
  NamedTensor tensor = wrap_tensor("w", ScalarType::Float, {3}, bytes, 12);
  EXPECT_EQ(tensor.data.get(), reinterpret_cast<const std::byte*>(buffer->data()));
  buffer.reset();  // the tensor keeps the vector alive
  EXPECT_EQ(read_as<float>(tensor.data.get() + 8), 3.0f);
}

// ---------------------------------------------------------------------------------------------
// Selection.

std::vector<DeviceId> devices(size_t count) {
  std::vector<DeviceId> ids;
  for (size_t i = 0; i < count; ++i) ids.push_back("d" + std::to_string(i));
  return ids;
}

TEST(Selection, CountsAreTheClampedCeilingTimesTheOverSelection) {
  struct Case {
    size_t available;
    SelectionConfig config;
    size_t target, selected;
  };
  for (const Case& c : {Case{30, {0.1, 1, 100, 1.0}, 3, 3},     // 0.1 * 30 is 3.0000000000000004 in double
                        Case{30, {0.1, 1, 100, 1.3}, 3, 4},     // ceil(3.9)
                        Case{10, {0.1, 1, 100, 1.3}, 1, 2},     // 1.3 * 1 -> 2
                        Case{7, {0.5, 1, 100, 1.0}, 4, 4},      // ceil(3.5)
                        Case{100, {0.01, 5, 100, 1.0}, 5, 5},   // clamped up to min
                        Case{100, {0.9, 1, 20, 1.3}, 20, 26},   // clamped down to max, then over-selected
                        Case{22, {0.9, 1, 20, 1.3}, 20, 22},    // over-selection limited by what is there
                        Case{10, {0.3, 1, 100, 1.1}, 3, 4}}) {  // 1.1 * 3 = 3.3000000000000003 -> 4
    Selection selection = select_devices(devices(c.available), c.config, 1);
    ASSERT_TRUE(selection.ok()) << selection.shortfall;
    EXPECT_EQ(selection.target, c.target) << c.available << " available, fraction " << c.config.fraction;
    EXPECT_EQ(selection.devices.size(), c.selected)
        << c.available << " available, fraction " << c.config.fraction;
    EXPECT_TRUE(std::is_sorted(selection.devices.begin(), selection.devices.end()));
    EXPECT_EQ(std::set<DeviceId>(selection.devices.begin(), selection.devices.end()).size(), c.selected);
  }
}

TEST(Selection, IsDeterministicUnderASeedWhateverTheInputOrder) {
  SelectionConfig config{0.3, 1, 100, 1.0};
  std::vector<DeviceId> ids = devices(50), reversed(ids.rbegin(), ids.rend());
  Selection a = select_devices(ids, config, 42), b = select_devices(reversed, config, 42);
  EXPECT_EQ(a.devices, b.devices);
  bool differs = false;
  for (uint64_t seed = 43; seed < 53; ++seed)
    differs |= select_devices(ids, config, seed).devices != a.devices;
  EXPECT_TRUE(differs);
}

TEST(Selection, IsUniform) {
  // 4000 draws of 5 out of 20: each device is chosen with p = 1/4, 1000 times on average, with a
  // standard deviation of sqrt(4000 * 1/4 * 3/4) = 27.4; five of them bound a failure of a fair
  // selector to about 1e-6 per device.
  std::map<DeviceId, int> chosen;
  for (uint64_t seed = 0; seed < 4000; ++seed)
    for (const DeviceId& id : select_devices(devices(20), {0.25, 1, 100, 1.0}, seed).devices) ++chosen[id];
  ASSERT_EQ(chosen.size(), 20u);
  for (const auto& [id, count] : chosen) EXPECT_NEAR(count, 1000, 5 * 27.4) << id;
}

TEST(Selection, SaysSoWhenTooFewAreAvailable) {
  Selection selection = select_devices(devices(3), {0.5, 5, 10, 1.0}, 1);
  EXPECT_FALSE(selection.ok());
  EXPECT_TRUE(selection.devices.empty());
  EXPECT_EQ(selection.shortfall, "3 devices available, at least 5 are needed");
}

TEST(Selection, RefusesBadConfigsAndRepeatedDevices) {
  EXPECT_EQ(message_of<Refused>([] {
              select_devices({"a", "b", "a"}, {}, 1);
            }),
            "selection: device 'a' is listed twice among the available devices");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              select_devices(devices(3), {0, 1, 2, 1.0}, 1);
            }),
            "selection: fraction 0.000000 is outside (0, 1]");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              select_devices(devices(3), {1.5, 1, 2, 1.0}, 1);
            }),
            "selection: fraction 1.500000 is outside (0, 1]");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              select_devices(devices(3), {0.5, 0, 2, 1.0}, 1);
            }),
            "selection: min_devices must be at least 1");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              select_devices(devices(3), {0.5, 3, 2, 1.0}, 1);
            }),
            "selection: max_devices 2 is below min_devices 3");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              select_devices(devices(3), {0.5, 1, 2, 0.9}, 1);
            }),
            "selection: over_selection 0.900000 must be a finite factor of at least 1");
}

// ---------------------------------------------------------------------------------------------
// Rounds.

struct RoundFixture : testing::Test {
  ModelSpec spec = ModelSpec({{"w", ScalarType::Float, {2}}});
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();

  RoundPlan plan(size_t target, size_t minimum) const {
    return {5, 2, {"c", "a", "b", "d"}, target, minimum, clock->now() + 10s};
  }
  Update update(const DeviceId& device, uint64_t round_id = 5) const {
    return {device, round_id, 2, 10, {{tensor_from(spec.tensors()[0], {1, 2})}}};
  }
};

TEST_F(RoundFixture, CompletesOverExactlyTheContributorsWhoArrived) {
  Round round(plan(3, 2), spec, {}, clock);
  round.submit(update("d"));
  clock->advance(3s);
  round.submit(update("a"));
  EXPECT_FALSE(round.due());
  clock->advance(7s);  // the deadline
  EXPECT_TRUE(round.due());
  EXPECT_EQ(reason_of([&] { round.submit(update("b")); }), Reason::RoundClosed);
  EXPECT_EQ(round.close(), RoundStatus::Completed);
  EXPECT_EQ(round.contributors(), (std::vector<DeviceId>{"a", "d"}));
  EXPECT_EQ(round.missing(), (std::vector<DeviceId>{"b", "c"}));
  ASSERT_EQ(round.updates().size(), 2u);
  EXPECT_EQ(round.updates()[0].device_id, "a");
  EXPECT_EQ(message_of<StateError>([&] { round.close(); }), "round 5 is already closed");
  EXPECT_EQ(message_of<UpdateRefused>([&] { round.submit(update("c")); }),
            "update from 'c': round 5 is closed (completed)");
}

TEST_F(RoundFixture, IsDueOnceItHasItsTargetAndTakesNoMore) {
  Round round(plan(2, 1), spec, {}, clock);
  round.submit(update("b"));
  EXPECT_FALSE(round.due());
  round.submit(update("c"));
  EXPECT_TRUE(round.due());
  EXPECT_EQ(message_of<UpdateRefused>([&] { round.submit(update("a")); }),
            "update from 'a': round 5 already has the 2 updates it wants");
  EXPECT_EQ(round.close(), RoundStatus::Completed);
  EXPECT_EQ(round.contributors(), (std::vector<DeviceId>{"b", "c"}));
}

TEST_F(RoundFixture, IsAbandonedWithFewerThanTheMinimum) {
  Round round(plan(4, 3), spec, {}, clock);
  round.submit(update("a"));
  round.submit(update("b"));
  clock->advance(11s);
  EXPECT_EQ(round.close(), RoundStatus::Abandoned);
  EXPECT_EQ(round.contributors(), (std::vector<DeviceId>{"a", "b"}));
}

TEST_F(RoundFixture, RefusesStrangersReplaysAndStaleUpdates) {
  Round round(plan(4, 1), spec, {}, clock);
  round.submit(update("a"));
  EXPECT_EQ(message_of<UpdateRefused>([&] { round.submit(update("a")); }),
            "update from 'a': the device already contributed to round 5");
  EXPECT_EQ(reason_of([&] { round.submit(update("a")); }), Reason::Duplicate);
  EXPECT_EQ(message_of<UpdateRefused>([&] { round.submit(update("z")); }),
            "update from 'z': the device was not selected for round 5");
  EXPECT_EQ(reason_of([&] { round.submit(update("z")); }), Reason::NotSelected);
  EXPECT_EQ(reason_of([&] { round.submit(update("b", 4)); }), Reason::WrongRound);
  Update bad = update("b");
  bad.model.tensors[0] = tensor_from(spec.tensors()[0], {NAN, 0});
  EXPECT_EQ(reason_of([&] { round.submit(bad); }), Reason::NonFinite);
  EXPECT_EQ(round.contributors(), (std::vector<DeviceId>{"a"}));  // refused updates leave no trace
  round.submit(update("b"));
}

TEST_F(RoundFixture, ClosesFromTheContributorsOfADataPlaneSum) {
  Round round(plan(2, 2), spec, {}, clock);
  EXPECT_EQ(message_of<Refused>([&] {
              round.close_with_contributors({"a", "x"});
            }),
            "round 5: contributor 'x' was not selected");
  EXPECT_EQ(message_of<Refused>([&] {
              round.close_with_contributors({"a", "a"});
            }),
            "round 5: contributor 'a' is listed twice");
  EXPECT_EQ(round.close_with_contributors({"d", "b", "c"}), RoundStatus::Completed);
  EXPECT_EQ(round.contributors(), (std::vector<DeviceId>{"b", "c", "d"}));
  Round mixed(plan(2, 1), spec, {}, clock);
  mixed.submit(update("a"));
  EXPECT_EQ(message_of<StateError>([&] { mixed.close_with_contributors({"b"}); }),
            "round 5 took individual updates; it cannot also be closed from a data-plane sum");
}

TEST_F(RoundFixture, RefusesImpossiblePlans) {
  EXPECT_EQ(message_of<ParameterRefused>([&] { Round(plan(5, 1), spec, {}, clock); }),
            "round 5: needs min_updates (1) <= target_updates (5) <= selected devices (4)");
  EXPECT_EQ(message_of<ParameterRefused>([&] { Round(plan(2, 3), spec, {}, clock); }),
            "round 5: needs min_updates (3) <= target_updates (2) <= selected devices (4)");
  RoundPlan repeated = plan(2, 1);
  repeated.selected.push_back("a");
  EXPECT_EQ(message_of<ParameterRefused>([&] { Round(repeated, spec, {}, clock); }),
            "round 5: device 'a' is selected twice");
}

// ---------------------------------------------------------------------------------------------
// Tasks.

struct TaskFixture : testing::Test {
  ModelSpec spec = ModelSpec({{"w", ScalarType::Float, {3}}, {"steps", ScalarType::Long, {}}});
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();

  TaskConfig config(size_t max_retries = 2) const {
    TaskConfig config;
    config.name = "keyboard";
    config.selection = {0.5, 2, 4, 1.5};
    config.round_timeout = 60s;
    config.min_updates = 2;
    config.max_retries = max_retries;
    config.seed = 11;
    return config;
  }
  Model initial() const {
    return {{tensor_from(spec.tensors()[0], {0, 0, 0}), tensor_from(spec.tensors()[1], {5})}};
  }
  // The update a selected device sends for the task's open round.
  Update update_for(const Task& task, const DeviceId& device, std::vector<long double> values,
                    int64_t examples) const {
    json config = task.fit_config();
    return {device,
            config["round_id"].get<uint64_t>(),
            config["model_version"].get<uint64_t>(),
            examples,
            {{tensor_from(spec.tensors()[0], values), tensor_from(spec.tensors()[1], {99})}}};
  }
};

TEST_F(TaskFixture, RunsRoundsAndCountsVersions) {
  Task task(config(), initial(), make_strategy("fedprox", {{"proximal_mu", 0.01}}), clock);
  Selection selection = task.start_round(devices(6));
  ASSERT_TRUE(selection.ok());
  EXPECT_EQ(selection.target, 3u);
  EXPECT_EQ(selection.devices.size(), 5u);  // ceil(3 * 1.5), out of 6
  EXPECT_EQ(task.fit_config(), (json{{"proximal_mu", 0.01}, {"round_id", 1}, {"model_version", 0}}));
  task.submit(update_for(task, selection.devices[2], {1, 2, 3}, 1));
  task.submit(update_for(task, selection.devices[0], {3, 2, 1}, 3));
  EXPECT_FALSE(task.round_due());
  task.submit(update_for(task, selection.devices[1], {2, 2, 2}, 4));
  EXPECT_TRUE(task.round_due());  // the target of 3 arrived before the deadline
  RoundOutcome outcome = task.close_round();
  EXPECT_EQ(outcome.status, RoundStatus::Completed);
  EXPECT_EQ(outcome.contributors,
            (std::vector<DeviceId>{selection.devices[0], selection.devices[1], selection.devices[2]}));
  EXPECT_EQ(outcome.missing, (std::vector<DeviceId>{selection.devices[3], selection.devices[4]}));
  EXPECT_EQ(outcome.model_version, 1u);
  EXPECT_EQ(task.model_version(), 1u);
  // (3*3 + 4*2 + 1*1) / 8 etc., exact in float32; the counter keeps the global value.
  const NamedTensor& w = task.global_model().tensors[0];
  EXPECT_EQ(read_as<float>(w.data.get()), 18.0f / 8);
  EXPECT_EQ(read_as<float>(w.data.get() + 4), 2.0f);
  EXPECT_EQ(read_as<float>(w.data.get() + 8), 14.0f / 8);
  EXPECT_EQ(read_as<int64_t>(task.global_model().tensors[1].data.get()), 5);
  EXPECT_EQ(message_of<StateError>([&] { task.close_round(); }), "task 'keyboard': no round is open");

  ASSERT_TRUE(task.start_round(devices(6)).ok());
  EXPECT_EQ(task.fit_config()["round_id"], 2);
  EXPECT_EQ(task.fit_config()["model_version"], 1);
  EXPECT_EQ(message_of<StateError>([&] { task.start_round(devices(6)); }),
            "task 'keyboard': round 2 is open");
}

TEST_F(TaskFixture, OpensNoRoundWhenTooFewDevicesCheckedIn) {
  Task task(config(), initial(), make_strategy("fedavg"), clock);
  Selection selection = task.start_round({"only-one"});
  EXPECT_FALSE(selection.ok());
  EXPECT_EQ(selection.shortfall, "1 devices available, at least 2 are needed");
  EXPECT_EQ(task.current_round(), nullptr);
  EXPECT_EQ(message_of<UpdateRefused>([&] {
              task.submit({"only-one", 1, 0, 1, initial()});
            }),
            "update from 'only-one' for round 1: task 'keyboard' has no open round");
}

TEST_F(TaskFixture, RetriesAbandonedRoundsThenFailsByName) {
  Task task(config(2), initial(), make_strategy("fedavg"), clock);
  // One completed round, then abandonments: the retry counter starts afresh after a completion.
  Selection first = task.start_round(devices(4));
  task.submit(update_for(task, first.devices[0], {1, 1, 1}, 1));
  task.submit(update_for(task, first.devices[1], {1, 1, 1}, 1));
  ASSERT_EQ(task.close_round().status, RoundStatus::Completed);

  Update from_abandoned;
  for (size_t attempt = 1; attempt <= 2; ++attempt) {
    Selection selection = task.start_round(devices(4));
    from_abandoned = update_for(task, selection.devices[0], {1, 1, 1}, 1);
    task.submit(from_abandoned);
    clock->advance(61s);
    EXPECT_TRUE(task.round_due());
    EXPECT_EQ(reason_of([&] {
                task.submit(update_for(task, selection.devices[1], {1, 1, 1}, 1));
              }),
              Reason::RoundClosed);
    RoundOutcome outcome = task.close_round();
    EXPECT_EQ(outcome.status, RoundStatus::Abandoned);
    EXPECT_EQ(outcome.reason, "1 of the 2 updates required arrived");
    EXPECT_EQ(outcome.abandoned_in_a_row, attempt);
    EXPECT_EQ(outcome.model_version, 1u);
  }
  // The third attempt has a fresh round id, so the abandoned attempt's update cannot count.
  Selection third = task.start_round(devices(4));
  EXPECT_EQ(task.fit_config()["round_id"], 4);
  EXPECT_EQ(task.fit_config()["model_version"], 1);
  from_abandoned.device_id = third.devices[0];
  EXPECT_EQ(message_of<UpdateRefused>([&] { task.submit(from_abandoned); }),
            "update from '" + third.devices[0] +
                "': round 3 is over, the current round is 4 (a late or replayed update)");
  clock->advance(61s);
  std::string failure =
      "task 'keyboard' failed: the round training model version 1 was abandoned 3 times in a row "
      "(max_retries 2); last, round 4: 0 of the 2 updates required arrived";
  EXPECT_EQ(message_of<TaskFailed>([&] { task.close_round(); }), failure);
  EXPECT_TRUE(task.failed());
  EXPECT_EQ(message_of<TaskFailed>([&] { task.start_round(devices(4)); }), failure);
  // A failed task stays failed across a restart.
  Task restored = Task::restore(config(2), task.checkpoint(), clock);
  EXPECT_EQ(message_of<TaskFailed>([&] { restored.start_round(devices(4)); }), failure);
}

TEST_F(TaskFixture, AnAggregateThatFailsAbandonsTheRound) {
  ModelSpec half({{"w", ScalarType::Half, {1}}});
  Model global{{tensor_from(half.tensors()[0], {0})}};
  TaskConfig settings = config(0);
  Task task(settings, global, make_strategy("fedavgm", {{"server_learning_rate", 3.0}}), clock);
  Selection selection = task.start_round(devices(2));
  for (const DeviceId& device : selection.devices)
    task.submit({device, 1, 0, 1, {{tensor_from(half.tensors()[0], {30000})}}});
  EXPECT_EQ(message_of<TaskFailed>([&] { task.close_round(); }),
            "task 'keyboard' failed: the round training model version 0 was abandoned 1 times in a row "
            "(max_retries "
            "0); last, round 1: fedavgm: tensor 'w' element 0 (index [0]) is not finite in float16 after "
            "aggregation; "
            "the model is left unchanged");
  EXPECT_EQ(task.model_version(), 0u);
}

TEST_F(TaskFixture, ClosesFromAWeightedSum) {
  Task task(config(), initial(), make_strategy("fedavg"), clock);
  Selection selection = task.start_round(devices(4));
  // The data plane's summed contributions [n * w ..., n], read a piece at a time.
  const std::vector<double> sum = {4, 8, 12, 4};
  WeightedSumReader weighted =
      ContributionLayout(initial().spec()).weighted_sum_reader([&](size_t first, std::span<double> out) {
        std::copy_n(sum.begin() + std::ptrdiff_t(first), out.size(), out.begin());
      });
  EXPECT_EQ(weighted.total_weight, 4);
  RoundOutcome outcome =
      task.close_round_from_weighted_sum(weighted, {selection.devices[1], selection.devices[0]});
  EXPECT_EQ(outcome.status, RoundStatus::Completed);
  EXPECT_EQ(outcome.contributors, (std::vector<DeviceId>{selection.devices[0], selection.devices[1]}));
  EXPECT_EQ(read_as<float>(task.global_model().tensors[0].data.get() + 8), 3.0f);

  Task median(config(), initial(), make_strategy("fedmedian"), clock);
  median.start_round(devices(4));
  EXPECT_EQ(
      message_of<Unsupported>([&] { median.close_round_from_weighted_sum(weighted, {}); }),
      "task 'keyboard': fedmedian cannot aggregate from a weighted sum, it needs the individual updates");
}

TEST_F(TaskFixture, ClosesFromTheIndividualUpdates) {
  // The data plane's Values contributions [w ..., n], kept apart and read a range at a time.
  const std::vector<std::vector<double>> kept = {{1, 9, -4, 100}, {3, 2, -5, 1}, {2, 5, 7, 7}};
  auto reader_of = [&](const ContributionLayout& layout, size_t count) {
    return layout.updates_reader(count, [&](size_t update, size_t first, std::span<double> out) {
      std::copy_n(kept[update].begin() + std::ptrdiff_t(first), out.size(), out.begin());
    });
  };
  const ContributionLayout layout(initial().spec(), ContributionKind::Values);
  TaskConfig three = config();
  three.min_updates = 3;
  three.selection.min_devices = 3;
  Task task(three, initial(), make_strategy("fedmedian"), clock);
  Selection selection = task.start_round(devices(4));
  RoundOutcome outcome = task.close_round_from_updates(
      reader_of(layout, 3), {selection.devices[2], selection.devices[0], selection.devices[1]});
  EXPECT_EQ(outcome.status, RoundStatus::Completed);
  for (size_t j = 0; j < 3; ++j)  // the median of each coordinate; example counts play no part
    EXPECT_EQ(read_as<float>(task.global_model().tensors[0].data.get() + 4 * j),
              (std::array<float, 3>{2, 5, -4})[j]);
  EXPECT_EQ(read_as<int64_t>(task.global_model().tensors[1].data.get()), 5);

  // Below Krum's n >= 2f + 3 the task never opens (min_updates), so a round cannot get there
  // with fewer; a reader that fails abandons the round with its reason.
  EXPECT_NE(message_of<ParameterRefused>([&] {
              Task(config(), initial(), make_strategy("krum"), clock);
            }).find("min_updates 2 is below the 3 that krum needs"),
            std::string::npos);
  Task krum(three, initial(), make_strategy("krum"), clock);
  selection = krum.start_round(devices(4));
  UpdatesReader failing{3, [](size_t, const NamedTensor&, int64_t, std::span<double>) -> void {
                          throw Refused("the hub could not read the contributions back: spool gone");
                        }};
  outcome = krum.close_round_from_updates(failing,
                                          {selection.devices[0], selection.devices[1], selection.devices[2]});
  EXPECT_EQ(outcome.status, RoundStatus::Abandoned);
  EXPECT_EQ(outcome.reason, "the hub could not read the contributions back: spool gone");
  EXPECT_EQ(message_of<Refused>([&] {
              krum.start_round(devices(4));
              krum.close_round_from_updates(reader_of(layout, 3), {selection.devices[0]});
            }),
            "task 'keyboard': the updates reader holds 3 updates for 1 contributors");
  EXPECT_EQ(message_of<Unsupported>([&] {
              Task mean(config(), initial(), make_strategy("fedavg"), clock);
              mean.start_round(devices(4));
              mean.close_round_from_updates(reader_of(layout, 2), {});
            }),
            "task 'keyboard': fedavg aggregates from a weighted sum, not from the individual updates");
}

TEST_F(TaskFixture, ResumesFromACheckpointExactly) {
  // Two tasks side by side: one runs on, the other is checkpointed after each round and
  // replaced by a restored copy, as a coordinator killed between rounds would be.
  auto updates_for = [&](const Task& task, const Selection& selection, int round) {
    std::vector<Update> updates;
    for (size_t i = 0; i < 2; ++i)
      updates.push_back(
          update_for(task, selection.devices[i], {0.5L + round, -1.25L * (i + 1), 3.0L / 8}, 7 + int(i)));
    return updates;
  };
  Task steady(config(), initial(), make_strategy("fedadam", {{"tau", 0.01}}), clock);
  std::optional<Task> restarted(std::in_place, config(), initial(), make_strategy("fedadam", {{"tau", 0.01}}),
                                clock);
  for (int round = 0; round < 3; ++round) {
    Selection a = steady.start_round(devices(5)), b = restarted->start_round(devices(5));
    ASSERT_EQ(a.devices, b.devices);
    for (Update& update : updates_for(steady, a, round)) steady.submit(std::move(update));
    for (Update& update : updates_for(*restarted, b, round)) restarted->submit(std::move(update));
    clock->advance(61s);
    steady.close_round();
    restarted->close_round();
    TaskCheckpoint saved = restarted->checkpoint();
    TaskCheckpoint loaded{json::parse(saved.meta.dump()),
                          saved.global_model,
                          {json::parse(saved.strategy.meta.dump()), saved.strategy.tensors}};
    restarted.reset();
    restarted.emplace(Task::restore(config(), loaded, clock));
    EXPECT_TRUE(same_bytes(steady.global_model(), restarted->global_model()));
    EXPECT_EQ(restarted->model_version(), steady.model_version());
  }
  // A round open at the checkpoint is lost, and its id is not reused.
  Selection open = restarted->start_round(devices(5));
  Update late = update_for(*restarted, open.devices[0], {1, 1, 1}, 1);
  Task after_crash = Task::restore(config(), restarted->checkpoint(), clock);
  after_crash.start_round(devices(5));
  EXPECT_EQ(after_crash.fit_config()["round_id"], late.round_id + 1);
  EXPECT_EQ(message_of<ParameterRefused>([&] {
              TaskConfig other = config();
              other.name = "camera";
              Task::restore(other, steady.checkpoint(), clock);
            }),
            "task 'camera': the checkpoint belongs to task \"keyboard\"");
}

TEST_F(TaskFixture, RefusesConfigurationsThatCouldNeverComplete) {
  TaskConfig krum_config = config();
  EXPECT_EQ(message_of<ParameterRefused>([&] {
              Task(krum_config, initial(), make_strategy("krum", {{"f", 1}}), clock);
            }),
            "task 'keyboard': min_updates 2 is below the 5 that krum needs");
  TaskConfig too_few = config();
  too_few.min_updates = 3;
  EXPECT_EQ(
      message_of<ParameterRefused>([&] { Task(too_few, initial(), make_strategy("fedavg"), clock); }),
      "task 'keyboard': selection.min_devices 2 is below min_updates 3, so a round could never complete");
  TaskConfig unnamed = config();
  unnamed.name.clear();
  EXPECT_EQ(message_of<ParameterRefused>([&] { Task(unnamed, initial(), make_strategy("fedavg"), clock); }),
            "task: the name is empty");
  EXPECT_EQ(message_of<ParameterRefused>([&] {
              Task(config(), initial(), make_strategy("fedavg", {{"fit_config", {{"round_id", 1}}}}), clock);
            }),
            "task 'keyboard': the strategy's fit config may not set 'round_id', the task sends it");
}

}  // namespace
}  // namespace tn::federated
