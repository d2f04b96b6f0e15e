#include "request_verifier.h"

#include <algorithm>
#include <future>

#include "proto/signing.h"
#include "rpc_support.h"
#include "server/hex.h"

namespace tn::server {

int64_t unix_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

RequestVerifier::RequestVerifier(GuardedState& state, Metrics& metrics,
                                 std::vector<std::string> admin_public_keys,
                                 std::chrono::milliseconds timestamp_window)
    : state_(state),
      metrics_(metrics),
      admin_public_keys_(std::move(admin_public_keys)),
      window_(timestamp_window),
      nonces_(state) {}

grpc::Status RequestVerifier::refuse(const char* reason, const std::string& message) const {
  metrics_.count_refusal(reason);
  return {grpc::StatusCode::UNAUTHENTICATED, message};
}

void RequestVerifier::verify(std::string_view method, const v1::Auth& auth, std::string_view payload,
                             std::string_view public_key, std::string signer, Verified then) const {
  if (auth.nonce().size() < proto::kMinNonceBytes)
    return then(refuse("short_nonce", "the nonce of " + signer + " is " +
                                          std::to_string(auth.nonce().size()) + " bytes; at least " +
                                          std::to_string(proto::kMinNonceBytes) + " are required"));
  if (!proto::verify_request(method, auth, payload, public_key))
    return then(refuse("bad_signature", "the signature does not verify under the key of " + signer + " for " +
                                            std::string(method)));
  const int64_t now = unix_now_ms();
  const int64_t stamped =
      auth.timestamp_unix_ms() > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(auth.timestamp_unix_ms());
  const int64_t skew = stamped > now ? stamped - now : now - stamped;
  if (skew > window_.count())
    return then(refuse("stale_timestamp", "the request of " + signer + " is timestamped " +
                                              std::to_string(stamped) + " ms, " + std::to_string(skew) +
                                              " ms from the server's clock (window ±" +
                                              std::to_string(window_.count()) + " ms)"));
  try {
    nonces_.record(auth.key_id(), auth.nonce(), stamped,
                   [this, method = std::string(method), signer = std::move(signer), then](
                       bool fresh, std::exception_ptr error) {
                     if (error) {
                       try {
                         std::rethrow_exception(error);
                       } catch (...) {
                         return then(status_from_current_exception(method));
                       }
                     }
                     if (!fresh)
                       return then(refuse("reused_nonce", "the nonce of this request of " + signer +
                                                              " was used before (a replay)"));
                     then(grpc::Status::OK);
                   });
  } catch (...) {  // a nonce or key id the store cannot take, refused before it joined a batch
    then(status_from_current_exception(method));
  }
}

void RequestVerifier::device(std::string_view method, const v1::Auth& auth, std::string_view payload,
                             Verified then) const {
  std::optional<Device> device;
  try {
    device = state_.with([&](StateStore& store) { return store.device(auth.key_id()); });
  } catch (...) {
    return then(status_from_current_exception(method));
  }
  if (!device)
    return then(refuse("unknown_device", "no device is registered under key id '" +
                                             auth.key_id().substr(0, 256) + "'; register first"));
  verify(method, auth, payload, device->public_key, "device " + device->id, std::move(then));
}

grpc::Status RequestVerifier::device(std::string_view method, const v1::Auth& auth,
                                     std::string_view payload) const {
  return await_verification([&](Verified then) { device(method, auth, payload, std::move(then)); });
}

void RequestVerifier::registration(std::string_view method, const v1::Auth& auth, std::string_view payload,
                                   std::string_view public_key, Verified then) const {
  if (!auth.key_id().empty())
    return then(
        refuse("bad_key_id", "Register must carry an empty key id (it is signed by the key it registers)"));
  verify(method, auth, payload, public_key, "the registering key " + to_hex(public_key), std::move(then));
}

grpc::Status RequestVerifier::admin(std::string_view method, const v1::Auth& auth,
                                    std::string_view payload) const {
  std::optional<std::string> key = from_hex(auth.key_id(), proto::kPublicKeyBytes);
  if (!key ||
      std::find(admin_public_keys_.begin(), admin_public_keys_.end(), *key) == admin_public_keys_.end())
    return refuse("unknown_admin_key", "key id '" + auth.key_id().substr(0, 256) +
                                           "' is not a configured administrator key (admin_public_keys)");
  return await_verification([&](Verified then) {
    verify(method, auth, payload, *key, "administrator " + auth.key_id(), std::move(then));
  });
}

grpc::Status await_verification(const std::function<void(RequestVerifier::Verified)>& verification) {
  std::promise<grpc::Status> outcome;
  std::future<grpc::Status> known = outcome.get_future();
  verification([&outcome](grpc::Status status) { outcome.set_value(std::move(status)); });
  return known.get();
}

void RequestVerifier::forget_expired_nonces() const {
  // A request stamped before now - window is refused by its timestamp, so its nonce need not be
  // remembered; one more window of margin covers the clock being stepped back.
  const int64_t horizon = unix_now_ms() - 2 * window_.count();
  state_.with([&](StateStore& store) { return store.prune_nonces(horizon); });
}

grpc::Status RequestVerifier::device_payload(std::string_view method, const v1::Auth& auth,
                                             const std::string& payload,
                                             google::protobuf::Message& message) const {
  if (grpc::Status verified = device(method, auth, payload); !verified.ok()) return verified;
  return parse_payload(payload, message);
}

grpc::Status RequestVerifier::admin_payload(std::string_view method, const v1::Auth& auth,
                                            const std::string& payload,
                                            google::protobuf::Message& message) const {
  if (grpc::Status verified = admin(method, auth, payload); !verified.ok()) return verified;
  return parse_payload(payload, message);
}

}  // namespace tn::server
