// The name of an enumerator from a table in the enum's order: for enums that count up from 0,
// whose values may also arrive from outside (a wire frame, a file) and so be out of range.
#pragma once

#include <cstddef>

namespace tn {

template <typename Enum, size_t N>
const char* enum_name(Enum value, const char* const (&names)[N], const char* unknown) {
  const auto index = static_cast<size_t>(value);
  return index < N ? names[index] : unknown;
}

}  // namespace tn
