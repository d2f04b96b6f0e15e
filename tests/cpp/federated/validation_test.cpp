// Update validation's refusals, each by reason, and the model specs updates are checked against.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <iomanip>
#include <map>
#include <random>
#include <set>

#include "federated/validation.h"
#include "federated/model.h"
#include "federated_test_util.h"

namespace tn::federated {
namespace {

struct ValidationFixture : testing::Test {
  ModelSpec spec = ModelSpec({{"conv.weight", ScalarType::Float, {2, 3}},
                              {"conv.bias", ScalarType::Half, {2}},
                              {"norm.scale", ScalarType::BFloat16, {2}},
                              {"head.weight", ScalarType::Double, {3}},
                              {"steps", ScalarType::Long, {}}});
  UpdateLimits limits{1000, 5000};

  Update valid() const {
    Update update{"phone-1", 7, 3, 100, {}};
    for (const TensorSpec& tensor : spec.tensors())
      update.model.tensors.push_back(
          tensor_from(tensor, std::vector<long double>(size_t(tensor.numel()), 1)));
    return update;
  }
  std::string refusal(const Update& update) const {
    return message_of<UpdateRefused>([&] { validate_update(update, spec, 7, 3, limits); });
  }
  Reason reason(const Update& update) const {
    return reason_of([&] { validate_update(update, spec, 7, 3, limits); });
  }
  // `update` with element `index` of tensor `k` replaced by the raw bits `bits`.
  template <typename Bits>
  Update with_bits(size_t k, int64_t index, Bits bits) const {
    Update update = valid();
    NamedTensor& tensor = update.model.tensors[k];
    std::vector<std::byte> bytes(tensor.data.get(), tensor.data.get() + tensor.nbytes);
    std::memcpy(bytes.data() + index * int64_t(sizeof(Bits)), &bits, sizeof(Bits));
    tensor = copy_tensor(tensor.name, tensor.dtype, tensor.shape, bytes);
    return update;
  }
};

TEST_F(ValidationFixture, AcceptsAnUpdateThatFits) {
  EXPECT_NO_THROW(validate_update(valid(), spec, 7, 3, limits));
  Update reordered = valid();
  std::reverse(reordered.model.tensors.begin(), reordered.model.tensors.end());
  EXPECT_NO_THROW(validate_update(reordered, spec, 7, 3, limits));
}

TEST_F(ValidationFixture, RefusesWrongNames) {
  Update missing = valid();
  missing.model.tensors.erase(missing.model.tensors.begin() + 1);
  EXPECT_EQ(refusal(missing), "update from 'phone-1': tensor 'conv.bias' is missing");
  Update extra = valid();
  extra.model.tensors.push_back(tensor_from({"extra", ScalarType::Float, {1}}, {1}));
  EXPECT_EQ(refusal(extra), "update from 'phone-1': unexpected tensor 'extra'");
  Update twice = valid();
  twice.model.tensors.push_back(twice.model.tensors[0]);
  EXPECT_EQ(refusal(twice), "update from 'phone-1': tensor 'conv.weight' is listed twice");
  Update renamed = valid();
  renamed.model.tensors[0].name = "conv.weights";
  EXPECT_EQ(refusal(renamed), "update from 'phone-1': unexpected tensor 'conv.weights'");
  EXPECT_EQ(reason(renamed), Reason::Malformed);
}

TEST_F(ValidationFixture, RefusesWrongShapesDtypesAndByteCounts) {
  Update reshaped = valid();
  reshaped.model.tensors[0].shape = {3, 2};
  EXPECT_EQ(refusal(reshaped),
            "update from 'phone-1': tensor 'conv.weight' has shape [3, 2], expected [2, 3]");
  Update retyped = valid();
  retyped.model.tensors[1] = tensor_from({"conv.bias", ScalarType::Float, {2}}, {1, 1});
  EXPECT_EQ(refusal(retyped),
            "update from 'phone-1': tensor 'conv.bias' has dtype float32, expected float16");
  Update complex = valid();
  complex.model.tensors[0].dtype = ScalarType(9);  // upstream's ComplexFloat code
  EXPECT_EQ(refusal(complex),
            "update from 'phone-1': tensor 'conv.weight' has dtype code 9, expected float32");
  Update counter_as_float = valid();
  counter_as_float.model.tensors[4] = tensor_from({"steps", ScalarType::Double, {}}, {1});
  EXPECT_EQ(refusal(counter_as_float),
            "update from 'phone-1': tensor 'steps' has dtype float64, expected int64");
  Update truncated = valid();
  truncated.model.tensors[0].nbytes = 20;
  EXPECT_EQ(refusal(truncated),
            "update from 'phone-1': tensor 'conv.weight' holds 20 bytes, shape [2, 3] of float32 needs 24");
  Update no_data = valid();
  no_data.model.tensors[3].data.reset();
  EXPECT_EQ(refusal(no_data),
            "update from 'phone-1': tensor 'head.weight' holds 0 bytes, shape [3] of float64 needs 24");
  EXPECT_EQ(reason(no_data), Reason::Malformed);
}

TEST_F(ValidationFixture, RefusesNaNAndInfinityNamingTensorAndIndex) {
  Update nan_float = with_bits<uint32_t>(0, 5, 0x7fc00000u);
  EXPECT_EQ(refusal(nan_float),
            "update from 'phone-1': tensor 'conv.weight' element 5 (index [1, 2]) is NaN");
  EXPECT_EQ(reason(nan_float), Reason::NonFinite);
  EXPECT_EQ(refusal(with_bits<uint16_t>(1, 1, 0xfc00)),  // float16 -inf
            "update from 'phone-1': tensor 'conv.bias' element 1 (index [1]) is infinite");
  EXPECT_EQ(refusal(with_bits<uint16_t>(2, 0, 0x7f81)),  // bfloat16 signalling NaN
            "update from 'phone-1': tensor 'norm.scale' element 0 (index [0]) is NaN");
  EXPECT_EQ(refusal(with_bits<uint64_t>(3, 2, 0x7ff0000000000000ull)),
            "update from 'phone-1': tensor 'head.weight' element 2 (index [2]) is infinite");
  // The first bad element is named, and the largest finite values are not refused.
  Update two_bad = with_bits<uint32_t>(0, 4, 0x7f800000u);
  std::vector<std::byte> bytes(two_bad.model.tensors[0].data.get(), two_bad.model.tensors[0].data.get() + 24);
  uint32_t nan = 0xffc00000u;
  std::memcpy(bytes.data() + 8, &nan, 4);
  two_bad.model.tensors[0] = copy_tensor("conv.weight", ScalarType::Float, {2, 3}, bytes);
  EXPECT_EQ(refusal(two_bad), "update from 'phone-1': tensor 'conv.weight' element 2 (index [0, 2]) is NaN");
  EXPECT_NO_THROW(validate_update(with_bits<uint16_t>(1, 0, 0x7bff), spec, 7, 3, limits));
  EXPECT_NO_THROW(validate_update(with_bits<uint32_t>(0, 0, 0x7f7fffffu), spec, 7, 3, limits));
}

TEST_F(ValidationFixture, RefusesOversizedUpdatesBeforeReadingThem) {
  Update huge = valid();
  huge.model.tensors.push_back(wrap_tensor("padding", ScalarType::Float, {250}, nullptr, 1000));
  EXPECT_EQ(refusal(huge), "update from 'phone-1': 1064 bytes exceed the limit of 1000");
  EXPECT_EQ(reason(huge), Reason::TooLarge);
}

TEST_F(ValidationFixture, RefusesOtherRoundsAndVersions) {
  Update late = valid();
  late.round_id = 6;
  EXPECT_EQ(refusal(late),
            "update from 'phone-1': round 6 is over, the current round is 7 (a late or replayed update)");
  EXPECT_EQ(reason(late), Reason::WrongRound);
  Update early = valid();
  early.round_id = 8;
  EXPECT_EQ(refusal(early), "update from 'phone-1': round 8 has not started, the current round is 7");
  Update stale = valid();
  stale.model_version = 2;
  EXPECT_EQ(refusal(stale), "update from 'phone-1': trained on model version 2, round 7 trains version 3");
  EXPECT_EQ(reason(stale), Reason::WrongVersion);
}

TEST_F(ValidationFixture, RefusesExampleCountsOutOfBounds) {
  for (int64_t count : {int64_t{0}, int64_t{-5}, int64_t{5001}}) {
    Update update = valid();
    update.num_examples = count;
    EXPECT_EQ(refusal(update),
              "update from 'phone-1': " + std::to_string(count) + " examples, must be between 1 and 5000");
    EXPECT_EQ(reason(update), Reason::BadExamples);
  }
  Update anonymous = valid();
  anonymous.device_id.clear();
  EXPECT_EQ(refusal(anonymous), "update: the device id is empty");
}

TEST(ModelSpecs, RefuseWhatCannotBeAModel) {
  EXPECT_EQ(message_of<ParameterRefused>([] {
              ModelSpec({{"a", ScalarType::Float, {1}}, {"a", ScalarType::Float, {2}}});
            }),
            "model: tensor 'a' is listed twice");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              ModelSpec({{"", ScalarType::Float, {1}}});
            }),
            "model: a tensor has an empty name");
  EXPECT_EQ(
      message_of<ParameterRefused>([] {
        ModelSpec({{"z", ScalarType(10), {1}}});
      }),
      "model: tensor 'z' has dtype code 10, which is not supported (uint8, int8, int16, int32, int64, bool, "
      "float16, bfloat16, float32, float64)");
  EXPECT_EQ(message_of<ParameterRefused>([] {
              ModelSpec({{"n", ScalarType::Float, {2, -1}}});
            }),
            "model: tensor 'n' has shape [2, -1], which has a negative dimension or too many elements");
  EXPECT_EQ(
      message_of<ParameterRefused>([] {
        ModelSpec({{"big", ScalarType::Float, {int64_t{1} << 31, int64_t{1} << 31}}});
      }),
      "model: tensor 'big' has shape [2147483648, 2147483648], which has a negative dimension or too many "
      "elements");
  Model inconsistent{{wrap_tensor("w", ScalarType::Float, {4}, nullptr, 16)}};
  EXPECT_EQ(message_of<ParameterRefused>([&] { inconsistent.spec(); }),
            "model: tensor 'w' holds 0 bytes, its shape [4] of float32 needs 16");
}

TEST(ModelSpecs, WrappedTensorsShareTheirBytes) {
  auto buffer = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3});
  std::shared_ptr<const std::byte> bytes(buffer, reinterpret_cast<const std::byte*>(buffer->data()));
  NamedTensor tensor = wrap_tensor("w", ScalarType::Float, {3}, bytes, 12);
  EXPECT_EQ(tensor.data.get(), reinterpret_cast<const std::byte*>(buffer->data()));
  buffer.reset();  // the tensor keeps the vector alive
  EXPECT_EQ(read_as<float>(tensor.data.get() + 8), 3.0f);
}

}  // namespace
}  // namespace tn::federated
