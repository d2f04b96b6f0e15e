// A Python number carried into C++ with its kind.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/scalar_type.h"

namespace tn {

// A Python number carried into C++ with its kind, so promotion can tell 1 from 1.0.
class Scalar {
 public:
  // double to int64 as x86's cvttsd2si, which upstream's compiled casts execute: NaN and values
  // outside int64's range give the lowest int64. A plain C++ cast of those is undefined.
  static int64_t truncate_to_int64(double v) {
    constexpr double two_to_63 = 9223372036854775808.0;
    return v >= -two_to_63 && v < two_to_63 ? int64_t(v) : INT64_MIN;
  }
  enum class Kind : uint8_t { Bool, Int, Float };
  Scalar() : Scalar(int64_t{0}) {}
  Scalar(bool v) : kind_(Kind::Bool), i_(v), d_(v) {}              // NOLINT
  Scalar(int64_t v) : kind_(Kind::Int), i_(v), d_(double(v)) {}    // NOLINT
  Scalar(int v) : Scalar(int64_t{v}) {}                            // NOLINT
  Scalar(double v) : kind_(Kind::Float), i_(0), d_(v) {}  // NOLINT
  Kind kind() const { return kind_; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  int64_t to_int() const { return kind_ == Kind::Float ? truncate_to_int64(d_) : i_; }
  double to_double() const { return d_; }
  // dtype a Python number gets as a "wrapped number" before promotion.
  ScalarType type() const;
  template <typename T>
  T to() const;

 private:
  Kind kind_;
  int64_t i_;
  double d_;
};
template <typename T>
T Scalar::to() const {
  if constexpr (std::is_same_v<T, bool>) {
    return kind_ == Kind::Float ? d_ != 0.0 : i_ != 0;
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T(float(d_));
  } else if constexpr (std::is_floating_point_v<T>) {
    return kind_ == Kind::Float ? T(d_) : T(i_);
  } else {
    // Integral targets wrap like a C++ cast of the int64 value (upstream's behaviour).
    return kind_ == Kind::Float ? T(truncate_to_int64(d_)) : T(i_);
  }
}

}  // namespace tn
