// dtypes: upstream's ScalarType numbering, float16/bfloat16, promotion and casting rules,
// and the switch from a runtime dtype to a compile-time C++ type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"

namespace tn {

// Numbering follows upstream's c10::ScalarType so serialized dtype codes agree.
enum class ScalarType : int8_t {
  Byte = 0,
  Char = 1,
  Short = 2,
  Int = 3,
  Long = 4,
  Half = 5,
  Float = 6,
  Double = 7,
  Bool = 11,
  BFloat16 = 15,
  Undefined = -1,
};

// IEEE binary16, converted with round-to-nearest-even like upstream's c10::Half.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float value);  // NOLINT: implicit like the arithmetic types it stands for
  operator float() const;
};

// bfloat16: the upper half of a float32, rounded to nearest even (NaN kept quiet).
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float value);  // NOLINT
  operator float() const;
};

size_t element_size(ScalarType type);
// Throws NotImplemented naming a complex or quantized dtype (Error for a code that is no dtype).
[[noreturn]] void refuse_unstored_dtype(ScalarType type);
const char* scalar_type_name(ScalarType type);    // "float32", ...
const char* upstream_type_name(ScalarType type);  // "Float", as upstream's kernel errors spell it
const char* cpp_type_name(ScalarType type);       // "float", "long int": how upstream prints a TypeMeta
// Upstream's refusal for a dtype a CPU kernel lacks: "\"kernel\" not implemented for 'Half'".
[[noreturn]] void dtype_not_implemented(const char* kernel, ScalarType type);
bool is_floating(ScalarType type);
bool is_integral(ScalarType type, bool include_bool);
bool is_signed(ScalarType type);
ScalarType promote_types(ScalarType a, ScalarType b);
// Upstream's canCast: no floating -> integral, nothing but bool -> bool.
bool can_cast(ScalarType from, ScalarType to);

template <typename T>
struct TypeTag {
  using type = T;
};

// Dispatch a runtime ScalarType to a compile-time C++ type. The body is a generic
// lambda taking a TypeTag, so `if constexpr` inside it discards per type:
//   TN_DISPATCH_ALL_TYPES(t, "name", [&](auto tag) { using scalar_t = TN_TYPE(tag); ... })
#define TN_TYPE(tag) typename decltype(tag)::type
#define TN_DISPATCH_ALL_TYPES(TYPE, NAME, ...)                 \
  [&] {                                                        \
    switch (TYPE) {                                            \
      case ::tn::ScalarType::Byte:                             \
        return __VA_ARGS__(::tn::TypeTag<uint8_t>{});          \
      case ::tn::ScalarType::Char:                             \
        return __VA_ARGS__(::tn::TypeTag<int8_t>{});           \
      case ::tn::ScalarType::Short:                            \
        return __VA_ARGS__(::tn::TypeTag<int16_t>{});          \
      case ::tn::ScalarType::Int:                              \
        return __VA_ARGS__(::tn::TypeTag<int32_t>{});          \
      case ::tn::ScalarType::Long:                             \
        return __VA_ARGS__(::tn::TypeTag<int64_t>{});          \
      case ::tn::ScalarType::Half:                             \
        return __VA_ARGS__(::tn::TypeTag<::tn::Half>{});       \
      case ::tn::ScalarType::Float:                            \
        return __VA_ARGS__(::tn::TypeTag<float>{});            \
      case ::tn::ScalarType::Double:                           \
        return __VA_ARGS__(::tn::TypeTag<double>{});           \
      case ::tn::ScalarType::Bool:                             \
        return __VA_ARGS__(::tn::TypeTag<bool>{});             \
      case ::tn::ScalarType::BFloat16:                         \
        return __VA_ARGS__(::tn::TypeTag<::tn::BFloat16>{});   \
      default:                                                 \
        ::tn::fail(std::string(NAME) + ": unsupported dtype"); \
    }                                                          \
  }()

}  // namespace tn
