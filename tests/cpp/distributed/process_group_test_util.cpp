// The process group tests' shared helpers that are not templates (see the header).
#include "process_group_test_util.h"

#include <exception>
#include <mutex>

namespace tn::dist {

void run_ranks(int world, const std::function<void(ProcessGroup&)>& fn, ProcessGroupOptions options) {
  auto store = make_hash_store(10s);
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(world);
  for (int rank = 0; rank < world; ++rank)
    threads.emplace_back([&, rank] {
      try {
        ProcessGroup group(store, rank, world, options);
        fn(group);
      } catch (...) {
        errors[rank] = std::current_exception();
      }
    });
  for (auto& thread : threads) thread.join();
  for (auto& error : errors)
    if (error) std::rethrow_exception(error);
}

ProcessGroupOptions block_algorithm_options() {
  ProcessGroupOptions options;
  options.small_message_bytes = 0;   // every size takes the segmented block algorithm
  options.segment_bytes = 64;        // many segments, uneven last ones
  options.same_host_memory = false;  // over TCP
  return options;
}

// Every size past zero copies from the peers' memory (the threads of one process can read it).
ProcessGroupOptions peer_memory_options() {
  ProcessGroupOptions options;
  options.small_message_bytes = 0;
  return options;
}

std::vector<std::string> errors_of(int world, const std::function<void(ProcessGroup&)>& fn,
                                   ProcessGroupOptions options) {
  std::vector<std::string> errors(world);
  std::mutex mutex;
  run_ranks(
      world,
      [&](ProcessGroup& group) {
        try {
          fn(group);
        } catch (const DistError& error) {
          std::lock_guard lock(mutex);
          errors[group.rank()] = error.what();
        }
      },
      options);
  return errors;
}

}  // namespace tn::dist
