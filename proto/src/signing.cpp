#include "proto/signing.h"

#include <chrono>

#include "big_endian.h"
#include "sodium_support.h"

namespace tn::proto {

static_assert(kPublicKeyBytes == crypto_sign_PUBLICKEYBYTES);
static_assert(kSignatureBytes == crypto_sign_BYTES);

std::string signing_bytes(std::string_view method, const v1::Auth& auth, std::string_view payload) {
  std::string bytes(kRequestSignatureDomain);
  detail::append_u32_prefixed(bytes, method);
  detail::append_u32_prefixed(bytes, auth.key_id());
  detail::append_u64(bytes, auth.timestamp_unix_ms());
  detail::append_u32_prefixed(bytes, auth.nonce());
  // The payload alone may exceed 4 GiB in principle, so its length gets 64 bits.
  detail::append_u64(bytes, payload.size());
  bytes.append(payload);
  return bytes;
}

SigningKey SigningKey::generate() { return SigningKey(); }

SigningKey::SigningKey() {
  static_assert(sizeof(secret_key_) == crypto_sign_SECRETKEYBYTES);
  detail::initialize_sodium();
  crypto_sign_keypair(public_key_.data(), secret_key_.data());
}

SigningKey::~SigningKey() { sodium_memzero(secret_key_.data(), secret_key_.size()); }

std::string SigningKey::public_key() const { return std::string(public_key_.begin(), public_key_.end()); }

std::string SigningKey::sign(std::string_view message) const {
  std::string signature(kSignatureBytes, '\0');
  crypto_sign_detached(reinterpret_cast<unsigned char*>(signature.data()), nullptr,
                       reinterpret_cast<const unsigned char*>(message.data()), message.size(),
                       secret_key_.data());
  return signature;
}

v1::Auth sign_request(std::string_view method, std::string_view key_id, std::string_view payload,
                      const SigningKey& key) {
  detail::initialize_sodium();
  v1::Auth auth;
  auth.set_key_id(std::string(key_id));
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  auth.set_timestamp_unix_ms(
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(now).count()));
  std::string nonce(kMinNonceBytes, '\0');
  randombytes_buf(nonce.data(), nonce.size());
  auth.set_nonce(std::move(nonce));
  auth.set_signature(key.sign(signing_bytes(method, auth, payload)));
  return auth;
}

bool verify_request(std::string_view method, const v1::Auth& auth, std::string_view payload,
                    std::string_view public_key) {
  if (auth.nonce().size() < kMinNonceBytes || auth.signature().size() != kSignatureBytes ||
      public_key.size() != kPublicKeyBytes) {
    return false;
  }
  detail::initialize_sodium();
  const std::string message = signing_bytes(method, auth, payload);
  return crypto_sign_verify_detached(reinterpret_cast<const unsigned char*>(auth.signature().data()),
                                     reinterpret_cast<const unsigned char*>(message.data()), message.size(),
                                     reinterpret_cast<const unsigned char*>(public_key.data())) == 0;
}

}  // namespace tn::proto
