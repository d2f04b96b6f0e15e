// Verifies every request before it is served (torchnative/federated/v1/auth.proto): the
// signature, under the right key; the timestamp, within the configured window of now; the
// nonce, never used before by the same key (remembered in the state store, so a replay is
// refused across restarts; written in batches, NonceLedger). Each refusal is UNAUTHENTICATED naming the
// reason, and counted.
#pragma once

#include <grpcpp/support/status.h>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "guarded_state.h"
#include "metrics.h"
#include "nonce_ledger.h"
#include "torchnative/federated/v1/auth.pb.h"

namespace tn::server {

namespace v1 = ::torchnative::federated::v1;

class RequestVerifier {
 public:
  RequestVerifier(GuardedState& state, Metrics& metrics, std::vector<std::string> admin_public_keys,
                  std::chrono::milliseconds timestamp_window);

  // A device call: signed by the key registered for auth.key_id, which names the device.
  grpc::Status device(std::string_view method, const v1::Auth& auth, std::string_view payload) const;
  // Register: signed by the key being registered (proof of possession); key_id must be empty.
  grpc::Status registration(std::string_view method, const v1::Auth& auth, std::string_view payload,
                            std::string_view public_key) const;
  // An admin call: key_id is one of the configured administrator keys, in hex.
  grpc::Status admin(std::string_view method, const v1::Auth& auth, std::string_view payload) const;

  // Forgets nonces too old to be replayed (their timestamp is outside the window anyway).
  void forget_expired_nonces() const;

 private:
  grpc::Status verify(std::string_view method, const v1::Auth& auth, std::string_view payload,
                      std::string_view public_key, const std::string& signer) const;
  grpc::Status refuse(const char* reason, const std::string& message) const;

  GuardedState& state_;
  Metrics& metrics_;
  std::vector<std::string> admin_public_keys_;
  std::chrono::milliseconds window_;
  mutable NonceLedger nonces_;
};

int64_t unix_now_ms();

}  // namespace tn::server
