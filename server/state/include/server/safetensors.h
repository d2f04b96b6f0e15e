// The safetensors file format (https://github.com/huggingface/safetensors), which the state
// directory stores models and strategy states in:
//
//   8 bytes   N, the header's length, unsigned little-endian
//   N bytes   a UTF-8 JSON object: {"__metadata__": {string: string}} (optional), then for each
//             tensor  name: {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
//             with offsets relative to the data section; padded with spaces to a multiple of 8
//   the data  each tensor's row-major little-endian bytes
//
// Writing is deterministic, so equal models give identical files (and hashes): compact JSON, the
// metadata first with its keys sorted, the tensors in the model's order with their data laid
// out in that order. Reading accepts any order and restores the model's order from the header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "federated/model.h"

namespace tn::server {

// As safetensors spells them: F32 F64 F16 BF16 I64 I32 I16 I8 U8 BOOL.
const char* safetensors_dtype_name(ScalarType dtype);
std::optional<ScalarType> safetensors_dtype(std::string_view name);

// The largest header read, as the reference implementation bounds it: a lying length field
// cannot make a reader allocate or parse more.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

using SafetensorsMetadata = std::map<std::string, std::string>;

// Everything before the tensor data: length, JSON header, padding. Refuses (InvalidArgument,
// naming the tensor) a model that ModelSpec refuses, a tensor named "__metadata__", one whose
// byte count differs from dtype * shape, and names that are not valid UTF-8.
std::string safetensors_header(const federated::Model& model, const SafetensorsMetadata& metadata = {});

// The whole file: the header, then every tensor's bytes in the model's order.
std::string encode_safetensors(const federated::Model& model, const SafetensorsMetadata& metadata = {});

struct SafetensorsContents {
  federated::Model model;
  SafetensorsMetadata metadata;
};

// Parses and validates `file` completely before returning; the tensors share its memory. Refuses
// (CorruptFile naming `name`) a file shorter than its length field says, a header over the bound,
// JSON that does not parse or is not valid UTF-8, repeated keys, an entry that is not exactly
// {dtype, shape, data_offsets}, an unknown dtype, offsets whose span is not dtype * shape bytes,
// and data ranges that overlap, leave gaps or do not end exactly at the end of the file.
SafetensorsContents decode_safetensors(std::shared_ptr<const std::vector<std::byte>> file,
                                       const std::string& name);

}  // namespace tn::server
