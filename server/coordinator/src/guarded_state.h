// The StateStore shared by the gRPC handlers and the round threads. StateStore is not
// thread-safe, so every use goes through one mutex; callers keep their critical sections to
// store calls and never block on the network inside one.
#pragma once

#include <mutex>
#include <utility>

#include "server/state_store.h"

namespace tn::server {

class GuardedState {
 public:
  explicit GuardedState(StateStore store) : store_(std::move(store)) {}

  template <typename Use>
  auto with(Use&& use) {
    std::lock_guard lock(mutex_);
    return use(store_);
  }

 private:
  std::mutex mutex_;
  StateStore store_;
};

}  // namespace tn::server
