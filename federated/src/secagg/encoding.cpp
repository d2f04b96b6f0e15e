// Byte encodings shared by the signed, hashed and encrypted SecAgg+ messages (secagg_internal.h).
#include "secagg_internal.h"

namespace tn::federated::secagg::detail {

void append(std::vector<uint8_t>& out, const void* data, size_t size) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  out.insert(out.end(), bytes, bytes + size);
}

void append_number(std::vector<uint8_t>& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

void append_round(std::vector<uint8_t>& out, std::string_view round_id) {
  append_number(out, round_id.size());
  append(out, round_id.data(), round_id.size());
}

std::optional<uint64_t> read_number(const std::vector<uint8_t>& in, size_t& offset) {
  if (in.size() < 8 || offset > in.size() - 8) return std::nullopt;
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= uint64_t{in[offset + i]} << (8 * i);
  offset += 8;
  return value;
}

}  // namespace tn::federated::secagg::detail
