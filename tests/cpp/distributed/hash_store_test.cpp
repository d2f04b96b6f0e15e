// What is particular to the hash store: its timeouts.
#include <thread>

#include "store_test_util.h"

namespace tn::dist {
namespace {

TEST(HashStore, ZeroTimeoutMeansNoLimitAsInC10d) {
  auto store = make_hash_store(Milliseconds::zero());
  std::thread setter([&] {
    std::this_thread::sleep_for(50ms);
    store->set("late", bytes_of("1"));
  });
  EXPECT_EQ(text_of(store->get("late")), "1");
  setter.join();
}

TEST(HashStore, HugeTimeoutDoesNotOverflow) {
  auto store = make_hash_store(Milliseconds::max());
  store->set("key", bytes_of("1"));
  EXPECT_EQ(text_of(store->get("key")), "1");
  store->wait({"key"}, Milliseconds::max());
}

}  // namespace
}  // namespace tn::dist
