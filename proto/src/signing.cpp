#include "proto/signing.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

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

SigningKey::SigningKey(std::string_view seed) {
  detail::initialize_sodium();
  crypto_sign_seed_keypair(public_key_.data(), secret_key_.data(),
                           reinterpret_cast<const unsigned char*>(seed.data()));
}

SigningKey SigningKey::load_or_create(const std::string& path) {
  static_assert(crypto_sign_SEEDBYTES == 32);
  auto fail = [&](const std::string& why) { throw std::runtime_error("key file " + path + ": " + why); };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno != ENOENT) fail(std::strerror(errno));
  if (fd < 0) {
    detail::initialize_sodium();
    unsigned char seed[crypto_sign_SEEDBYTES];
    randombytes_buf(seed, sizeof seed);
    // Written under a temporary name and linked into place, so a crash never leaves a short
    // key file, and two processes creating the same key cannot both win.
    std::string temporary = path + ".tmp." + std::to_string(::getpid());
    int out = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (out < 0) fail(std::string("cannot create: ") + std::strerror(errno));
    bool written = ::write(out, seed, sizeof seed) == ssize_t(sizeof seed) && ::fsync(out) == 0;
    ::close(out);
    bool linked = written && ::link(temporary.c_str(), path.c_str()) == 0;
    int link_error = errno;
    ::unlink(temporary.c_str());
    sodium_memzero(seed, sizeof seed);
    if (!linked && link_error != EEXIST) fail(std::string("cannot write: ") + std::strerror(link_error));
    return load_or_create(path);  // ours, or the one another process linked first
  }
  struct stat info {};
  unsigned char seed[crypto_sign_SEEDBYTES];
  struct Wipe {
    unsigned char* bytes;
    ~Wipe() { sodium_memzero(bytes, crypto_sign_SEEDBYTES); }
  } wipe{seed};
  bool ok = ::fstat(fd, &info) == 0;
  ssize_t got = ok ? ::read(fd, seed, sizeof seed) : -1;
  ::close(fd);
  if (!ok) fail(std::strerror(errno));
  if (info.st_mode & (S_IRWXG | S_IRWXO)) fail("readable by group or others; chmod 600 it");
  if (info.st_size != off_t(sizeof seed) || got != ssize_t(sizeof seed))
    fail("holds " + std::to_string(info.st_size) + " bytes, a key seed is " + std::to_string(sizeof seed));
  return SigningKey(std::string_view(reinterpret_cast<const char*>(seed), sizeof seed));
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
