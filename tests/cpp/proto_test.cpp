// proto/: chunked model transfer (round trips, and every refusal of a bad stream), request
// signing, the protocol version check, and a model fetched through a real gRPC server whose
// message size limit is far below the model's size.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "federated/contribution.h"
#include "federated/errors.h"
#include "federated/validation.h"
#include "proto/model_transfer.h"
#include "proto/protocol.h"
#include "proto/signing.h"
#include "test_support.h"
#include "torchnative/federated/v1/device.grpc.pb.h"

namespace tn::proto {
namespace {

using federated::Model;
using federated::NamedTensor;
using tn::test::expect_same_model;
using Refusal = TransferError::Refusal;

// Pseudo-random bytes from `seed`, so a lost, repeated or misplaced byte changes the result.
NamedTensor make_tensor(const std::string& name, ScalarType dtype, const Shape& shape, uint32_t seed) {
  size_t bytes = element_size(dtype);
  for (int64_t dimension : shape) bytes *= static_cast<size_t>(dimension);
  std::vector<std::byte> contents(bytes);
  std::mt19937 random(seed);
  for (std::byte& byte : contents) byte = static_cast<std::byte>(random());
  return federated::copy_tensor(name, dtype, shape, contents);
}

// Limits with a small chunk size, so small models take many chunks.
TransferLimits small_chunks(size_t chunk_bytes) {
  TransferLimits limits;
  limits.max_chunk_bytes = chunk_bytes;
  return limits;
}

// Every message a chunker gives out for `model`, header first.
std::vector<v1::ModelStream> stream_of(const Model& model, const TransferLimits& limits,
                                       const std::string& version = "v1") {
  ModelChunker chunker(model, version, limits);
  std::vector<v1::ModelStream> messages;
  v1::ModelStream message;
  while (chunker.next(message)) messages.push_back(message);
  return messages;
}

Model assemble(const std::vector<v1::ModelStream>& messages, const TransferLimits& limits) {
  ModelAssembler assembler(limits);
  for (const v1::ModelStream& message : messages) assembler.accept(message);
  return assembler.finish();
}

// Runs `body`, which must throw a TransferError for `expected` whose message contains `words`.
void expect_refusal(Refusal expected, const std::string& words, const std::function<void()>& body) {
  try {
    body();
  } catch (const TransferError& error) {
    EXPECT_EQ(error.refusal(), expected) << error.what();
    EXPECT_NE(std::string(error.what()).find(words), std::string::npos) << error.what();
    return;
  }
  ADD_FAILURE() << "nothing was refused; expected a refusal saying: " << words;
}

// A model of 640 bytes whose stream, in 64-byte chunks, is a header and 10 chunks, with a
// tensor boundary inside a chunk.
Model three_tensors() {
  return {{make_tensor("weight", ScalarType::Float, {10, 5}, 1),
           make_tensor("bias", ScalarType::Float, {10}, 2), make_tensor("steps", ScalarType::Long, {50}, 3)}};
}
constexpr size_t kThreeTensorsChunk = 64;

std::vector<v1::ModelStream> three_tensor_stream() {
  return stream_of(three_tensors(), small_chunks(kThreeTensorsChunk));
}

// Feeds `messages` to an assembler with `limits` and finishes it.
std::function<void()> feeding(std::vector<v1::ModelStream> messages,
                              const TransferLimits& limits = small_chunks(kThreeTensorsChunk)) {
  return [messages = std::move(messages), limits] { assemble(messages, limits); };
}

TEST(ModelTransfer, EmptyModelIsAHeaderAlone) {
  const Model model;
  const std::vector<v1::ModelStream> messages = stream_of(model, {});
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0].header().total_bytes(), 0u);
  expect_same_model(model, assemble(messages, {}));
}

TEST(ModelTransfer, TheVersionAndDigestTravelInTheHeader) {
  const std::vector<v1::ModelStream> messages = stream_of(three_tensors(), {}, "round-7");
  ModelAssembler assembler;
  for (const v1::ModelStream& message : messages) assembler.accept(message);
  assembler.finish();
  EXPECT_EQ(assembler.header().model_version(), "round-7");
  EXPECT_EQ(assembler.header().blake2b_256(), ModelChunker(three_tensors(), "other").header().blake2b_256());
}

TEST(ModelTransfer, OneTensorInOneChunk) {
  const Model model{{make_tensor("w", ScalarType::Float, {3, 4}, 7)}};
  const std::vector<v1::ModelStream> messages = stream_of(model, {});
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[1].chunk().data().size(), 48u);
  expect_same_model(model, assemble(messages, {}));
}

TEST(ModelTransfer, ManyTensorsOfEveryDTypeAcrossChunkBoundaries) {
  const ScalarType dtypes[] = {ScalarType::Byte, ScalarType::Char,    ScalarType::Short, ScalarType::Int,
                               ScalarType::Long, ScalarType::Half,    ScalarType::Float, ScalarType::Double,
                               ScalarType::Bool, ScalarType::BFloat16};
  const Shape shapes[] = {{}, {1}, {7}, {3, 5}, {0, 4}, {2, 3, 4}, {31}, {1, 1, 1, 9}};
  Model model;
  for (uint32_t i = 0; i < 40; ++i) {
    model.tensors.push_back(make_tensor("t" + std::to_string(i), dtypes[i % 10], shapes[i % 8], i));
  }
  // A prime chunk size, so chunk boundaries fall at every position inside tensors.
  constexpr size_t kChunk = 97;
  const std::vector<v1::ModelStream> messages = stream_of(model, small_chunks(kChunk));
  const v1::ModelHeader& header = messages[0].header();
  const uint64_t total = header.total_bytes();
  ASSERT_GT(total, 10 * kChunk);
  EXPECT_EQ(messages.size() - 1, (total + kChunk - 1) / kChunk);

  size_t chunks_spanning_tensors = 0;
  for (size_t i = 1; i < messages.size(); ++i) {
    const v1::ModelChunk& chunk = messages[i].chunk();
    EXPECT_LE(chunk.data().size(), kChunk);
    const uint64_t end = chunk.offset() + chunk.data().size();
    chunks_spanning_tensors += std::any_of(
        header.tensors().begin(), header.tensors().end(),
        [&](const auto& tensor) { return tensor.offset() > chunk.offset() && tensor.offset() < end; });
  }
  EXPECT_GT(chunks_spanning_tensors, 10u);
  expect_same_model(model, assemble(messages, small_chunks(kChunk)));
}

TEST(ModelTransfer, OneTensorSpanningManyChunks) {
  const Model model{{make_tensor("embedding", ScalarType::Double, {300, 100}, 11)}};
  const std::vector<v1::ModelStream> messages = stream_of(model, small_chunks(4096));
  EXPECT_EQ(messages.size(), 1u + (240000 + 4095) / 4096);
  expect_same_model(model, assemble(messages, small_chunks(4096)));
}

TEST(ModelTransfer, HeaderAndChunksSeparatelyAsClientStreamsSendThem) {
  const Model model = three_tensors();
  ModelChunker chunker(model, "v1", small_chunks(kThreeTensorsChunk));
  ModelAssembler assembler(small_chunks(kThreeTensorsChunk));
  assembler.accept_header(chunker.header());
  v1::ModelChunk chunk;
  size_t chunks = 0;
  while (chunker.next_chunk(chunk)) {
    assembler.accept_chunk(chunk);
    ++chunks;
  }
  EXPECT_EQ(chunks, 10u);
  expect_same_model(model, assembler.finish());
}

TEST(ModelTransfer, DigestCoversNamesShapesAndData) {
  const NamedTensor tensor = make_tensor("w", ScalarType::Float, {2, 3}, 5);
  const auto digest_of = [](const NamedTensor& only) {
    return ModelChunker(Model{{only}}, "v1").header().blake2b_256();
  };
  const std::string digest = digest_of(tensor);
  EXPECT_EQ(digest.size(), 32u);
  EXPECT_EQ(digest, digest_of(tensor));

  NamedTensor renamed = tensor;
  renamed.name = "v";
  EXPECT_NE(digest, digest_of(renamed));
  NamedTensor reshaped = tensor;
  reshaped.shape = {3, 2};
  EXPECT_NE(digest, digest_of(reshaped));
  NamedTensor retyped = tensor;  // as many bytes, another meaning
  retyped.dtype = ScalarType::Int;
  EXPECT_NE(digest, digest_of(retyped));
  EXPECT_NE(digest, digest_of(make_tensor("w", ScalarType::Float, {2, 3}, 6)));
}

TEST(ModelTransfer, ChunkerRefusesMalformedModelsAndUnusableLimits) {
  const NamedTensor weight = make_tensor("w", ScalarType::Float, {2}, 1);
  EXPECT_THROW(ModelChunker(Model{{weight, weight}}, "v1"), federated::ParameterRefused);
  NamedTensor short_of_bytes = weight;
  short_of_bytes.nbytes = 4;
  EXPECT_THROW(ModelChunker(Model{{short_of_bytes}}, "v1"), federated::ParameterRefused);

  TransferLimits few_tensors;
  few_tensors.max_tensors = 2;
  expect_refusal(Refusal::TooManyTensors, "lists 3 tensors",
                 [&] { ModelChunker(three_tensors(), "v1", few_tensors); });

  TransferLimits no_room_for_envelope;
  no_room_for_envelope.max_chunk_bytes = no_room_for_envelope.max_message_bytes;
  EXPECT_THROW(ModelChunker(three_tensors(), "v1", no_room_for_envelope), std::invalid_argument);
  EXPECT_THROW(ModelAssembler{no_room_for_envelope}, std::invalid_argument);
}

// Each refusal, from an otherwise valid stream of three_tensors().

TEST(ModelAssemblerRefuses, AMessageWithNeitherHeaderNorChunk) {
  std::vector<v1::ModelStream> messages = three_tensor_stream();
  messages.insert(messages.begin() + 2, v1::ModelStream());
  expect_refusal(Refusal::EmptyMessage, "neither a header nor a chunk", feeding(messages));
}

TEST(ModelAssemblerRefuses, AChunkBeforeTheHeaderAndAStreamWithoutHeader) {
  std::vector<v1::ModelStream> messages = three_tensor_stream();
  expect_refusal(Refusal::HeaderMissing, "chunk 0 arrived before the header",
                 feeding({messages.begin() + 1, messages.end()}));
  expect_refusal(Refusal::HeaderMissing, "ended before the header", feeding({}));
}

TEST(ModelAssemblerRefuses, ASecondHeader) {
  std::vector<v1::ModelStream> messages = three_tensor_stream();
  messages.insert(messages.begin() + 3, messages[0]);
  expect_refusal(Refusal::HeaderRepeated, "second header", feeding(messages));
}

TEST(ModelAssemblerRefuses, AHeaderLargerThanAMessage) {
  Model model;
  for (uint32_t i = 0; i < 40; ++i) {
    model.tensors.push_back(
        make_tensor("a_rather_long_tensor_name_" + std::to_string(i), ScalarType::Byte, {1}, i));
  }
  TransferLimits receiver = small_chunks(kThreeTensorsChunk);
  receiver.max_message_bytes = kEnvelopeBytes + 1000;
  ASSERT_GT(stream_of(model, {})[0].header().ByteSizeLong(), 1000u);
  expect_refusal(Refusal::HeaderTooLarge, "more than the 1000 a message has room for",
                 feeding(stream_of(model, {}), receiver));
}

TEST(ModelAssemblerRefuses, MoreTensorsThanTheLimit) {
  TransferLimits receiver = small_chunks(kThreeTensorsChunk);
  receiver.max_tensors = 2;
  expect_refusal(Refusal::TooManyTensors, "lists 3 tensors, the limit is 2",
                 feeding(three_tensor_stream(), receiver));
}

TEST(ModelAssemblerRefuses, EmptyOverlongAndDuplicateNames) {
  std::vector<v1::ModelStream> empty_name = three_tensor_stream();
  empty_name[0].mutable_header()->mutable_tensors(1)->clear_name();
  expect_refusal(Refusal::InvalidName, "has 0 bytes", feeding(empty_name));

  TransferLimits receiver = small_chunks(kThreeTensorsChunk);
  receiver.max_name_bytes = 5;
  expect_refusal(Refusal::InvalidName, "has 6 bytes, names need 1 to 5",
                 feeding(three_tensor_stream(), receiver));

  std::vector<v1::ModelStream> duplicate = three_tensor_stream();
  duplicate[0].mutable_header()->mutable_tensors(2)->set_name("weight");
  expect_refusal(Refusal::InvalidName, "'weight' is listed twice", feeding(duplicate));
}

TEST(ModelAssemblerRefuses, NegativeDimensionsAndTooManyDimensions) {
  std::vector<v1::ModelStream> negative = three_tensor_stream();
  negative[0].mutable_header()->mutable_tensors(0)->set_shape(1, -5);
  expect_refusal(Refusal::InvalidShape, "'weight' has the negative dimension -5", feeding(negative));

  TransferLimits receiver = small_chunks(kThreeTensorsChunk);
  receiver.max_rank = 1;
  expect_refusal(Refusal::InvalidShape, "'weight' has 2 dimensions, the limit is 1",
                 feeding(three_tensor_stream(), receiver));
}

TEST(ModelAssemblerRefuses, AnUnknownDType) {
  std::vector<v1::ModelStream> messages = three_tensor_stream();
  messages[0].mutable_header()->mutable_tensors(1)->set_dtype(static_cast<v1::DType>(9));
  expect_refusal(Refusal::UnknownDType, "'bias' has dtype code 9", feeding(messages));
}

TEST(ModelAssemblerRefuses, AbsurdSizesBeforeAllocatingAnything) {
  std::vector<v1::ModelStream> overflowing = three_tensor_stream();
  v1::TensorEntry& weight = *overflowing[0].mutable_header()->mutable_tensors(0);
  weight.set_shape(0, int64_t{1} << 40);
  weight.set_shape(1, int64_t{1} << 40);
  expect_refusal(Refusal::SizeTooLarge, "tensor 'weight': dtype and shape make more than",
                 feeding(overflowing));

  TransferLimits receiver = small_chunks(kThreeTensorsChunk);
  receiver.max_total_bytes = 100;
  expect_refusal(Refusal::SizeTooLarge, "declares 640 bytes in all, the limit is 100",
                 feeding(three_tensor_stream(), receiver));
}

TEST(ModelAssemblerRefuses, ATableInconsistentWithDTypeTimesShape) {
  std::vector<v1::ModelStream> moved = three_tensor_stream();
  moved[0].mutable_header()->mutable_tensors(1)->set_offset(204);
  expect_refusal(Refusal::TableInconsistent, "'bias' starts at byte 204, but the tensors before it",
                 feeding(moved));

  std::vector<v1::ModelStream> widened = three_tensor_stream();
  widened[0].mutable_header()->mutable_tensors(0)->set_dtype(v1::DTYPE_FLOAT64);
  expect_refusal(Refusal::TableInconsistent,
                 "'bias' starts at byte 200, but the tensors before it (dtype x shape) "
                 "end at byte 400",
                 feeding(widened));

  std::vector<v1::ModelStream> wrong_total = three_tensor_stream();
  wrong_total[0].mutable_header()->set_total_bytes(641);
  expect_refusal(Refusal::TableInconsistent,
                 "declares 641 bytes in all, but its tensors (dtype x shape) take 640", feeding(wrong_total));
}

TEST(ModelAssemblerRefuses, ADigestOfTheWrongLength) {
  std::vector<v1::ModelStream> messages = three_tensor_stream();
  messages[0].mutable_header()->mutable_blake2b_256()->pop_back();
  expect_refusal(Refusal::InvalidDigest, "digest has 31 bytes", feeding(messages));
}

TEST(ModelAssemblerRefuses, AChunkLargerThanTheReceiversLimit) {
  expect_refusal(Refusal::ChunkTooLarge, "chunk 0 carries 64 bytes, the limit is 32",
                 feeding(three_tensor_stream(), small_chunks(32)));
}

TEST(ModelAssemblerRefuses, AnEmptyChunk) {
  std::vector<v1::ModelStream> messages = three_tensor_stream();
  messages[3].mutable_chunk()->clear_data();
  expect_refusal(Refusal::EmptyChunk, "chunk 2 carries no data", feeding(messages));
}

TEST(ModelAssemblerRefuses, AChunkOutOfOrder) {
  std::vector<v1::ModelStream> messages = three_tensor_stream();
  std::swap(messages[2], messages[3]);
  expect_refusal(Refusal::OutOfOrder, "chunk 2 arrived where chunk 1 was expected", feeding(messages));
}

TEST(ModelAssemblerRefuses, AGap) {
  std::vector<v1::ModelStream> messages = three_tensor_stream();
  messages.erase(messages.begin() + 2);
  // Renumbered, so only the offsets show that chunk 1's bytes are missing.
  for (size_t i = 2; i < messages.size(); ++i) messages[i].mutable_chunk()->set_sequence(i - 1);
  expect_refusal(Refusal::Gap, "chunk 1 starts at byte 128, but bytes 64 to 127 never arrived",
                 feeding(messages));
}

TEST(ModelAssemblerRefuses, AnOverlap) {
  std::vector<v1::ModelStream> messages = three_tensor_stream();
  messages[3].mutable_chunk()->set_offset(100);
  expect_refusal(Refusal::Overlap, "chunk 2 starts at byte 100, inside the 128 bytes already received",
                 feeding(messages));
}

TEST(ModelAssemblerRefuses, DataBeyondTheDeclaredTotal) {
  std::vector<v1::ModelStream> extra_chunk = three_tensor_stream();
  v1::ModelChunk& extra = *extra_chunk.emplace_back().mutable_chunk();
  extra.set_sequence(10);
  extra.set_offset(640);
  extra.set_data("x");
  expect_refusal(Refusal::BeyondTotal, "chunk 10 ends at byte 641, past the declared total of 640 bytes",
                 feeding(extra_chunk));

  std::vector<v1::ModelStream> longer_last_chunk = three_tensor_stream();
  longer_last_chunk.back().mutable_chunk()->mutable_data()->push_back('x');
  // A receiver taking larger chunks, so only the total can refuse it.
  expect_refusal(Refusal::BeyondTotal, "chunk 9 ends at byte 641",
                 feeding(longer_last_chunk, small_chunks(128)));
}

TEST(ModelAssemblerRefuses, AStreamThatEndsEarly) {
  std::vector<v1::ModelStream> messages = three_tensor_stream();
  messages.pop_back();
  expect_refusal(Refusal::Truncated, "ended after 576 of 640 bytes", feeding(messages));
}

TEST(ModelAssemblerRefuses, DataOrTableThatDoNotMatchTheDigest) {
  std::vector<v1::ModelStream> flipped_bit = three_tensor_stream();
  (*flipped_bit[4].mutable_chunk()->mutable_data())[5] ^= 0x10;
  expect_refusal(Refusal::DigestMismatch, "do not hash to the header's digest", feeding(flipped_bit));

  std::vector<v1::ModelStream> renamed = three_tensor_stream();
  renamed[0].mutable_header()->mutable_tensors(1)->set_name("bias2");
  expect_refusal(Refusal::DigestMismatch, "do not hash to the header's digest", feeding(renamed));
}

TEST(ModelAssemblerRefuses, NothingIsAllocatedForAHugeDeclaredTensorUntilItsDataArrives) {
  // 4 TiB declared within the receiver's limits: allocating it on the header's word would
  // fail (or, under ASan, abort), so reaching the truncation refusal shows nothing was.
  TransferLimits receiver;
  receiver.max_total_bytes = uint64_t{1} << 43;
  v1::ModelHeader header;
  v1::TensorEntry& tensor = *header.add_tensors();
  tensor.set_name("huge");
  tensor.set_dtype(v1::DTYPE_FLOAT32);
  tensor.add_shape(int64_t{1} << 40);
  header.set_total_bytes(uint64_t{1} << 42);
  header.set_blake2b_256(std::string(32, '\0'));
  ModelAssembler assembler(receiver);
  assembler.accept_header(header);
  expect_refusal(Refusal::Truncated, "ended after 0 of 4398046511104 bytes", [&] { assembler.finish(); });
}

// Signing.

const std::string kCheckInMethod = "/torchnative.federated.v1.DeviceService/CheckIn";

TEST(Signing, SignedBytesAreTheDocumentedLayout) {
  v1::Auth auth;
  auth.set_key_id("dev-1");
  auth.set_timestamp_unix_ms(0x0102030405060708);
  auth.set_nonce(std::string(16, 'n'));
  auth.set_signature("not part of the signed bytes");
  using namespace std::string_literals;
  const std::string expected = "torchnative.federated.v1/request\0"s + "\0\0\0\x06/svc/M"s + "\0\0\0\x05"s +
                               "dev-1" + "\x01\x02\x03\x04\x05\x06\x07\x08"s + "\0\0\0\x10"s +
                               std::string(16, 'n') + "\0\0\0\0\0\0\0\x03"s + "pay";
  EXPECT_EQ(signing_bytes("/svc/M", auth, "pay"), expected);
}

TEST(Signing, ASignedRequestVerifies) {
  const SigningKey key = SigningKey::generate();
  const v1::Auth auth = sign_request(kCheckInMethod, "device-1", "payload bytes", key);
  EXPECT_TRUE(verify_request(kCheckInMethod, auth, "payload bytes", key.public_key()));
}

TEST(Signing, AFlippedPayloadBitFails) {
  const SigningKey key = SigningKey::generate();
  const std::string payload = "payload bytes";
  const v1::Auth auth = sign_request(kCheckInMethod, "device-1", payload, key);
  std::string flipped = payload;
  flipped[3] ^= 0x01;
  EXPECT_FALSE(verify_request(kCheckInMethod, auth, flipped, key.public_key()));
  EXPECT_FALSE(verify_request(kCheckInMethod, auth, payload + '\0', key.public_key()));
}

TEST(Signing, AnotherMethodFails) {
  const SigningKey key = SigningKey::generate();
  const v1::Auth auth = sign_request(kCheckInMethod, "device-1", "payload", key);
  EXPECT_FALSE(
      verify_request("/torchnative.federated.v1.DeviceService/Heartbeat", auth, "payload", key.public_key()));
}

TEST(Signing, AChangedKeyIdTimestampNonceOrSignatureFails) {
  const SigningKey key = SigningKey::generate();
  const v1::Auth auth = sign_request(kCheckInMethod, "device-1", "payload", key);
  const auto fails_after = [&](const std::function<void(v1::Auth&)>& change) {
    v1::Auth changed = auth;
    change(changed);
    return !verify_request(kCheckInMethod, changed, "payload", key.public_key());
  };
  EXPECT_TRUE(fails_after([](v1::Auth& a) { a.set_key_id("device-2"); }));
  EXPECT_TRUE(fails_after([](v1::Auth& a) { a.set_timestamp_unix_ms(a.timestamp_unix_ms() + 1); }));
  EXPECT_TRUE(fails_after([](v1::Auth& a) { (*a.mutable_nonce())[0] ^= 0x01; }));
  EXPECT_TRUE(fails_after([](v1::Auth& a) { (*a.mutable_signature())[10] ^= 0x01; }));
  EXPECT_TRUE(fails_after([](v1::Auth& a) { a.mutable_signature()->pop_back(); }));
}

TEST(Signing, AnotherKeyFails) {
  const SigningKey key = SigningKey::generate();
  const SigningKey other = SigningKey::generate();
  const v1::Auth auth = sign_request(kCheckInMethod, "device-1", "payload", key);
  EXPECT_FALSE(verify_request(kCheckInMethod, auth, "payload", other.public_key()));
  EXPECT_FALSE(verify_request(kCheckInMethod, auth, "payload", key.public_key().substr(1)));
}

TEST(Signing, AShortNonceIsRefusedEvenWhenProperlySigned) {
  const SigningKey key = SigningKey::generate();
  v1::Auth auth;
  auth.set_key_id("device-1");
  auth.set_timestamp_unix_ms(1);
  auth.set_nonce(std::string(kMinNonceBytes - 1, 'n'));
  auth.set_signature(key.sign(signing_bytes(kCheckInMethod, auth, "payload")));
  EXPECT_FALSE(verify_request(kCheckInMethod, auth, "payload", key.public_key()));
  auth.set_nonce(std::string(kMinNonceBytes, 'n'));
  auth.set_signature(key.sign(signing_bytes(kCheckInMethod, auth, "payload")));
  EXPECT_TRUE(verify_request(kCheckInMethod, auth, "payload", key.public_key()));
}

TEST(Signing, EachRequestGetsAFreshNonceAndTheCurrentTime) {
  const SigningKey key = SigningKey::generate();
  const v1::Auth first = sign_request(kCheckInMethod, "device-1", "payload", key);
  const v1::Auth second = sign_request(kCheckInMethod, "device-1", "payload", key);
  EXPECT_EQ(first.nonce().size(), kMinNonceBytes);
  EXPECT_NE(first.nonce(), second.nonce());
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  EXPECT_LE(std::abs(now - static_cast<int64_t>(first.timestamp_unix_ms())), 60'000);
}

TEST(ProtocolVersion, OursIsAcceptedOthersAreRefusedByNumber) {
  EXPECT_TRUE(check_protocol_version(kProtocolVersion).ok());
  const grpc::Status newer = check_protocol_version(2);
  EXPECT_EQ(newer.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(newer.error_message(),
            "protocol version 2 refused: this server speaks torchnative.federated.v1 protocol version 1");
  const grpc::Status unset = check_protocol_version(v1::PROTOCOL_VERSION_UNSPECIFIED);
  EXPECT_EQ(unset.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(unset.error_message().find("does not state one"), std::string::npos) << unset.error_message();
}

// A real gRPC server and client on loopback, both limited to 64 KiB messages.

constexpr size_t kLoopbackMessageLimit = size_t{64} << 10;

std::string fetch_model_method() {
  return std::string("/") + v1::DeviceService::service_full_name() + "/FetchModel";
}

TransferLimits loopback_limits() {
  TransferLimits limits;
  limits.max_message_bytes = kLoopbackMessageLimit;
  limits.max_chunk_bytes = kLoopbackMessageLimit - kEnvelopeBytes;
  return limits;
}

// DeviceService with FetchModel alone (the others answer UNIMPLEMENTED), serving one version.
class FetchModelService final : public v1::DeviceService::Service {
 public:
  FetchModelService(std::string version, Model model, const TransferLimits& limits,
                    std::string device_public_key)
      : version_(std::move(version)),
        model_(std::move(model)),
        limits_(limits),
        device_public_key_(std::move(device_public_key)) {}

  grpc::Status FetchModel(grpc::ServerContext*, const v1::FetchModelRequest* request,
                          grpc::ServerWriter<v1::ModelStream>* writer) override {
    if (!verify_request(fetch_model_method(), request->auth(), request->payload(), device_public_key_)) {
      return {grpc::StatusCode::UNAUTHENTICATED, "the request's signature does not verify"};
    }
    v1::FetchModelPayload payload;
    if (!payload.ParseFromString(request->payload()))
      return {grpc::StatusCode::INVALID_ARGUMENT, "bad payload"};
    if (payload.model_version() != version_) {
      return {grpc::StatusCode::NOT_FOUND, "no model version '" + payload.model_version() + "'"};
    }
    ModelChunker chunker(model_, version_, limits_);
    v1::ModelStream message;
    while (chunker.next(message)) {
      if (!writer->Write(message)) return {grpc::StatusCode::ABORTED, "the stream broke"};
    }
    return grpc::Status::OK;
  }

 private:
  std::string version_;
  Model model_;
  TransferLimits limits_;
  std::string device_public_key_;
};

class Loopback {
 public:
  explicit Loopback(FetchModelService& service) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.SetMaxReceiveMessageSize(kLoopbackMessageLimit);
    builder.SetMaxSendMessageSize(kLoopbackMessageLimit);
    builder.RegisterService(&service);
    server_ = builder.BuildAndStart();
    if (!server_ || port == 0) throw std::runtime_error("the loopback server did not start");
    grpc::ChannelArguments arguments;
    arguments.SetMaxReceiveMessageSize(kLoopbackMessageLimit);
    arguments.SetMaxSendMessageSize(kLoopbackMessageLimit);
    stub_ = v1::DeviceService::NewStub(grpc::CreateCustomChannel(
        "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(), arguments));
  }
  ~Loopback() { server_->Shutdown(); }

  v1::DeviceService::Stub& stub() { return *stub_; }

 private:
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::DeviceService::Stub> stub_;
};

struct Fetched {
  grpc::Status status;
  std::optional<Model> model;
  size_t messages = 0;
  size_t largest_message_bytes = 0;
};

Fetched fetch_model(v1::DeviceService::Stub& stub, const SigningKey& key, const std::string& version) {
  v1::FetchModelPayload payload;
  payload.set_model_version(version);
  v1::FetchModelRequest request;
  request.set_payload(payload.SerializeAsString());
  *request.mutable_auth() = sign_request(fetch_model_method(), "device-1", request.payload(), key);

  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  std::unique_ptr<grpc::ClientReader<v1::ModelStream>> reader = stub.FetchModel(&context, request);
  ModelAssembler assembler(loopback_limits());
  Fetched fetched;
  v1::ModelStream message;
  while (reader->Read(&message)) {
    ++fetched.messages;
    fetched.largest_message_bytes = std::max(fetched.largest_message_bytes, message.ByteSizeLong());
    assembler.accept(message);
  }
  fetched.status = reader->Finish();
  if (fetched.status.ok()) fetched.model = assembler.finish();
  return fetched;
}

Model five_megabyte_model() {
  return {{make_tensor("layer1.weight", ScalarType::Float, {1024, 1024}, 21),
           make_tensor("layer1.bias", ScalarType::Float, {1024}, 22),
           make_tensor("layer2.weight", ScalarType::BFloat16, {333, 1000}, 23),
           make_tensor("steps", ScalarType::Long, {3}, 24)}};
}

TEST(GrpcLoopback, AFiveMegabyteModelStreamsThroughA64KiBMessageLimit) {
  const SigningKey device_key = SigningKey::generate();
  const Model model = five_megabyte_model();
  FetchModelService service("v5mb", model, loopback_limits(), device_key.public_key());
  Loopback loopback(service);

  const Fetched fetched = fetch_model(loopback.stub(), device_key, "v5mb");
  ASSERT_TRUE(fetched.status.ok()) << fetched.status.error_message();
  ASSERT_TRUE(fetched.model.has_value());
  expect_same_model(model, *fetched.model);
  const uint64_t total = 4 * 1024 * 1024 + 4 * 1024 + 2 * 333 * 1000 + 8 * 3;
  const size_t chunk = loopback_limits().max_chunk_bytes;
  EXPECT_EQ(fetched.messages, 1 + (total + chunk - 1) / chunk);
  EXPECT_LE(fetched.largest_message_bytes, kLoopbackMessageLimit);
  EXPECT_GT(fetched.largest_message_bytes, kLoopbackMessageLimit - kEnvelopeBytes);
}

// What the test above relies on: the channel really refuses a message over its limit.
TEST(GrpcLoopback, ChunksLargerThanTheChannelAllowsAreRefused) {
  const SigningKey device_key = SigningKey::generate();
  TransferLimits too_large = loopback_limits();
  too_large.max_message_bytes = 4 * kLoopbackMessageLimit;
  too_large.max_chunk_bytes = 2 * kLoopbackMessageLimit;
  FetchModelService service("v5mb", five_megabyte_model(), too_large, device_key.public_key());
  Loopback loopback(service);

  const Fetched fetched = fetch_model(loopback.stub(), device_key, "v5mb");
  EXPECT_EQ(fetched.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << fetched.status.error_message();
  EXPECT_FALSE(fetched.model.has_value());
}

TEST(GrpcLoopback, ARequestSignedWithAnotherKeyIsRefused) {
  const SigningKey device_key = SigningKey::generate();
  const SigningKey impostor_key = SigningKey::generate();
  FetchModelService service("v5mb", five_megabyte_model(), loopback_limits(), device_key.public_key());
  Loopback loopback(service);

  const Fetched fetched = fetch_model(loopback.stub(), impostor_key, "v5mb");
  EXPECT_EQ(fetched.status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << fetched.status.error_message();
  EXPECT_EQ(fetched.messages, 0u);
}

TEST(SigningKeyFile, IsCreatedPrivateAndReloadsTheSameKey) {
  char directory[] = "/tmp/tn_key_XXXXXX";
  ASSERT_NE(mkdtemp(directory), nullptr);
  std::string path = std::string(directory) + "/device.key";
  std::string first = tn::proto::SigningKey::load_or_create(path).public_key();
  struct stat info {};
  ASSERT_EQ(stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_EQ(info.st_size, 32);
  EXPECT_EQ(tn::proto::SigningKey::load_or_create(path).public_key(), first);
  chmod(path.c_str(), 0644);
  EXPECT_THROW(tn::proto::SigningKey::load_or_create(path), std::runtime_error);
  chmod(path.c_str(), 0600);
  truncate(path.c_str(), 31);
  EXPECT_THROW(tn::proto::SigningKey::load_or_create(path), std::runtime_error);
  unlink(path.c_str());
  rmdir(directory);
}

// A model of every aggregated dtype and an integer tensor, finite values of every magnitude.
Model finite_model(uint32_t seed) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> uniform(-3, 3);
  auto tensor = [&](const std::string& name, ScalarType dtype, Shape shape) {
    int64_t numel = 1;
    for (int64_t size : shape) numel *= size;
    std::vector<std::byte> bytes(size_t(numel) * element_size(dtype));
    for (int64_t i = 0; i < numel; ++i) {
      const float value = std::ldexp(uniform(random), int(random() % 20) - 10);
      std::byte* at = bytes.data() + size_t(i) * element_size(dtype);
      if (dtype == ScalarType::Float) std::memcpy(at, &value, 4);
      if (dtype == ScalarType::Double) {
        const double wide = double(value) / 3;
        std::memcpy(at, &wide, 8);
      }
      if (dtype == ScalarType::Half) {
        const Half half(value);
        std::memcpy(at, &half, 2);
      }
      if (dtype == ScalarType::BFloat16) {
        const BFloat16 brain(value);
        std::memcpy(at, &brain, 2);
      }
      if (dtype == ScalarType::Long) {
        const int64_t whole = int64_t(random());
        std::memcpy(at, &whole, 8);
      }
    }
    return federated::copy_tensor(name, dtype, std::move(shape), bytes);
  };
  Model model;
  model.tensors = {tensor("weight", ScalarType::Float, {7, 5}), tensor("steps", ScalarType::Long, {3}),
                   tensor("scale", ScalarType::Double, {9}), tensor("half", ScalarType::Half, {11}),
                   tensor("brain", ScalarType::BFloat16, {2, 3})};
  return model;
}

// What a receiver that never holds the model packs from the stream, chunks cut anywhere (inside
// elements too), has the bits of pack() over the whole model, for both kinds.
TEST(StreamedContribution, PackingChunksAsTheyArriveGivesTheBitsOfPackingTheModel) {
  const Model model = finite_model(5);
  for (auto kind : {federated::ContributionKind::WeightedSum, federated::ContributionKind::Values}) {
    const federated::ContributionLayout layout(model.spec(), kind);
    std::vector<double> whole(layout.elements());
    layout.pack(model, 6, {}, whole);
    for (size_t chunk : {size_t{1}, size_t{3}, size_t{5}, size_t{7}, size_t{13}, size_t{1} << 20}) {
      SCOPED_TRACE("chunks of " + std::to_string(chunk) + " bytes");
      std::vector<double> streamed(layout.elements(), -1);
      federated::StreamingPacker packer(layout, "dev-test", 6, {}, streamed);
      ModelAssembler assembler(small_chunks(std::max<size_t>(chunk, 1)),
                               [&](size_t tensor, uint64_t offset, std::span<const std::byte> bytes) {
                                 packer.add(tensor, offset, bytes);
                               });
      for (const v1::ModelStream& message : stream_of(model, small_chunks(chunk))) assembler.accept(message);
      assembler.finish_streamed();
      packer.finish();
      EXPECT_EQ(0, std::memcmp(streamed.data(), whole.data(), whole.size() * sizeof(double)));
    }
  }
}

TEST(StreamedContribution, RefusalsAreTheWholeModelsAndATamperedStreamIsRefused) {
  Model model = finite_model(6);
  const federated::ContributionLayout layout(model.spec());
  std::vector<double> out(layout.elements());
  auto message = [](const std::function<void()>& body) {
    try {
      body();
    } catch (const std::exception& error) {
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  // A NaN, named as validate_update names it.
  std::vector<std::byte> poisoned(model.tensors[3].nbytes);
  std::memcpy(poisoned.data(), model.tensors[3].data.get(), poisoned.size());
  const Half nan(std::nanf(""));
  std::memcpy(poisoned.data() + 2 * 4, &nan, 2);  // element 4 of "half"
  model.tensors[3] = federated::copy_tensor("half", ScalarType::Half, {11}, poisoned);
  const std::string expected = message([&] {
    federated::validate_update({"dev-test", 1, 0, 6, model}, model.spec(), 1, 0, {});
  });
  EXPECT_EQ(expected, "update from 'dev-test': tensor 'half' element 4 (index [4]) is NaN");
  federated::StreamingPacker packer(layout, "dev-test", 6, {}, out);
  ModelAssembler assembler(small_chunks(3),
                           [&](size_t tensor, uint64_t offset, std::span<const std::byte> bytes) {
                             packer.add(tensor, offset, bytes);
                           });
  EXPECT_EQ(message([&] {
              for (const v1::ModelStream& part : stream_of(model, small_chunks(3))) assembler.accept(part);
            }),
            expected);
  EXPECT_EQ(message([&] { federated::StreamingPacker(layout, "dev-test", 0, {}, out); }),
            "update from 'dev-test': example count 0 is not in [1, 2147483648]");
  // Every chunk checks out, but the data is not what the header's digest says.
  const Model honest = finite_model(6);
  std::vector<v1::ModelStream> stream = stream_of(honest, small_chunks(64));
  stream[0].mutable_header()->set_blake2b_256(std::string(32, 'x'));
  federated::StreamingPacker unsuspecting(layout, "dev-test", 6, {}, out);
  ModelAssembler digesting(small_chunks(64),
                           [&](size_t tensor, uint64_t offset, std::span<const std::byte> bytes) {
                             unsuspecting.add(tensor, offset, bytes);
                           });
  for (const v1::ModelStream& part : stream) digesting.accept(part);
  expect_refusal(Refusal::DigestMismatch, "do not hash to the header's digest",
                 [&] { digesting.finish_streamed(); });
  // A stream that ended early leaves the packer short of bytes.
  federated::StreamingPacker short_of_bytes(layout, "dev-test", 6, {}, out);
  EXPECT_NE(message([&] { short_of_bytes.finish(); }).find("arrived with 0 of its 140 bytes"),
            std::string::npos);
}

}  // namespace
}  // namespace tn::proto
