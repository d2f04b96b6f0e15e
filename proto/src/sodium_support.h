#pragma once

#include <sodium.h>

#include <stdexcept>

namespace tn::proto::detail {

// libsodium must be initialized before use (it picks implementations and seeds its RNG);
// sodium_init is thread-safe and idempotent, so calling it before every use is enough.
inline void initialize_sodium() {
  if (sodium_init() < 0) throw std::runtime_error("libsodium failed to initialize");
}

}  // namespace tn::proto::detail
