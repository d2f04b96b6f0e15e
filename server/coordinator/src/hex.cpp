#include "server/hex.h"

#include <sodium.h>

namespace tn::server {

std::string to_hex(std::string_view bytes) {
  std::string hex(bytes.size() * 2 + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  hex.pop_back();
  return hex;
}

std::optional<std::string> from_hex(std::string_view hex, size_t bytes) {
  if (hex.size() != bytes * 2) return std::nullopt;
  std::string out(bytes, '\0');
  size_t written = 0;
  const char* end = nullptr;
  if (sodium_hex2bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), hex.data(), hex.size(),
                     nullptr, &written, &end) != 0 ||
      written != bytes || end != hex.data() + hex.size())
    return std::nullopt;
  return out;
}

}  // namespace tn::server
