// A model's content digest (tensor.proto, ModelHeader.blake2b_256): BLAKE2b-256 over a domain
// string, the tensor table and the data, computed incrementally as data streams by.
#pragma once

#include <sodium.h>

#include <cstddef>
#include <string>

#include "torchnative/federated/v1/tensor.pb.h"

namespace tn::proto::detail {

inline constexpr size_t kDigestBytes = 32;

class ModelDigest {
 public:
  // Absorbs the domain string and the table of `header`, which must already be validated.
  explicit ModelDigest(const ::torchnative::federated::v1::ModelHeader& header);
  void update(const void* data, size_t size);
  // The 32-byte digest; call once.
  std::string finish();

 private:
  crypto_generichash_state state_;
};

}  // namespace tn::proto::detail
