#include "proto/model_transfer.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "core/enum_name.h"
#include "model_digest.h"

namespace tn::proto {

namespace {

using Refusal = TransferError::Refusal;

// The wire's dtype codes are tn::ScalarType's, so a code converts by value.
static_assert(v1::DTYPE_UINT8 == static_cast<int>(ScalarType::Byte));
static_assert(v1::DTYPE_INT8 == static_cast<int>(ScalarType::Char));
static_assert(v1::DTYPE_INT16 == static_cast<int>(ScalarType::Short));
static_assert(v1::DTYPE_INT32 == static_cast<int>(ScalarType::Int));
static_assert(v1::DTYPE_INT64 == static_cast<int>(ScalarType::Long));
static_assert(v1::DTYPE_FLOAT16 == static_cast<int>(ScalarType::Half));
static_assert(v1::DTYPE_FLOAT32 == static_cast<int>(ScalarType::Float));
static_assert(v1::DTYPE_FLOAT64 == static_cast<int>(ScalarType::Double));
static_assert(v1::DTYPE_BOOL == static_cast<int>(ScalarType::Bool));
static_assert(v1::DTYPE_BFLOAT16 == static_cast<int>(ScalarType::BFloat16));

const char* refusal_name(Refusal refusal) {
  // In the enum's order.
  static constexpr const char* kNames[] = {"empty message",
                                           "header missing",
                                           "header repeated",
                                           "header too large",
                                           "too many tensors",
                                           "invalid tensor name",
                                           "invalid shape",
                                           "unknown dtype",
                                           "size too large",
                                           "tensor table inconsistent",
                                           "invalid digest",
                                           "chunk too large",
                                           "empty chunk",
                                           "chunk out of order",
                                           "gap",
                                           "overlap",
                                           "beyond declared total",
                                           "truncated",
                                           "digest mismatch"};
  static_assert(std::size(kNames) == static_cast<size_t>(TransferError::Refusal::DigestMismatch) + 1);
  return enum_name(refusal, kNames, "unknown refusal");
}

[[noreturn]] void refuse(Refusal refusal, const std::string& detail) { throw TransferError(refusal, detail); }

std::string quoted(const std::string& name) { return "'" + name + "'"; }

void check_limits_are_usable(const TransferLimits& limits) {
  if (limits.max_chunk_bytes == 0 || limits.max_message_bytes < kEnvelopeBytes ||
      limits.max_chunk_bytes > limits.max_message_bytes - kEnvelopeBytes) {
    throw std::invalid_argument("transfer limits: max_chunk_bytes (" +
                                std::to_string(limits.max_chunk_bytes) + ") must be positive and leave " +
                                std::to_string(kEnvelopeBytes) + " bytes of max_message_bytes (" +
                                std::to_string(limits.max_message_bytes) + ") for the envelope");
  }
}

// Validates everything a header claims before anything is allocated for it, and returns each
// tensor's size in bytes.
std::vector<uint64_t> validate_header(const v1::ModelHeader& header, const TransferLimits& limits) {
  const size_t header_bytes = header.ByteSizeLong();
  if (header_bytes > limits.max_message_bytes - kEnvelopeBytes) {
    refuse(Refusal::HeaderTooLarge,
           "the header takes " + std::to_string(header_bytes) + " bytes, more than the " +
               std::to_string(limits.max_message_bytes - kEnvelopeBytes) + " a message has room for");
  }
  const size_t tensor_count = static_cast<size_t>(header.tensors_size());
  if (tensor_count > limits.max_tensors) {
    refuse(Refusal::TooManyTensors, "the header lists " + std::to_string(tensor_count) +
                                        " tensors, the limit is " + std::to_string(limits.max_tensors));
  }
  if (header.blake2b_256().size() != detail::kDigestBytes) {
    refuse(Refusal::InvalidDigest, "the header's digest has " + std::to_string(header.blake2b_256().size()) +
                                       " bytes, a BLAKE2b-256 digest has " +
                                       std::to_string(detail::kDigestBytes));
  }
  if (header.total_bytes() > limits.max_total_bytes) {
    refuse(Refusal::SizeTooLarge, "the header declares " + std::to_string(header.total_bytes()) +
                                      " bytes in all, the limit is " +
                                      std::to_string(limits.max_total_bytes));
  }

  std::vector<uint64_t> tensor_bytes;
  tensor_bytes.reserve(tensor_count);
  std::unordered_set<std::string_view> names;
  uint64_t expected_offset = 0;
  for (const v1::TensorEntry& tensor : header.tensors()) {
    const std::string& name = tensor.name();
    if (name.empty() || name.size() > limits.max_name_bytes) {
      refuse(Refusal::InvalidName, "a tensor name has " + std::to_string(name.size()) +
                                       " bytes, names need 1 to " + std::to_string(limits.max_name_bytes));
    }
    if (!names.insert(name).second)
      refuse(Refusal::InvalidName, "tensor " + quoted(name) + " is listed twice");
    if (!v1::DType_IsValid(tensor.dtype())) {
      refuse(Refusal::UnknownDType, "tensor " + quoted(name) + " has dtype code " +
                                        std::to_string(tensor.dtype()) + ", not a known dtype");
    }
    if (static_cast<size_t>(tensor.shape_size()) > limits.max_rank) {
      refuse(Refusal::InvalidShape, "tensor " + quoted(name) + " has " + std::to_string(tensor.shape_size()) +
                                        " dimensions, the limit is " + std::to_string(limits.max_rank));
    }
    uint64_t bytes = element_size(static_cast<ScalarType>(tensor.dtype()));
    for (int64_t dimension : tensor.shape()) {
      if (dimension < 0) {
        refuse(Refusal::InvalidShape,
               "tensor " + quoted(name) + " has the negative dimension " + std::to_string(dimension));
      }
      if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(dimension), &bytes) ||
          bytes > limits.max_total_bytes) {
        refuse(Refusal::SizeTooLarge, "tensor " + quoted(name) +
                                          ": dtype and shape make more than the limit of " +
                                          std::to_string(limits.max_total_bytes) + " bytes");
      }
    }
    if (tensor.offset() != expected_offset) {
      refuse(Refusal::TableInconsistent, "tensor " + quoted(name) + " starts at byte " +
                                             std::to_string(tensor.offset()) +
                                             ", but the tensors before it (dtype x shape) end at byte " +
                                             std::to_string(expected_offset));
    }
    if (__builtin_add_overflow(expected_offset, bytes, &expected_offset) ||
        expected_offset > limits.max_total_bytes) {
      refuse(Refusal::SizeTooLarge, "the tensors up to " + quoted(name) + " take more than the limit of " +
                                        std::to_string(limits.max_total_bytes) + " bytes");
    }
    tensor_bytes.push_back(bytes);
  }
  if (header.total_bytes() != expected_offset) {
    refuse(Refusal::TableInconsistent, "the header declares " + std::to_string(header.total_bytes()) +
                                           " bytes in all, but its tensors (dtype x shape) take " +
                                           std::to_string(expected_offset));
  }
  return tensor_bytes;
}

}  // namespace

TransferError::TransferError(Refusal refusal, const std::string& message)
    : std::runtime_error(std::string("model transfer refused (") + refusal_name(refusal) + "): " + message),
      refusal_(refusal) {}

ModelChunker::ModelChunker(federated::Model model, std::string version, const TransferLimits& limits)
    : model_(std::move(model)), max_chunk_bytes_(limits.max_chunk_bytes) {
  check_limits_are_usable(limits);
  model_.spec();  // refuses names, dtypes, shapes and byte counts that do not add up
  header_.set_model_version(std::move(version));
  for (const federated::NamedTensor& tensor : model_.tensors) {
    v1::TensorEntry& entry = *header_.add_tensors();
    entry.set_name(tensor.name);
    entry.set_dtype(static_cast<v1::DType>(tensor.dtype));
    entry.mutable_shape()->Add(tensor.shape.begin(), tensor.shape.end());
    entry.set_offset(next_offset_);
    next_offset_ += tensor.nbytes;
  }
  header_.set_total_bytes(next_offset_);
  next_offset_ = 0;
  // A placeholder of the right length, so the header is validated (and sized) as it will be sent.
  header_.set_blake2b_256(std::string(detail::kDigestBytes, '\0'));
  tensor_bytes_ = validate_header(header_, limits);

  detail::ModelDigest digest(header_);
  for (const federated::NamedTensor& tensor : model_.tensors) {
    if (tensor.nbytes > 0) digest.update(tensor.data.get(), tensor.nbytes);
  }
  header_.set_blake2b_256(digest.finish());
}

bool ModelChunker::next_chunk(v1::ModelChunk& chunk) {
  const uint64_t remaining = header_.total_bytes() - next_offset_;
  if (remaining == 0) return false;
  const size_t size = static_cast<size_t>(std::min<uint64_t>(max_chunk_bytes_, remaining));
  chunk.set_sequence(next_sequence_++);
  chunk.set_offset(next_offset_);
  std::string& data = *chunk.mutable_data();
  data.resize(size);
  size_t filled = 0;
  while (filled < size) {
    const uint64_t tensor_size = tensor_bytes_[tensor_index_];
    const size_t take =
        static_cast<size_t>(std::min<uint64_t>(size - filled, tensor_size - offset_in_tensor_));
    if (take > 0) {
      std::memcpy(data.data() + filled, model_.tensors[tensor_index_].data.get() + offset_in_tensor_, take);
      filled += take;
      offset_in_tensor_ += take;
    }
    if (offset_in_tensor_ == tensor_size) {
      ++tensor_index_;
      offset_in_tensor_ = 0;
    }
  }
  next_offset_ += size;
  return true;
}

bool ModelChunker::next(v1::ModelStream& message) {
  if (!header_given_) {
    *message.mutable_header() = header_;
    header_given_ = true;
    return true;
  }
  return next_chunk(*message.mutable_chunk());
}

ModelAssembler::ModelAssembler(const TransferLimits& limits, Sink sink)
    : sink_(std::move(sink)), limits_(limits) {
  check_limits_are_usable(limits);
}

ModelAssembler::~ModelAssembler() = default;

void ModelAssembler::accept(const v1::ModelStream& message) {
  switch (message.part_case()) {
    case v1::ModelStream::kHeader:
      accept_header(message.header());
      return;
    case v1::ModelStream::kChunk:
      accept_chunk(message.chunk());
      return;
    case v1::ModelStream::PART_NOT_SET:
      break;
  }
  refuse(Refusal::EmptyMessage, "a stream message carries neither a header nor a chunk");
}

void ModelAssembler::accept_header(const v1::ModelHeader& header) {
  if (has_header_) refuse(Refusal::HeaderRepeated, "a second header arrived");
  const std::vector<uint64_t> tensor_bytes = validate_header(header, limits_);
  header_ = header;
  has_header_ = true;
  destinations_.reserve(tensor_bytes.size());
  for (int i = 0; i < header_.tensors_size(); ++i) {
    destinations_.push_back({header_.tensors(i).offset(), tensor_bytes[static_cast<size_t>(i)], nullptr});
  }
  digest_ = std::make_unique<detail::ModelDigest>(header_);
}

void ModelAssembler::accept_chunk(const v1::ModelChunk& chunk) {
  const std::string sequence = std::to_string(chunk.sequence());
  if (!has_header_) refuse(Refusal::HeaderMissing, "chunk " + sequence + " arrived before the header");
  const std::string& data = chunk.data();
  if (data.size() > limits_.max_chunk_bytes) {
    refuse(Refusal::ChunkTooLarge, "chunk " + sequence + " carries " + std::to_string(data.size()) +
                                       " bytes, the limit is " + std::to_string(limits_.max_chunk_bytes));
  }
  if (data.empty()) refuse(Refusal::EmptyChunk, "chunk " + sequence + " carries no data");
  if (chunk.sequence() != next_sequence_) {
    refuse(Refusal::OutOfOrder,
           "chunk " + sequence + " arrived where chunk " + std::to_string(next_sequence_) + " was expected");
  }
  if (chunk.offset() > received_bytes_) {
    refuse(Refusal::Gap, "chunk " + sequence + " starts at byte " + std::to_string(chunk.offset()) +
                             ", but bytes " + std::to_string(received_bytes_) + " to " +
                             std::to_string(chunk.offset() - 1) + " never arrived");
  }
  if (chunk.offset() < received_bytes_) {
    refuse(Refusal::Overlap, "chunk " + sequence + " starts at byte " + std::to_string(chunk.offset()) +
                                 ", inside the " + std::to_string(received_bytes_) +
                                 " bytes already received");
  }
  if (data.size() > header_.total_bytes() - received_bytes_) {
    refuse(Refusal::BeyondTotal,
           "chunk " + sequence + " ends at byte " + std::to_string(received_bytes_ + data.size()) +
               ", past the declared total of " + std::to_string(header_.total_bytes()) + " bytes");
  }
  digest_->update(data.data(), data.size());
  copy_into_tensors(data);
  ++next_sequence_;
}

void ModelAssembler::copy_into_tensors(const std::string& data) {
  size_t copied = 0;
  while (copied < data.size()) {
    Destination& destination = destinations_[tensor_index_];
    const uint64_t offset_in_tensor = received_bytes_ - destination.offset;
    const size_t take =
        static_cast<size_t>(std::min<uint64_t>(data.size() - copied, destination.size - offset_in_tensor));
    if (take > 0) {
      if (sink_) {
        sink_(tensor_index_, offset_in_tensor, std::as_bytes(std::span(data.data() + copied, take)));
      } else {
        // Allocated as late as possible, and not zeroed: pages the data never reaches cost nothing.
        if (!destination.memory) destination.memory.reset(new std::byte[destination.size]);
        std::memcpy(destination.memory.get() + offset_in_tensor, data.data() + copied, take);
      }
      copied += take;
      received_bytes_ += take;
    }
    if (received_bytes_ == destination.offset + destination.size) ++tensor_index_;
  }
}

void ModelAssembler::check_complete() {
  if (!has_header_) refuse(Refusal::HeaderMissing, "the stream ended before the header");
  if (received_bytes_ < header_.total_bytes()) {
    refuse(Refusal::Truncated, "the stream ended after " + std::to_string(received_bytes_) + " of " +
                                   std::to_string(header_.total_bytes()) + " bytes");
  }
  if (digest_->finish() != header_.blake2b_256()) {
    refuse(Refusal::DigestMismatch, "the data and tensor table received do not hash to the header's digest");
  }
}

void ModelAssembler::finish_streamed() {
  if (!sink_) throw std::logic_error("ModelAssembler::finish_streamed: the assembler has no sink");
  check_complete();
}

federated::Model ModelAssembler::finish() {
  if (sink_) throw std::logic_error("ModelAssembler::finish: the model went to the sink");
  check_complete();
  federated::Model model;
  model.tensors.reserve(destinations_.size());
  for (int i = 0; i < header_.tensors_size(); ++i) {
    const v1::TensorEntry& entry = header_.tensors(i);
    Destination& destination = destinations_[static_cast<size_t>(i)];
    const std::byte* bytes = destination.memory.get();
    model.tensors.push_back(federated::wrap_tensor(
        entry.name(), static_cast<ScalarType>(entry.dtype()),
        Shape(entry.shape().begin(), entry.shape().end()),
        std::shared_ptr<const std::byte>(std::move(destination.memory), bytes), destination.size));
  }
  return model;
}

}  // namespace tn::proto
