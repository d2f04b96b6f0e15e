// Hex text for keys and digests (libsodium's constant-time codecs), as configuration files,
// key ids and command lines carry them.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace tn::server {

std::string to_hex(std::string_view bytes);
// The bytes of exactly `bytes` bytes written as 2 * bytes hex digits, or nothing.
std::optional<std::string> from_hex(std::string_view hex, size_t bytes);

}  // namespace tn::server
