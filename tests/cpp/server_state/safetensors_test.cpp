// The safetensors files: round trip of every dtype, the exact bytes the format specifies, refusal
// of models it cannot write and of corrupt files, and the state store's checks of its stored files.
#include "server/safetensors.h"

#include <cstring>
#include <random>

#include "state_store_fixture.h"

namespace {

using namespace tn::server::state_test;

// ---- safetensors ------------------------------------------------------------------------------

Model every_dtype_model() {
  std::mt19937 random(7);
  auto random_bytes = [&random](size_t count) {
    std::vector<uint8_t> bytes(count);
    for (uint8_t& byte : bytes) byte = uint8_t(random());
    return bytes;
  };
  Model model;
  const std::pair<ScalarType, Shape> tensors[] = {
      {ScalarType::Float, {3, 2}}, {ScalarType::Double, {5}}, {ScalarType::Half, {2, 2, 2}},
      {ScalarType::BFloat16, {7}}, {ScalarType::Long, {}},    {ScalarType::Int, {1, 3}},
      {ScalarType::Short, {4}},    {ScalarType::Char, {9}},   {ScalarType::Byte, {2, 5}},
      {ScalarType::Bool, {6}},     {ScalarType::Float, {0}},  {ScalarType::Bool, {3, 0, 2}},
      {ScalarType::Double, {0, 4}}};
  for (const auto& [dtype, shape] : tensors) {
    int64_t count = 1;
    for (int64_t dimension : shape) count *= dimension;
    std::vector<uint8_t> bytes = random_bytes(size_t(count) * tn::element_size(dtype));
    if (dtype == ScalarType::Bool)
      for (uint8_t& byte : bytes) byte &= 1;
    const std::string name =
        std::string(safetensors_dtype_name(dtype)) + "/" + std::to_string(model.tensors.size());
    model.tensors.push_back(tensor_of<uint8_t>(name, dtype, shape, bytes));
  }
  return model;
}

std::shared_ptr<const std::vector<std::byte>> as_file(std::string_view bytes) {
  const auto* begin = reinterpret_cast<const std::byte*>(bytes.data());
  return std::make_shared<const std::vector<std::byte>>(begin, begin + bytes.size());
}

TEST(Safetensors, RoundTripsEveryDtypeAndEmptyTensors) {
  const Model model = every_dtype_model();
  const std::string bytes = encode_safetensors(model, {{"format", "pt"}});
  const SafetensorsContents decoded = decode_safetensors(as_file(bytes), "every_dtype.safetensors");
  expect_same_model(model, decoded.model);
  EXPECT_EQ(decoded.metadata, (SafetensorsMetadata{{"format", "pt"}}));
  // The names safetensors gives the dtypes.
  for (const auto& [dtype, name] :
       std::vector<std::pair<ScalarType, std::string>>{{ScalarType::Float, "F32"},
                                                       {ScalarType::Double, "F64"},
                                                       {ScalarType::Half, "F16"},
                                                       {ScalarType::BFloat16, "BF16"},
                                                       {ScalarType::Long, "I64"},
                                                       {ScalarType::Int, "I32"},
                                                       {ScalarType::Short, "I16"},
                                                       {ScalarType::Char, "I8"},
                                                       {ScalarType::Byte, "U8"},
                                                       {ScalarType::Bool, "BOOL"}}) {
    EXPECT_EQ(safetensors_dtype_name(dtype), name);
    EXPECT_EQ(safetensors_dtype(name), dtype);
  }
}

TEST_F(StateStoreTest, StoresAndLoadsEveryDtype) {
  {
    StateStore store = open();
    store.create_task(definition("all"), every_dtype_model());
  }
  StateStore reopened = open();
  expect_same_model(every_dtype_model(), reopened.load_model("all", 0));
}

// Byte for byte what the format specifies, written out by hand.
TEST(Safetensors, WritesExactlyTheSpecifiedBytes) {
  const Model tiny{{tensor_of<float>("bias", ScalarType::Float, {2}, {1.0f, -2.0f}),
                    tensor_of<int64_t>("step", ScalarType::Long, {}, {7})}};
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"bias":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("step":{"dtype":"I64","shape":[],"data_offsets":[8,16]}})";  // 144 bytes: no padding
  ASSERT_EQ(header.size(), 144u);
  const std::string expected = std::string("\x90\0\0\0\0\0\0\0", 8) + header +
                               std::string("\x00\x00\x80\x3f\x00\x00\x00\xc0", 8) +  // 1.0f, -2.0f
                               std::string("\x07\0\0\0\0\0\0\0", 8);                 // 7
  EXPECT_EQ(encode_safetensors(tiny, {{"format", "pt"}}), expected);

  // 113 bytes of JSON are padded with 7 spaces to 120; a 0-element tensor spans [4, 4].
  const Model padded{{tensor_of<uint16_t>("w", ScalarType::Half, {1, 2}, {0x3c00, 0xc000}),
                      tensor_of<uint8_t>("mask", ScalarType::Bool, {0}, {})}};
  const std::string expected_padded =
      std::string("\x78\0\0\0\0\0\0\0", 8) +
      R"({"w":{"dtype":"F16","shape":[1,2],"data_offsets":[0,4]},"mask":{"dtype":"BOOL","shape":[0],"data_offsets":[4,4]}})" +
      "       " + std::string("\x00\x3c\x00\xc0", 4);  // float16 1.0, -2.0
  EXPECT_EQ(encode_safetensors(padded), expected_padded);
  EXPECT_EQ(safetensors_header(padded), expected_padded.substr(0, 128));
}

TEST(Safetensors, RefusesModelsItCannotWrite) {
  Model named_like_metadata{{tensor_of<float>("__metadata__", ScalarType::Float, {1}, {1.0f})}};
  EXPECT_THROW(encode_safetensors(named_like_metadata), InvalidArgument);
  Model invalid_utf8{{tensor_of<float>("w\xff", ScalarType::Float, {1}, {1.0f})}};
  EXPECT_THROW(encode_safetensors(invalid_utf8), InvalidArgument);
  Model repeated{{tensor_of<float>("w", ScalarType::Float, {1}, {1.0f}),
                  tensor_of<float>("w", ScalarType::Float, {1}, {1.0f})}};
  EXPECT_THROW(encode_safetensors(repeated), InvalidArgument);
}

// Builds a file from a header text and `data_bytes` zero bytes of data.
std::string file_with_header(const std::string& header, size_t data_bytes) {
  std::string length(8, '\0');
  for (size_t i = 0; i < 8; ++i) length[i] = char((header.size() >> (8 * i)) & 0xff);
  return length + header + std::string(data_bytes, '\0');
}

TEST(Safetensors, RefusesCorruptFilesByName) {
  const std::string valid =
      encode_safetensors(Model{{tensor_of<float>("a", ScalarType::Float, {2}, {1.0f, 2.0f}),
                                tensor_of<int32_t>("b", ScalarType::Int, {1}, {3})}});
  std::string huge_length = valid;
  huge_length[5] = '\x7f';
  std::string too_long = valid;
  too_long[0] = char(uint8_t(too_long[0]) + 1);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {valid.substr(0, 5), "shorter than the 8-byte header length"},
      {valid.substr(0, valid.size() - 1), "tensor 'b' ends at data offset 12, past the 11 data bytes"},
      {valid.substr(0, 40), "follow (truncated?)"},
      {huge_length, "exceeds the bound"},
      {valid + "x", "the tensors cover 12 data bytes, the file has 13"},
      {too_long, "the header contains a NUL byte"},  // the length now takes in the first data byte
      {file_with_header(R"( {"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4),
       "does not start with '{'"},
      {file_with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)", 4),
       "not valid UTF-8 JSON"},
      {file_with_header("{\"a\xc3\x28\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4),
       "not valid UTF-8 JSON"},
      {file_with_header(
           R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           8),
       "repeats the key \"a\""},
      {file_with_header(R"({"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4),
       "repeats the key \"dtype\""},
      {file_with_header(R"({"a":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", 4),
       "unknown dtype \"F33\""},
      {file_with_header(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
       "invalid dimension -1"},
      {file_with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4),
       "spans 4 bytes, its dtype \"F32\" and shape [2] make 8"},
      {file_with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", 4),
       "invalid data_offsets"},
      {file_with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":1}})", 4),
       "not exactly {dtype, shape, data_offsets}"},
      {file_with_header(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           8),
       "tensor 'b' starts at data offset 4 where 8 was expected"},
      {file_with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
       "tensor 'a' starts at data offset 4 where 0 was expected"},
      {file_with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 2),
       "past the 2 data bytes"},
      {file_with_header(R"({"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,4]}})", 4),
       "overflows"},
      {file_with_header(R"({"__metadata__":{"k":1}})", 0), "metadata 'k' is not a string"},
      {file_with_header(R"({"":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4), "empty"},
  };
  for (const auto& [bytes, problem] : cases) {
    try {
      decode_safetensors(as_file(bytes), "models/x/3.safetensors");
      ADD_FAILURE() << "accepted a file that should fail with: " << problem;
    } catch (const CorruptFile& error) {
      EXPECT_EQ(error.path, "models/x/3.safetensors");
      EXPECT_NE(std::string(error.what()).find(problem), std::string::npos)
          << "expected \"" << problem << "\" in: " << error.what();
    }
  }
}

TEST_F(StateStoreTest, RefusesAStoredFileThatWasTruncatedOrAlteredByName) {
  {
    StateStore store = open();
    populate(store);
    store.begin_round("mnist", {1, 0, {"a"}, 0});
    store.close_round("mnist", 1, completed({"a"}, {}, small_model(2), 1));
  }
  const fs::path truncated = directory_ / "models/mnist/0.safetensors";
  const fs::path altered = directory_ / "models/mnist/1.safetensors";
  const std::string original = file_contents(truncated);
  write_contents(truncated, std::string_view(original).substr(0, original.size() - 3));
  std::string flipped = file_contents(altered);
  flipped.back() ^= 0x01;
  write_contents(altered, flipped);

  StateStore store = open();
  const std::vector<FileProblem>& damaged = store.open_report().damaged_files;
  ASSERT_EQ(damaged.size(), 2u);
  EXPECT_EQ(damaged[0].path, truncated.string());
  EXPECT_NE(damaged[0].problem.find("the database recorded " + std::to_string(original.size())),
            std::string::npos);
  EXPECT_EQ(damaged[1].path, altered.string());
  EXPECT_NE(damaged[1].problem.find("BLAKE2b-256"), std::string::npos);
  EXPECT_TRUE(store.open_report().removed_files.empty());  // a damaged file is reported, never deleted
  try {
    store.load_model("mnist", 1);
    FAIL() << "an altered model was loaded";
  } catch (const CorruptFile& error) {
    EXPECT_EQ(error.path, altered.string());
  }
  EXPECT_THROW(store.load_model("mnist", 0), CorruptFile);
  EXPECT_THROW(store.resume_point("mnist"), CorruptFile);
  EXPECT_EQ(store.verify_files().size(), 2u);
}

TEST_F(StateStoreTest, SizeCheckAtOpenFindsTruncationAndLoadStillVerifiesTheHash) {
  {
    StateStore store = open();
    populate(store);
  }
  const fs::path model = directory_ / "models/mnist/0.safetensors";
  std::string flipped = file_contents(model);
  flipped.back() ^= 0x01;
  write_contents(model, flipped);
  {
    StateStore store = open(OpenOptions::FileCheck::Sizes);
    EXPECT_TRUE(store.open_report().damaged_files.empty());  // same size: only a hash finds it
    EXPECT_THROW(store.load_model("mnist", 0), CorruptFile);
  }
  fs::remove(model);
  StateStore store = open(OpenOptions::FileCheck::Sizes);
  ASSERT_EQ(store.open_report().damaged_files.size(), 1u);
  EXPECT_EQ(store.open_report().damaged_files[0].path, model.string());
}

}  // namespace
