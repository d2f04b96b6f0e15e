// Models as the coordinator sees them: an ordered list of named, contiguous tensors.
//
// Tensor bytes are immutable and shared (shared_ptr), so the global model, the updates that
// reference it, a strategy's state and a checkpoint can all hold the same gigabyte without
// copying it. A buffer received from the network can be wrapped as it is (wrap_tensor).
//
// Which tensors are aggregated: float32, float64, float16 and bfloat16 ones. Integer and bool
// tensors (num_batches_tracked, token counts, masks) are not averaged, since a mean of them
// has no meaning: the aggregate carries the global model's value unchanged. Updates must
// still carry them with the right name, dtype and shape. Any other dtype code is refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"

namespace tn::federated {

using DeviceId = std::string;

// float32, float64, float16, bfloat16: the dtypes strategies compute on.
bool is_aggregated(ScalarType dtype);

struct TensorSpec {
  std::string name;
  ScalarType dtype = ScalarType::Float;
  Shape shape;
  int64_t numel() const;  // -1 when a dimension is negative or the byte count would overflow
  size_t nbytes() const;
  bool operator==(const TensorSpec&) const = default;
};

// What every update must look like. Construction refuses (ParameterRefused) empty or repeated
// names, unknown dtype codes, negative dimensions and sizes that overflow.
class ModelSpec {
 public:
  ModelSpec() = default;
  explicit ModelSpec(std::vector<TensorSpec> tensors);
  const std::vector<TensorSpec>& tensors() const { return tensors_; }
  const TensorSpec* find(std::string_view name) const;
  size_t total_bytes() const;
  bool operator==(const ModelSpec& other) const { return tensors_ == other.tensors_; }

 private:
  std::vector<TensorSpec> tensors_;
  std::unordered_map<std::string, size_t> index_;  // name -> position, for models of many tensors
};

// One tensor: row-major contiguous bytes of `dtype` with `shape`. `nbytes` is the length of
// what `data` points to; it is kept apart from the shape so that a buffer whose length does not
// match its declared shape can be refused instead of read past its end.
struct NamedTensor {
  std::string name;
  ScalarType dtype = ScalarType::Float;
  Shape shape;
  std::shared_ptr<const std::byte> data;
  size_t nbytes = 0;
  int64_t numel() const;
  TensorSpec spec() const { return {name, dtype, shape}; }
};

// A new buffer holding a copy of `bytes`.
NamedTensor copy_tensor(std::string name, ScalarType dtype, Shape shape, std::span<const std::byte> bytes);
// Shares `data` (nbytes long) without copying; whoever owns it stays alive as long as the tensor.
NamedTensor wrap_tensor(std::string name, ScalarType dtype, Shape shape,
                        std::shared_ptr<const std::byte> data, size_t nbytes);

struct Model {
  std::vector<NamedTensor> tensors;
  const NamedTensor* find(std::string_view name) const;
  // Refuses what ModelSpec refuses (so the global model itself is checked when a task starts).
  ModelSpec spec() const;
  size_t total_bytes() const;
};

}  // namespace tn::federated
