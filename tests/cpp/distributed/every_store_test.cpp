// The c10d semantics every store shares, run against each store (hash, file, prefix and TCP,
// as master and as client).
#include <functional>
#include <memory>
#include <thread>
#include <utility>

#include "store_test_util.h"

namespace tn::dist {
namespace {

// Opens another handle on the same store: a handle sees the keys set through any other.
using HandleOpener = std::function<std::shared_ptr<Store>()>;

struct StoreCase {
  std::string name;
  std::function<HandleOpener(const TempDir&)> prepare;
};

// Names the case in test output, instead of dumping its bytes.
void PrintTo(const StoreCase& store_case, std::ostream* out) { *out << store_case.name; }

class EveryStore : public testing::TestWithParam<StoreCase> {
 protected:
  void SetUp() override {
    open_handle_ = GetParam().prepare(temp_dir_);
    store_ = open_handle_();
  }
  void TearDown() override {
    store_.reset();
    open_handle_ = nullptr;
  }

  TempDir temp_dir_;
  HandleOpener open_handle_;
  std::shared_ptr<Store> store_;
};

TEST_P(EveryStore, SetThenGet) {
  store_->set("key", bytes_of("value"));
  EXPECT_EQ(text_of(store_->get("key")), "value");
  store_->set("key", bytes_of("overwritten"));
  EXPECT_EQ(text_of(store_->get("key")), "overwritten");
}

TEST_P(EveryStore, ValuesAreBinaryAndMayBeEmpty) {
  const Bytes binary{0, 255, 0, 10, 13};
  store_->set("binary", binary);
  store_->set("empty", {});
  EXPECT_EQ(store_->get("binary"), binary);
  EXPECT_TRUE(store_->get("empty").empty());
}

TEST_P(EveryStore, GetWaitsForASetFromAnotherThread) {
  auto other = open_handle_();
  std::thread setter([&] {
    std::this_thread::sleep_for(50ms);
    other->set("late", bytes_of("arrived"));
  });
  EXPECT_EQ(text_of(store_->get("late")), "arrived");
  setter.join();
}

TEST_P(EveryStore, GetTimesOutNamingTheKey) {
  store_->set_timeout(kShortTimeout);
  const auto start = Clock::now();
  const std::string message = message_of<TimeoutError>([&] { store_->get("never_set"); });
  const auto elapsed = Clock::now() - start;
  EXPECT_NE(message.find("timed out"), std::string::npos) << message;
  // A prefix store names the key as its inner store knows it, "<prefix>/never_set".
  EXPECT_NE(message.find("never_set'"), std::string::npos) << message;
  EXPECT_NE(message.find("200 ms"), std::string::npos) << message;
  EXPECT_GE(elapsed, kShortTimeout - 10ms);
  EXPECT_LT(elapsed, 2s);
}

TEST_P(EveryStore, AddKeepsDecimalDigits) {
  EXPECT_EQ(store_->add("counter", 5), 5);
  EXPECT_EQ(text_of(store_->get("counter")), "5");
  EXPECT_EQ(store_->add("counter", -7), -2);
  EXPECT_EQ(text_of(store_->get("counter")), "-2");
  EXPECT_EQ(store_->add("counter", 0), -2);
  store_->set("preset", bytes_of("40"));
  EXPECT_EQ(store_->add("preset", 2), 42);
}

TEST_P(EveryStore, AddRejectsValuesThatAreNotIntegers) {
  store_->set("text", bytes_of("abc"));
  EXPECT_THROW(store_->add("text", 1), InvalidArgument);
  EXPECT_EQ(text_of(store_->get("text")), "abc");
  store_->set("huge", bytes_of(std::to_string(INT64_MAX)));
  EXPECT_THROW(store_->add("huge", 1), InvalidArgument);
}

TEST_P(EveryStore, CompareSetInAllThreeCases) {
  // Absent key, empty expectation: stores the desired value.
  EXPECT_EQ(text_of(store_->compare_set("key", {}, bytes_of("first"))), "first");
  EXPECT_EQ(text_of(store_->get("key")), "first");
  // Absent key, some expectation: returns the expectation and stores nothing.
  EXPECT_EQ(text_of(store_->compare_set("absent", bytes_of("guess"), bytes_of("x"))), "guess");
  EXPECT_FALSE(store_->check({"absent"}));
  // Present key that matches: swapped.
  EXPECT_EQ(text_of(store_->compare_set("key", bytes_of("first"), bytes_of("second"))), "second");
  // Present key that does not match: returns the current value, unchanged.
  EXPECT_EQ(text_of(store_->compare_set("key", bytes_of("wrong"), bytes_of("third"))), "second");
  EXPECT_EQ(text_of(store_->get("key")), "second");
}

TEST_P(EveryStore, CheckDoesNotWait) {
  EXPECT_FALSE(store_->check({"a"}));
  store_->set("a", bytes_of("1"));
  EXPECT_TRUE(store_->check({"a"}));
  EXPECT_FALSE(store_->check({"a", "b"}));
  store_->set("b", bytes_of("2"));
  EXPECT_TRUE(store_->check({"a", "b"}));
  EXPECT_TRUE(store_->check({}));
}

TEST_P(EveryStore, WaitReturnsOnceAllKeysExist) {
  auto other = open_handle_();
  std::thread setter([&] {
    other->set("first", bytes_of("1"));
    std::this_thread::sleep_for(30ms);
    other->set("second", bytes_of("2"));
  });
  store_->wait({"first", "second"}, kGenerousTimeout);
  setter.join();
  EXPECT_TRUE(store_->check({"first", "second"}));
}

TEST_P(EveryStore, WaitTimesOutNamingOnlyTheMissingKeys) {
  store_->set("present", bytes_of("1"));
  const auto start = Clock::now();
  const std::string message = message_of<TimeoutError>([&] {
    store_->wait({"present", "missing1", "missing2"}, kShortTimeout);
  });
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_NE(message.find("wait timed out after 200 ms"), std::string::npos) << message;
  EXPECT_NE(message.find("missing1', '"), std::string::npos) << message;
  EXPECT_NE(message.find("missing2'"), std::string::npos) << message;
  EXPECT_EQ(message.find("present'"), std::string::npos) << message;
}

TEST_P(EveryStore, NegativeTimeoutIsInvalid) {
  EXPECT_THROW(store_->wait({"x"}, Milliseconds(-1)), InvalidArgument);
}

TEST_P(EveryStore, DeleteKey) {
  store_->set("doomed", bytes_of("1"));
  EXPECT_TRUE(store_->delete_key("doomed"));
  EXPECT_FALSE(store_->check({"doomed"}));
  // Deleting an absent key: false, except that upstream's FileStore always answers true.
  EXPECT_EQ(store_->delete_key("doomed"), GetParam().name == "File");
  store_->set("doomed", bytes_of("again"));
  EXPECT_EQ(text_of(store_->get("doomed")), "again");
}

TEST_P(EveryStore, NumKeys) {
  const int64_t before = store_->num_keys();
  store_->set("one", bytes_of("1"));
  store_->set("two", bytes_of("2"));
  store_->add("three", 3);
  store_->set("one", bytes_of("overwritten"));
  EXPECT_EQ(store_->num_keys(), before + 3);
  store_->delete_key("two");
  EXPECT_EQ(store_->num_keys(), before + 2);
}

TEST_P(EveryStore, ConcurrentAddsFromManyThreadsAllCount) {
  constexpr int kThreads = 4;
  constexpr int kAddsPerThread = 25;
  std::vector<std::thread> threads;
  for (int thread = 0; thread < kThreads; ++thread) {
    threads.emplace_back([&, thread] {
      // Half the threads share the test's handle, half have their own.
      auto handle = thread % 2 == 0 ? store_ : open_handle_();
      for (int add = 0; add < kAddsPerThread; ++add) handle->add("shared", 1);
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(text_of(store_->get("shared")), std::to_string(kThreads * kAddsPerThread));
}

HandleOpener same_object(std::shared_ptr<Store> store) {
  return [store] { return store; };
}

const StoreCase kStoreCases[] = {
    {"Hash", [](const TempDir&) { return same_object(make_hash_store(kGenerousTimeout)); }},
    {"File",
     [](const TempDir& dir) -> HandleOpener {
       return [path = dir.file("store")] { return make_file_store(path, std::nullopt, kGenerousTimeout); };
     }},
    {"PrefixOverHash",
     [](const TempDir&) -> HandleOpener {
       auto inner = make_hash_store(kGenerousTimeout);
       return [inner] { return make_prefix_store("group", inner); };
     }},
    {"TcpMaster",
     [](const TempDir&) -> HandleOpener {
       // The first handle is the master itself; the others are its clients.
       auto master = tcp_master();
       return [master, opened = std::make_shared<bool>(false)]() -> std::shared_ptr<Store> {
         if (!std::exchange(*opened, true)) return master;
         return tcp_client(tcp_store_port(*master));
       };
     }},
    {"TcpClient",
     [](const TempDir&) -> HandleOpener {
       auto master = tcp_master();
       return [master] { return tcp_client(tcp_store_port(*master)); };
     }},
    {"PrefixOverTcp",
     [](const TempDir&) -> HandleOpener {
       auto master = tcp_master();
       return [master] { return make_prefix_store("group", tcp_client(tcp_store_port(*master))); };
     }},
};

INSTANTIATE_TEST_SUITE_P(Stores, EveryStore, testing::ValuesIn(kStoreCases),
                         [](const testing::TestParamInfo<StoreCase>& info) { return info.param.name; });

}  // namespace
}  // namespace tn::dist
