#include "model_digest.h"

#include <string_view>

#include "big_endian.h"
#include "sodium_support.h"

namespace tn::proto::detail {

namespace {
constexpr std::string_view kModelDigestDomain{"torchnative.federated.v1/model\0", 31};
}

ModelDigest::ModelDigest(const ::torchnative::federated::v1::ModelHeader& header) {
  initialize_sodium();
  crypto_generichash_init(&state_, nullptr, 0, kDigestBytes);
  // The table is small next to the data: encode it whole, then absorb it.
  std::string table(kModelDigestDomain);
  append_u64(table, static_cast<uint64_t>(header.tensors_size()));
  for (const auto& tensor : header.tensors()) {
    append_u32_prefixed(table, tensor.name());
    append_i32(table, tensor.dtype());
    append_u32(table, static_cast<uint32_t>(tensor.shape_size()));
    for (int64_t dimension : tensor.shape()) append_i64(table, dimension);
  }
  update(table.data(), table.size());
}

void ModelDigest::update(const void* data, size_t size) {
  crypto_generichash_update(&state_, static_cast<const unsigned char*>(data), size);
}

std::string ModelDigest::finish() {
  std::string digest(kDigestBytes, '\0');
  crypto_generichash_final(&state_, reinterpret_cast<unsigned char*>(digest.data()), digest.size());
  return digest;
}

}  // namespace tn::proto::detail
