// Fixed-width big-endian integers, as the canonical encodings (signed request bytes, model
// digest input) spell them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tn::proto::detail {

template <typename Unsigned>
void append_big_endian(std::string& out, Unsigned value) {
  for (int shift = 8 * (sizeof(Unsigned) - 1); shift >= 0; shift -= 8) {
    out.push_back(static_cast<char>((value >> shift) & 0xff));
  }
}

inline void append_u32(std::string& out, uint32_t value) { append_big_endian(out, value); }
inline void append_u64(std::string& out, uint64_t value) { append_big_endian(out, value); }
// Signed values as their two's-complement bit pattern.
inline void append_i32(std::string& out, int32_t value) { append_u32(out, static_cast<uint32_t>(value)); }
inline void append_i64(std::string& out, int64_t value) { append_u64(out, static_cast<uint64_t>(value)); }

// A string preceded by its length, so concatenated fields cannot be confused.
inline void append_u32_prefixed(std::string& out, std::string_view bytes) {
  append_u32(out, static_cast<uint32_t>(bytes.size()));
  out.append(bytes);
}

}  // namespace tn::proto::detail
