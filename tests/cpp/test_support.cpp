#include "test_support.h"

#include <cstring>

namespace tn::test {

void expect_same_model(const federated::Model& expected, const federated::Model& actual) {
  ASSERT_EQ(expected.tensors.size(), actual.tensors.size());
  for (size_t i = 0; i < expected.tensors.size(); ++i) {
    const federated::NamedTensor& want = expected.tensors[i];
    const federated::NamedTensor& got = actual.tensors[i];
    EXPECT_EQ(want.name, got.name);
    EXPECT_EQ(want.dtype, got.dtype) << want.name;
    EXPECT_EQ(want.shape, got.shape) << want.name;
    ASSERT_EQ(want.nbytes, got.nbytes) << want.name;
    if (want.nbytes > 0) {
      ASSERT_NE(got.data, nullptr) << want.name;
      EXPECT_EQ(std::memcmp(want.data.get(), got.data.get(), want.nbytes), 0) << want.name;
    }
  }
}

}  // namespace tn::test
