#include "server/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "federated/errors.h"
#include "server/state_errors.h"

namespace tn::server {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian and is written and read as the host lays it out");

namespace {

using OrderedJson = nlohmann::ordered_json;

constexpr std::string_view kMetadataKey = "__metadata__";
constexpr size_t kLengthFieldBytes = 8;

struct DtypeName {
  ScalarType dtype;
  const char* name;
};

constexpr DtypeName kDtypeNames[] = {
    {ScalarType::Float, "F32"},     {ScalarType::Double, "F64"}, {ScalarType::Half, "F16"},
    {ScalarType::BFloat16, "BF16"}, {ScalarType::Long, "I64"},   {ScalarType::Int, "I32"},
    {ScalarType::Short, "I16"},     {ScalarType::Char, "I8"},    {ScalarType::Byte, "U8"},
    {ScalarType::Bool, "BOOL"},
};

void check_utf8(const std::string& text, const std::string& what) {
  try {
    (void)nlohmann::json(text).dump();
  } catch (const nlohmann::json::type_error& error) {
    throw InvalidArgument("safetensors: " + what + " is not valid UTF-8 (" + error.what() + ")");
  }
}

// Rejects a key repeated within one JSON object, which nlohmann would silently collapse: two
// entries for one tensor name must not leave the reader to pick one.
OrderedJson parse_header(std::string_view text, const std::string& name) {
  std::vector<std::set<std::string>> keys_of_open_objects;
  OrderedJson::parser_callback_t refuse_repeated_keys = [&](int, OrderedJson::parse_event_t event,
                                                            OrderedJson& parsed) {
    if (event == OrderedJson::parse_event_t::object_start) keys_of_open_objects.emplace_back();
    if (event == OrderedJson::parse_event_t::object_end) keys_of_open_objects.pop_back();
    if (event == OrderedJson::parse_event_t::key &&
        !keys_of_open_objects.back().insert(parsed.get<std::string>()).second)
      throw CorruptFile(name, "not a valid safetensors file: the header repeats the key " + parsed.dump());
    return true;
  };
  try {
    return OrderedJson::parse(text.begin(), text.end(), refuse_repeated_keys);
  } catch (const OrderedJson::parse_error& error) {
    throw CorruptFile(
        name,
        std::string("not a valid safetensors file: the header is not valid UTF-8 JSON: ") + error.what());
  }
}

}  // namespace

const char* safetensors_dtype_name(ScalarType dtype) {
  for (const DtypeName& entry : kDtypeNames)
    if (entry.dtype == dtype) return entry.name;
  throw InvalidArgument("safetensors: no dtype name for dtype code " + std::to_string(int(dtype)));
}

std::optional<ScalarType> safetensors_dtype(std::string_view name) {
  for (const DtypeName& entry : kDtypeNames)
    if (entry.name == name) return entry.dtype;
  return std::nullopt;
}

std::string safetensors_header(const federated::Model& model, const SafetensorsMetadata& metadata) {
  try {
    (void)model.spec();
  } catch (const federated::Refused& error) {
    throw InvalidArgument(std::string("safetensors: ") + error.what());
  }
  OrderedJson header = OrderedJson::object();
  if (!metadata.empty()) {
    OrderedJson entries = OrderedJson::object();
    for (const auto& [key, value] : metadata) {
      check_utf8(key, "metadata key '" + key + "'");
      check_utf8(value, "the value of metadata key '" + key + "'");
      entries[key] = value;
    }
    header[kMetadataKey] = std::move(entries);
  }
  uint64_t offset = 0;
  for (const federated::NamedTensor& tensor : model.tensors) {
    if (tensor.name == kMetadataKey)
      throw InvalidArgument("safetensors: a tensor may not be named " + std::string(kMetadataKey));
    check_utf8(tensor.name, "tensor name '" + tensor.name + "'");
    const size_t expected = tensor.spec().nbytes();
    if (tensor.nbytes != expected)
      throw InvalidArgument("safetensors: tensor '" + tensor.name + "' has " + std::to_string(tensor.nbytes) +
                            " bytes, its dtype and shape make " + std::to_string(expected));
    if (tensor.nbytes > 0 && !tensor.data)
      throw InvalidArgument("safetensors: tensor '" + tensor.name + "' has no data");
    OrderedJson entry = OrderedJson::object();
    entry["dtype"] = safetensors_dtype_name(tensor.dtype);
    entry["shape"] = tensor.shape;
    entry["data_offsets"] = OrderedJson::array({offset, offset + tensor.nbytes});
    header[tensor.name] = std::move(entry);
    offset += tensor.nbytes;
  }
  std::string text = header.dump();
  // Padding to a multiple of 8, as the reference writer does, keeps the data section aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string bytes(kLengthFieldBytes, '\0');
  for (size_t i = 0; i < kLengthFieldBytes; ++i) bytes[i] = char((uint64_t(text.size()) >> (8 * i)) & 0xff);
  return bytes + text;
}

std::string encode_safetensors(const federated::Model& model, const SafetensorsMetadata& metadata) {
  std::string bytes = safetensors_header(model, metadata);
  for (const federated::NamedTensor& tensor : model.tensors)
    bytes.append(reinterpret_cast<const char*>(tensor.data.get()), tensor.nbytes);
  return bytes;
}

SafetensorsContents decode_safetensors(std::shared_ptr<const std::vector<std::byte>> file,
                                       const std::string& name) {
  auto refuse = [&name](const std::string& problem) {
    return CorruptFile(name, "not a valid safetensors file: " + problem);
  };
  const uint64_t file_size = file->size();
  if (file_size < kLengthFieldBytes)
    throw refuse("it is " + std::to_string(file_size) + " bytes, shorter than the 8-byte header length");
  uint64_t header_size = 0;
  for (size_t i = 0; i < kLengthFieldBytes; ++i) header_size |= uint64_t((*file)[i]) << (8 * i);
  if (header_size > kMaxSafetensorsHeaderBytes)
    throw refuse("the header length " + std::to_string(header_size) + " exceeds the bound of " +
                 std::to_string(kMaxSafetensorsHeaderBytes) + " bytes");
  if (header_size > file_size - kLengthFieldBytes)
    throw refuse("the header length is " + std::to_string(header_size) + " bytes but only " +
                 std::to_string(file_size - kLengthFieldBytes) + " follow (truncated?)");
  const auto* header_start = reinterpret_cast<const char*>(file->data() + kLengthFieldBytes);
  // As the reference reader: a header is a JSON object from its first byte on.
  if (header_size == 0 || header_start[0] != '{') throw refuse("the header does not start with '{'");
  // nlohmann's parser takes a NUL byte for the end of its input, which would let bytes after it
  // pass unread; JSON has no place for a raw NUL anyway.
  if (std::memchr(header_start, 0, header_size)) throw refuse("the header contains a NUL byte");
  const OrderedJson header = parse_header(std::string_view(header_start, header_size), name);

  const uint64_t data_start = kLengthFieldBytes + header_size;
  const uint64_t data_size = file_size - data_start;
  struct Extent {
    uint64_t begin;
    uint64_t end;
    size_t tensor;  // index into contents.model.tensors
  };
  std::vector<Extent> extents;
  SafetensorsContents contents;
  for (const auto& [key, entry] : header.items()) {
    if (key == kMetadataKey) {
      if (!entry.is_object()) throw refuse("__metadata__ is not an object");
      for (const auto& [metadata_key, value] : entry.items()) {
        if (!value.is_string()) throw refuse("metadata '" + metadata_key + "' is not a string");
        contents.metadata[metadata_key] = value.get<std::string>();
      }
      continue;
    }
    const std::string label = "tensor '" + key + "'";
    if (!entry.is_object() || entry.size() != 3 || !entry.contains("dtype") || !entry.contains("shape") ||
        !entry.contains("data_offsets"))
      throw refuse(label + " is not exactly {dtype, shape, data_offsets}: " + entry.dump());
    const OrderedJson& dtype_name = entry["dtype"];
    const std::optional<ScalarType> dtype =
        dtype_name.is_string() ? safetensors_dtype(dtype_name.get<std::string>()) : std::nullopt;
    if (!dtype) throw refuse(label + " has an unknown dtype " + dtype_name.dump());
    const OrderedJson& dimensions = entry["shape"];
    if (!dimensions.is_array()) throw refuse(label + " has a shape that is not an array");
    Shape shape;
    uint64_t byte_count = element_size(*dtype);
    for (const OrderedJson& dimension : dimensions) {
      if (!dimension.is_number_unsigned() ||
          dimension.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
        throw refuse(label + " has an invalid dimension " + dimension.dump());
      shape.push_back(dimension.get<int64_t>());
      if (__builtin_mul_overflow(byte_count, dimension.get<uint64_t>(), &byte_count))
        throw refuse(label + " has a shape " + dimensions.dump() + " whose byte count overflows");
    }
    const OrderedJson& offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned() || offsets[0].get<uint64_t>() > offsets[1].get<uint64_t>())
      throw refuse(label + " has invalid data_offsets " + offsets.dump());
    const uint64_t begin = offsets[0].get<uint64_t>();
    const uint64_t end = offsets[1].get<uint64_t>();
    if (end > data_size)
      throw refuse(label + " ends at data offset " + std::to_string(end) + ", past the " +
                   std::to_string(data_size) + " data bytes in the file (truncated?)");
    if (end - begin != byte_count)
      throw refuse(label + " spans " + std::to_string(end - begin) + " bytes, its dtype " +
                   dtype_name.dump() + " and shape " + dimensions.dump() + " make " +
                   std::to_string(byte_count));
    extents.push_back({begin, end, contents.model.tensors.size()});
    contents.model.tensors.push_back(federated::wrap_tensor(
        key, *dtype, std::move(shape),
        std::shared_ptr<const std::byte>(file, file->data() + data_start + begin), byte_count));
  }
  std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  uint64_t covered = 0;
  for (const Extent& extent : extents) {
    if (extent.begin != covered)
      throw refuse("tensor '" + contents.model.tensors[extent.tensor].name + "' starts at data offset " +
                   std::to_string(extent.begin) + " where " + std::to_string(covered) +
                   " was expected (data ranges overlap or leave a gap)");
    covered = extent.end;
  }
  if (covered != data_size)
    throw refuse("the tensors cover " + std::to_string(covered) + " data bytes, the file has " +
                 std::to_string(data_size));
  try {
    (void)contents.model.spec();
  } catch (const federated::Refused& error) {
    throw refuse(error.what());
  }
  return contents;
}

}  // namespace tn::server
