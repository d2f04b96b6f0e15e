// What the SecAgg+ tests share: the reason and message of a refusal, and random secrets.
#pragma once

#include <gtest/gtest.h>
#include <sodium.h>

#include <functional>
#include <string>

#include "federated/secure_aggregation.h"

namespace tn::federated::secagg {

struct Refusal {
  SecAggRefused::Reason reason;
  std::string message;
};

// Runs `body` and returns its SecAggRefused (failing the test when it throws none).
inline Refusal refusal_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const SecAggRefused& refused) {
    return {refused.reason, refused.what()};
  }
  ADD_FAILURE() << "expected a SecAggRefused";
  return {SecAggRefused::Reason::Parameter, ""};
}

inline Bytes32 random_secret() {
  Bytes32 secret{};
  randombytes_buf(secret.data(), secret.size());
  return secret;
}

}  // namespace tn::federated::secagg
