// Unit tests of the shim's C++ layers (the golden harness compares against upstream).
#include <gtest/gtest.h>

#include "core.h"
#include "ops.h"
#include <random>

#include "random.h"

namespace tn {

TEST(Half, RoundTripsEveryFiniteValue) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    Half h;
    h.bits = uint16_t(bits);
    float f = float(h);
    if (f != f) continue;  // NaN payloads are not preserved bit for bit
    EXPECT_EQ(Half(f).bits, h.bits) << bits;
  }
}

TEST(Promotion, MixedSignIntegersWiden) {
  EXPECT_EQ(promote_types(ScalarType::Byte, ScalarType::Char), ScalarType::Short);
  EXPECT_EQ(promote_types(ScalarType::Half, ScalarType::BFloat16), ScalarType::Float);
  EXPECT_EQ(promote_types(ScalarType::Bool, ScalarType::Int), ScalarType::Int);
}

TEST(Schema, ParsesOutOverloadAndPrintsItBack) {
  const char* text = "aten::add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)";
  Schema s = parse_schema(text);
  EXPECT_EQ(s.full_name(), "aten::add.out");
  EXPECT_EQ(s.out_count(), 1u);
  EXPECT_EQ(s.str(), text);
}

TEST(Dispatcher, UnimplementedOperatorRefusesByName) {
  Operator* op = Dispatcher::instance().find("aten::cholesky", "");
  ASSERT_NE(op, nullptr);
  Stack stack{Tensor::empty({2, 2}, ScalarType::Float), false};
  try {
    Dispatcher::instance().call(*op, stack);
    FAIL() << "expected a refusal";
  } catch (const NotImplemented& e) {
    EXPECT_NE(std::string(e.what()).find("aten::cholesky"), std::string::npos);
  }
}

TEST(Generator, MatchesTheReferenceMt19937Stream) {
  // std::mt19937 is the reference the upstream generator also follows.
  Generator g(5489);
  std::mt19937 reference(5489);
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(g.random(), reference());
}

}  // namespace tn
