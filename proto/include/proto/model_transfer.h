// Chunked model transfer: a model (federated::Model, named tensors) leaves as one ModelHeader and a sequence
// of bounded ModelChunks (torchnative/federated/v1/tensor.proto), and is reassembled on the other side with
// every step validated.
//
// Neither side holds a second whole copy of the model: the chunker copies one chunk at a time
// out of the tensors' own memory, and the assembler writes each chunk straight into the
// tensor it belongs to. The assembler trusts nothing it receives: the header is validated
// completely (against the receiver's limits) before anything is allocated, and a tensor's
// memory is allocated only when its first byte arrives, so a lying header costs nothing
// beyond what the limits allow.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "federated/model.h"
#include "torchnative/federated/v1/tensor.pb.h"

namespace tn::proto {

namespace v1 = ::torchnative::federated::v1;

// What one transfer may contain. Both ends should agree; the receiver's copy is what protects
// it from a hostile sender.
struct TransferLimits {
  // gRPC's maximum send and receive message size on the channel.
  size_t max_message_bytes = size_t{4} << 20;
  size_t max_chunk_bytes = size_t{1} << 20;
  size_t max_tensors = size_t{1} << 16;
  size_t max_name_bytes = 1024;
  size_t max_rank = 32;
  uint64_t max_total_bytes = uint64_t{64} << 30;
};

// Room a message keeps for what surrounds the chunk data or the ModelHeader it carries: the
// oneof, sequence and offset around a chunk; the Auth and the other fields of a client
// stream's signed first message around a header. A chunk may carry at most max_message_bytes
// minus this, and a header must fit in as much.
inline constexpr size_t kEnvelopeBytes = 1024;

class TransferError : public std::runtime_error {
 public:
  enum class Refusal {
    EmptyMessage,       // a stream message with neither header nor chunk
    HeaderMissing,      // a chunk, or the end, before any header
    HeaderRepeated,     // a second header
    HeaderTooLarge,     // the header does not fit one message
    TooManyTensors,     // more than max_tensors
    InvalidName,        // empty, longer than max_name_bytes, or a duplicate
    InvalidShape,       // a negative dimension, or rank above max_rank
    UnknownDType,       // a dtype code that is not a tn::ScalarType
    SizeTooLarge,       // a tensor or the total beyond max_total_bytes (or overflowing)
    TableInconsistent,  // offsets or total_bytes disagree with dtype * shape
    InvalidDigest,      // the header's digest is not 32 bytes
    ChunkTooLarge,      // a chunk above max_chunk_bytes
    EmptyChunk,         // a chunk without data
    OutOfOrder,         // a chunk whose sequence number is not the next one
    Gap,                // a chunk starting after where the previous one ended
    Overlap,            // a chunk starting before where the previous one ended
    BeyondTotal,        // data past the header's total_bytes
    Truncated,          // the stream ended before total_bytes arrived
    DigestMismatch,     // the data received does not hash to the header's digest
  };
  TransferError(Refusal refusal, const std::string& message);
  Refusal refusal() const { return refusal_; }

 private:
  Refusal refusal_;
};

// Cuts a model into a header and chunks of at most limits.max_chunk_bytes. The chunks are cut
// from the tensors' data laid end to end, so a chunk may span tensors and a tensor many chunks.
class ModelChunker {
 public:
  // Builds and digests the header (one read pass over the data, no copy). Throws what
  // federated::Model::spec() throws for a malformed model, and TransferError if the model
  // breaks the limits, so a sender never sends what a receiver with the same limits refuses.
  ModelChunker(federated::Model model, std::string version, const TransferLimits& limits = {});

  const v1::ModelHeader& header() const { return header_; }

  // Fills `chunk` with the next slice; false once all data has been given out. For client
  // streams, whose header travels inside their signed first message.
  bool next_chunk(v1::ModelChunk& chunk);

  // The header, then every chunk; false once all has been given out. For server streams.
  bool next(v1::ModelStream& message);

 private:
  federated::Model model_;
  size_t max_chunk_bytes_;
  v1::ModelHeader header_;
  std::vector<uint64_t> tensor_bytes_;
  bool header_given_ = false;
  uint64_t next_sequence_ = 0;
  uint64_t next_offset_ = 0;
  // Where next_offset_ falls: a tensor index and the offset within it.
  size_t tensor_index_ = 0;
  uint64_t offset_in_tensor_ = 0;
};

namespace detail {
class ModelDigest;
}

// Validates a header and chunks as they arrive and reassembles the model. Every refusal throws
// TransferError naming what was wrong; after one, the assembler must be discarded.
class ModelAssembler {
 public:
  // Where the model's bytes go when the receiver converts them as they arrive instead of keeping
  // the model: `bytes` of the header's tensor `tensor` from its byte `offset`, each tensor's in
  // order and back to back (a piece may end inside an element).
  using Sink = std::function<void(size_t tensor, uint64_t offset, std::span<const std::byte> bytes)>;

  // With a sink, no tensor memory is allocated: every chunk's data goes to the sink once checked.
  explicit ModelAssembler(const TransferLimits& limits = {}, Sink sink = {});
  ~ModelAssembler();

  // A message of a server stream: the header, then chunks.
  void accept(const v1::ModelStream& message);
  // For client streams, whose header travels inside their signed first message.
  void accept_header(const v1::ModelHeader& header);
  void accept_chunk(const v1::ModelChunk& chunk);

  // The header accepted; its model_version and blake2b_256 are what a caller compares with
  // what it asked for (RoundConfig, FetchModelVersionPayload).
  const v1::ModelHeader& header() const { return header_; }

  // Once the stream has ended: the model, if every declared byte arrived and the digest
  // matches. Call once; not with a sink.
  federated::Model finish();
  // With a sink, once the stream has ended: refuses what finish() refuses (a truncated stream, a
  // digest mismatch), which the sink's receiver must then discard.
  void finish_streamed();

 private:
  struct Destination {
    uint64_t offset;
    uint64_t size;
    std::shared_ptr<std::byte[]> memory;  // allocated when the tensor's first byte arrives
  };
  void copy_into_tensors(const std::string& data);
  void check_complete();

  Sink sink_;
  TransferLimits limits_;
  bool has_header_ = false;
  v1::ModelHeader header_;
  std::vector<Destination> destinations_;
  std::unique_ptr<detail::ModelDigest> digest_;
  uint64_t next_sequence_ = 0;
  uint64_t received_bytes_ = 0;
  size_t tensor_index_ = 0;
};

}  // namespace tn::proto
