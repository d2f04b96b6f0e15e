#include "federated/model.h"

#include <cstring>
#include <limits>

#include "federated/errors.h"

namespace tn::federated {
namespace {

bool is_known_dtype(ScalarType dtype) {
  switch (dtype) {
    case ScalarType::Byte:
    case ScalarType::Char:
    case ScalarType::Short:
    case ScalarType::Int:
    case ScalarType::Long:
    case ScalarType::Half:
    case ScalarType::Float:
    case ScalarType::Double:
    case ScalarType::Bool:
    case ScalarType::BFloat16:
      return true;
    default:
      return false;
  }
}

int64_t checked_numel(const Shape& shape) {
  int64_t numel = 1;
  for (int64_t size : shape) {
    if (size < 0) return -1;
    if (size != 0 && numel > std::numeric_limits<int64_t>::max() / 8 / size) return -1;
    numel *= size;
  }
  return numel;
}

}  // namespace

bool is_aggregated(ScalarType dtype) {
  return dtype == ScalarType::Float || dtype == ScalarType::Double || dtype == ScalarType::Half ||
         dtype == ScalarType::BFloat16;
}

int64_t TensorSpec::numel() const { return checked_numel(shape); }

size_t TensorSpec::nbytes() const { return size_t(numel()) * element_size(dtype); }

ModelSpec::ModelSpec(std::vector<TensorSpec> tensors) : tensors_(std::move(tensors)) {
  size_t total = 0;
  for (const TensorSpec& tensor : tensors_) {
    if (tensor.name.empty()) throw ParameterRefused("model: a tensor has an empty name");
    if (!index_.emplace(tensor.name, index_.size()).second)
      throw ParameterRefused("model: tensor '" + tensor.name + "' is listed twice");
    if (!is_known_dtype(tensor.dtype))
      throw ParameterRefused("model: tensor '" + tensor.name + "' has dtype code " +
                             std::to_string(int(tensor.dtype)) +
                             ", which is not supported (uint8, int8, int16, int32, int64, bool, float16, "
                             "bfloat16, float32, float64)");
    if (checked_numel(tensor.shape) < 0)
      throw ParameterRefused("model: tensor '" + tensor.name + "' has shape " + shape_str(tensor.shape) +
                             ", which has a negative dimension or too many elements");
    total += tensor.nbytes();
    if (total > size_t(std::numeric_limits<int64_t>::max()))
      throw ParameterRefused("model: the tensors add up to more bytes than can be addressed");
  }
}

const TensorSpec* ModelSpec::find(std::string_view name) const {
  auto found = index_.find(std::string(name));
  return found == index_.end() ? nullptr : &tensors_[found->second];
}

size_t ModelSpec::total_bytes() const {
  size_t total = 0;
  for (const TensorSpec& tensor : tensors_) total += tensor.nbytes();
  return total;
}

int64_t NamedTensor::numel() const { return checked_numel(shape); }

NamedTensor copy_tensor(std::string name, ScalarType dtype, Shape shape, std::span<const std::byte> bytes) {
  std::shared_ptr<std::byte[]> buffer(new std::byte[bytes.empty() ? 1 : bytes.size()]);
  if (!bytes.empty()) std::memcpy(buffer.get(), bytes.data(), bytes.size());
  std::byte* start = buffer.get();
  return {std::move(name), dtype, std::move(shape),
          std::shared_ptr<const std::byte>(std::move(buffer), start), bytes.size()};
}

NamedTensor wrap_tensor(std::string name, ScalarType dtype, Shape shape,
                        std::shared_ptr<const std::byte> data, size_t nbytes) {
  return {std::move(name), dtype, std::move(shape), std::move(data), nbytes};
}

const NamedTensor* Model::find(std::string_view name) const {
  for (const NamedTensor& tensor : tensors)
    if (tensor.name == name) return &tensor;
  return nullptr;
}

ModelSpec Model::spec() const {
  std::vector<TensorSpec> specs;
  specs.reserve(tensors.size());
  for (const NamedTensor& tensor : tensors) specs.push_back(tensor.spec());
  ModelSpec spec(std::move(specs));
  for (const NamedTensor& tensor : tensors)
    if (tensor.nbytes != tensor.spec().nbytes() || (tensor.nbytes > 0 && !tensor.data))
      throw ParameterRefused("model: tensor '" + tensor.name + "' holds " +
                             std::to_string(tensor.data ? tensor.nbytes : 0) + " bytes, its shape " +
                             shape_str(tensor.shape) + " of " + scalar_type_name(tensor.dtype) + " needs " +
                             std::to_string(tensor.spec().nbytes()));
  return spec;
}

size_t Model::total_bytes() const {
  size_t total = 0;
  for (const NamedTensor& tensor : tensors) total += tensor.nbytes;
  return total;
}

}  // namespace tn::federated
