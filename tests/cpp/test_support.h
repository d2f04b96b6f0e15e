// Helpers the C++ test binaries share (library tn_test_support).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "federated/model.h"

namespace tn::test {

// Runs `body` and returns the message of the E it throws (failing the test when it throws none).
template <typename E>
std::string message_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const E& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected an exception";
  return {};
}

// The same tensors in the same order: names, dtypes, shapes and bytes.
void expect_same_model(const federated::Model& expected, const federated::Model& actual);

}  // namespace tn::test
