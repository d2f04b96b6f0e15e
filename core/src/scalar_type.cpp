#include "core/scalar_type.h"

#include <cmath>
#include <cstring>
#include <iterator>

#include "core/scalar.h"

namespace tn {

namespace {

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

// Round-to-nearest-even float32 -> binary16, handling subnormals, overflow and NaN.
Half::Half(float value) {
  uint32_t f = float_bits(value);
  uint32_t sign = (f >> 16) & 0x8000u;
  uint32_t abs = f & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan
    bits = uint16_t(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
    return;
  }
  if (abs >= 0x477ff000u) {  // rounds to >= 65520: overflow to inf
    bits = uint16_t(sign | 0x7c00u);
    return;
  }
  if (abs < 0x38800000u) {                         // result is subnormal or zero: scale by 2^24 and round
    float scaled = bits_float(abs) * 16777216.0f;  // exact: power of two
    // nearbyint honours round-to-nearest-even
    bits = uint16_t(sign | uint32_t(std::nearbyint(scaled)));
    return;
  }
  uint32_t mantissa_odd = (abs >> 13) & 1u;
  abs += 0xc8000fffu + mantissa_odd;  // rebias exponent (-112 << 23) and round
  bits = uint16_t(sign | (abs >> 13));
}

Half::operator float() const {
  uint32_t sign = uint32_t(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {
    float magnitude = float(mantissa) / 16777216.0f;  // mantissa * 2^-24
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return bits_float(sign | 0x7f800000u | (mantissa << 13));
  return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

BFloat16::BFloat16(float value) {
  uint32_t f = float_bits(value);
  if (std::isnan(value)) {
    bits = 0x7fc0;
    return;
  }
  uint32_t rounding_bias = 0x7fffu + ((f >> 16) & 1u);
  bits = uint16_t((f + rounding_bias) >> 16);
}

BFloat16::operator float() const { return bits_float(uint32_t(bits) << 16); }

size_t element_size(ScalarType type) {
  switch (type) {
    case ScalarType::Byte:
    case ScalarType::Char:
    case ScalarType::Bool:
      return 1;
    case ScalarType::Short:
    case ScalarType::Half:
    case ScalarType::BFloat16:
      return 2;
    case ScalarType::Int:
    case ScalarType::Float:
      return 4;
    case ScalarType::Long:
    case ScalarType::Double:
      return 8;
    default:
      refuse_unstored_dtype(type);
  }
}

void refuse_unstored_dtype(ScalarType type) {
  // Upstream's numbering of the dtypes the shim has no storage type for.
  static const char* const names[] = {nullptr, nullptr,  nullptr,     nullptr,     nullptr,      nullptr,
                                      nullptr, nullptr,  "complex32", "complex64", "complex128", nullptr,
                                      "qint8", "quint8", "qint32",    nullptr,     "quint4x2",   "quint2x4"};
  int code = int(type);
  if (code >= 0 && code < int(std::size(names)) && names[code])
    throw NotImplemented(std::string("torchnative does not implement ") + names[code] +
                         " tensors (complex and quantized dtypes are not stored)");
  fail("element_size: undefined dtype");
}

const char* scalar_type_name(ScalarType type) {
  switch (type) {
    case ScalarType::Byte:
      return "uint8";
    case ScalarType::Char:
      return "int8";
    case ScalarType::Short:
      return "int16";
    case ScalarType::Int:
      return "int32";
    case ScalarType::Long:
      return "int64";
    case ScalarType::Half:
      return "float16";
    case ScalarType::Float:
      return "float32";
    case ScalarType::Double:
      return "float64";
    case ScalarType::Bool:
      return "bool";
    case ScalarType::BFloat16:
      return "bfloat16";
    default:
      return "undefined";
  }
}

const char* upstream_type_name(ScalarType type) {
  switch (type) {
    case ScalarType::Byte:
      return "Byte";
    case ScalarType::Char:
      return "Char";
    case ScalarType::Short:
      return "Short";
    case ScalarType::Int:
      return "Int";
    case ScalarType::Long:
      return "Long";
    case ScalarType::Half:
      return "Half";
    case ScalarType::Float:
      return "Float";
    case ScalarType::Double:
      return "Double";
    case ScalarType::Bool:
      return "Bool";
    case ScalarType::BFloat16:
      return "BFloat16";
    default:
      return "Undefined";
  }
}

const char* cpp_type_name(ScalarType type) {
  switch (type) {
    case ScalarType::Byte:
      return "unsigned char";
    case ScalarType::Char:
      return "signed char";
    case ScalarType::Short:
      return "short int";
    case ScalarType::Int:
      return "int";
    case ScalarType::Long:
      return "long int";
    case ScalarType::Half:
      return "c10::Half";
    case ScalarType::Float:
      return "float";
    case ScalarType::Double:
      return "double";
    case ScalarType::Bool:
      return "bool";
    case ScalarType::BFloat16:
      return "c10::BFloat16";
    default:
      return "Undefined";
  }
}

void dtype_not_implemented(const char* kernel, ScalarType type) {
  throw Error(std::string("\"") + kernel + "\" not implemented for '" + upstream_type_name(type) + "'");
}

bool is_floating(ScalarType t) {
  return t == ScalarType::Half || t == ScalarType::Float || t == ScalarType::Double ||
         t == ScalarType::BFloat16;
}

bool is_integral(ScalarType t, bool include_bool) {
  switch (t) {
    case ScalarType::Byte:
    case ScalarType::Char:
    case ScalarType::Short:
    case ScalarType::Int:
    case ScalarType::Long:
      return true;
    case ScalarType::Bool:
      return include_bool;
    default:
      return false;
  }
}

bool is_signed(ScalarType t) { return t != ScalarType::Byte && t != ScalarType::Bool; }

// Upstream's promotion lattice: bool < integers < floats; mixed-sign integers go to the
// smallest signed type holding both; float16 with bfloat16 meets at float32.
ScalarType promote_types(ScalarType a, ScalarType b) {
  using S = ScalarType;
  if (a == b) return a;
  if (a == S::Undefined) return b;
  if (b == S::Undefined) return a;
  if (a == S::Bool) return b;
  if (b == S::Bool) return a;
  bool fa = is_floating(a), fb = is_floating(b);
  if (fa && !fb) return a;
  if (fb && !fa) return b;
  if (fa && fb) {
    if ((a == S::Half && b == S::BFloat16) || (a == S::BFloat16 && b == S::Half)) return S::Float;
    auto rank = [](S t) { return t == S::Double ? 3 : t == S::Float ? 2 : 1; };
    return rank(a) >= rank(b) ? a : b;
  }
  auto rank = [](S t) {
    switch (t) {
      case S::Char:
        return 1;
      case S::Short:
        return 2;
      case S::Int:
        return 3;
      case S::Long:
        return 4;
      default:
        return 0;
    }
  };
  if (a == S::Byte || b == S::Byte) {
    S other = a == S::Byte ? b : a;
    return other == S::Char ? S::Short : other;
  }
  return rank(a) >= rank(b) ? a : b;
}

bool can_cast(ScalarType from, ScalarType to) {
  if (is_floating(from) && is_integral(to, false)) return false;
  if (from != ScalarType::Bool && to == ScalarType::Bool) return false;
  return true;
}

ScalarType Scalar::type() const {
  switch (kind_) {
    case Kind::Bool:
      return ScalarType::Bool;
    case Kind::Int:
      return ScalarType::Long;
    default:
      return ScalarType::Double;
  }
}

}  // namespace tn
