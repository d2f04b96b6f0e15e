// Request signatures (torchnative/federated/v1/auth.proto): the canonical bytes a request's
// Ed25519 signature covers, and signing and verifying them. Clients and servers both build the
// signed bytes with signing_bytes(), so they cannot disagree on them.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "torchnative/federated/v1/auth.pb.h"

namespace tn::proto {

namespace v1 = ::torchnative::federated::v1;

inline constexpr size_t kPublicKeyBytes = 32;
inline constexpr size_t kSignatureBytes = 64;
inline constexpr size_t kMinNonceBytes = 16;
// The domain separation prefix, its terminating zero byte included.
inline constexpr std::string_view kRequestSignatureDomain{"torchnative.federated.v1/request\0", 33};

// The bytes a request's signature covers (auth.proto gives the layout): the domain, then
// `method` (the full gRPC path, "/torchnative.federated.v1.DeviceService/CheckIn"), auth's key
// id, timestamp and nonce, and `payload` exactly as carried in the request. auth's signature
// is not part of them.
std::string signing_bytes(std::string_view method, const v1::Auth& auth, std::string_view payload);

// An Ed25519 key pair. The secret never leaves the object and is wiped when it is destroyed.
class SigningKey {
 public:
  static SigningKey generate();
  // The key whose 32-byte seed is stored in `path`, created (mode 0600, written atomically)
  // when the file does not exist. Refuses, naming the file, one of the wrong size or readable
  // by group or others: a leaked seed is a stolen identity.
  static SigningKey load_or_create(const std::string& path);
  SigningKey(const SigningKey&) = delete;
  SigningKey& operator=(const SigningKey&) = delete;
  ~SigningKey();

  // 32 bytes, as RegisterPayload.public_key carries it.
  std::string public_key() const;
  // The 64-byte detached signature of `message`.
  std::string sign(std::string_view message) const;

 private:
  SigningKey();  // a fresh random key pair
  explicit SigningKey(std::string_view seed);
  std::array<unsigned char, kPublicKeyBytes> public_key_;
  std::array<unsigned char, 64> secret_key_;
};

// The Auth for a request to `method` carrying `payload`: key_id, the current time, a fresh
// random nonce of kMinNonceBytes, and the signature over signing_bytes.
v1::Auth sign_request(std::string_view method, std::string_view key_id, std::string_view payload,
                      const SigningKey& key);

// Whether auth carries a nonce of at least kMinNonceBytes and a signature over signing_bytes
// that verifies under `public_key` (32 bytes). Freshness (timestamp window, nonce reuse) is
// left to the caller, which has the clock and the memory of nonces seen.
bool verify_request(std::string_view method, const v1::Auth& auth, std::string_view payload,
                    std::string_view public_key);

}  // namespace tn::proto
