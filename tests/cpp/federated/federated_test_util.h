// What the tests of the federated coordinator's library share: number formats decoded from
// their bit layouts, references that carry a bound on the library's rounding (Tracked) and the
// check of a result against them, models and federations of random updates, and the checks of
// a refusal's reason. Each unit's tests are in their own file (strategies against references
// written there from the papers' formulas, update validation, device selection, the round state
// machine, the task's retries and checkpoints).
//
// How results are compared. The library computes in double and rounds once to the tensor's
// dtype. The references compute the same formulas in long double and carry, next to each
// value, a bound on how far the library's double evaluation can be from it (Tracked). A result
// element passes when it is the round-to-nearest, in its dtype, of some real number within that
// bound of the reference value. Where the bound is far below half a unit in the last place of
// the dtype (float16, bfloat16, float32 and every exact case) that pins the result to one value,
// the correctly rounded one; it leaves a choice only when the exact result lies within the bound
// of a rounding boundary (double rounding). For float64 results the bound itself is the
// tolerance. No tolerance is chosen by hand.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "federated/errors.h"
#include "federated/model.h"
#include "federated/strategy.h"
#include "federated/validation.h"
#include "test_support.h"

namespace tn::federated {

using json = nlohmann::json;
using Reason = UpdateRefused::Reason;

using tn::test::message_of;

// The reason of the UpdateRefused `body` throws (failing the test when it throws none).
Reason reason_of(const std::function<void()>& body);

// Device ids "d0", "d1", ...: `count` of them.
std::vector<DeviceId> devices(size_t count);

// ---------------------------------------------------------------------------------------------
// Number formats, decoded here from their bit layouts (not through tn_core or the library).

inline constexpr ScalarType kFloatTypes[] = {ScalarType::Float, ScalarType::Double, ScalarType::Half,
                                             ScalarType::BFloat16};

size_t width_of(ScalarType dtype);

template <typename T>
T read_as(const std::byte* element) {
  T value;
  std::memcpy(&value, element, sizeof(T));
  return value;
}

// sign * mantissa * 2^exponent for IEEE binary16: 5 exponent bits (bias 15), 10 mantissa bits.
long double decode_half(uint16_t bits);

// bfloat16 is the upper half of a float32.
long double decode_bfloat16(uint16_t bits);

long double decode(ScalarType dtype, const std::byte* element);

// The 16-bit pattern whose value is exactly `value` (a test needs few, so a scan will do).
uint16_t bits_of(ScalarType dtype, long double value);

// Writes `value`, which must be representable in dtype, at `element`.
void encode(ScalarType dtype, long double value, std::byte* element);

// A random value representable in dtype, of magnitude roughly 2^-6 .. 2^4, now and then zero.
long double random_value(ScalarType dtype, std::mt19937_64& rng, std::byte* element);

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

inline constexpr long double kUnit = 0x1p-53L + 0x1p-64L;
inline constexpr long double kUnderflow = 0x1p-1074L;

Tracked exact(long double value);
Tracked rounded(long double value, long double inherited);
Tracked operator+(Tracked a, Tracked b);
Tracked operator-(Tracked a, Tracked b);
Tracked operator*(Tracked a, Tracked b);
Tracked operator/(Tracked a, Tracked b);
Tracked sqrt(Tracked a);

// Whether the `dtype` element at `element` is the round-to-nearest of a real within
// reference.error of reference.value: its rounding interval, half the gap to each neighbour on
// either side, must meet [value - error, value + error].
testing::AssertionResult rounds_from(ScalarType dtype, const std::byte* element, Tracked reference);

// ---------------------------------------------------------------------------------------------
// Models and federations of random updates.

NamedTensor tensor_from(const TensorSpec& spec, const std::vector<long double>& values);

NamedTensor random_tensor(const TensorSpec& spec, std::mt19937_64& rng, std::vector<long double>& values);

// A model as a network might have it: a weight of `size` elements, a small 2-d tensor of the
// same dtype, a tensor of another floating dtype, and an integer counter that is not averaged.
ModelSpec test_spec(ScalarType dtype, int64_t size);

using Values = std::vector<std::vector<long double>>;  // [tensor][element]

struct Federation {
  ModelSpec spec;
  Model global;
  Values global_values;
  std::vector<Update> updates;    // in arrival order (shuffled)
  std::vector<Values> values;     // [client in device-id order][tensor][element]
  std::vector<int64_t> examples;  // in device-id order
};

Model random_model(const ModelSpec& spec, std::mt19937_64& rng, Values& values);

// `clients` updates of round 1 on model version 0, devices named so that arrival order and
// device-id order differ.
Federation make_federation(const ModelSpec& spec, Model global, Values global_values, size_t clients,
                           uint64_t seed);

Federation make_federation(ScalarType dtype, int64_t size, size_t clients, uint64_t seed);

// The next round's federation, starting from the model a strategy returned.
Federation next_round(const Federation& previous, const Model& result, size_t clients, uint64_t seed);

inline constexpr int64_t kSizes[] = {0, 1, 7, 16389};  // 16389 crosses the library's 16384-element chunks

std::string describe(ScalarType dtype, int64_t size, size_t clients);

// Every floating tensor of `result` against its reference ([tensor][element]); integer tensors
// must be the global model's, shared rather than copied.
void expect_matches(const Model& result, const Federation& federation,
                    const std::vector<std::vector<Tracked>>& want);

bool same_bytes(const Model& a, const Model& b);

// The float64 sums a hub reduce in ascending device order delivers: sum_i n_i x_i, computed here
// term by term in the same order.
WeightedSum float64_sums(const Federation& federation);

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

}  // namespace tn::federated
