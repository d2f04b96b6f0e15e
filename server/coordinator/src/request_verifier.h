// Verifies every request before it is served (torchnative/federated/v1/auth.proto): the
// signature, under the right key; the timestamp, within the configured window of now; the
// nonce, never used before by the same key (remembered in the state store, so a replay is
// refused across restarts; written in batches, NonceLedger). Each refusal is UNAUTHENTICATED
// naming the reason, and counted. Device calls can be verified without holding a thread while
// their nonce is written (the callback form), which is how the unary device methods are served.
#pragma once

#include <grpcpp/support/status.h>

#include <chrono>
#include <functional>
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
  // How a verification ends: OK, or the refusal (or error) to answer with. Called exactly once,
  // at once when the request is refused before its nonce is looked at, otherwise on the nonce
  // ledger's thread once the nonce is durable (so it must be short and must not throw).
  using Verified = std::function<void(grpc::Status)>;

  RequestVerifier(GuardedState& state, Metrics& metrics, std::vector<std::string> admin_public_keys,
                  std::chrono::milliseconds timestamp_window);

  // A device call: signed by the key registered for auth.key_id, which names the device.
  void device(std::string_view method, const v1::Auth& auth, std::string_view payload, Verified then) const;
  // Register: signed by the key being registered (proof of possession); key_id must be empty.
  void registration(std::string_view method, const v1::Auth& auth, std::string_view payload,
                    std::string_view public_key, Verified then) const;
  // The same as device(), waiting for the outcome (for methods served on a thread of their own).
  grpc::Status device(std::string_view method, const v1::Auth& auth, std::string_view payload) const;
  // An admin call: key_id is one of the configured administrator keys, in hex. Waits.
  grpc::Status admin(std::string_view method, const v1::Auth& auth, std::string_view payload) const;
  // device() or admin(), then `payload` parsed into `message`: the prologue of every synchronous RPC.
  grpc::Status device_payload(std::string_view method, const v1::Auth& auth, const std::string& payload,
                              google::protobuf::Message& message) const;
  grpc::Status admin_payload(std::string_view method, const v1::Auth& auth, const std::string& payload,
                             google::protobuf::Message& message) const;

  // Forgets nonces too old to be replayed (their timestamp is outside the window anyway).
  void forget_expired_nonces() const;

 private:
  void verify(std::string_view method, const v1::Auth& auth, std::string_view payload,
              std::string_view public_key, std::string signer, Verified then) const;
  grpc::Status refuse(const char* reason, const std::string& message) const;

  GuardedState& state_;
  Metrics& metrics_;
  std::vector<std::string> admin_public_keys_;
  std::chrono::milliseconds window_;
  mutable NonceLedger nonces_;
};

// Waits for a verification (RequestVerifier's callback form) on the calling thread.
grpc::Status await_verification(const std::function<void(RequestVerifier::Verified)>& verification);

int64_t unix_now_ms();

}  // namespace tn::server
