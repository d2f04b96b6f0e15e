// Rendezvous stores: the c10d semantics every store shares, then what is particular to the
// prefix, file and TCP stores (sharing between processes, cleanup, a master and its clients,
// hostile bytes on the master's port).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <thread>

#include "distributed/store.h"
#include "test_support.h"

namespace tn::dist {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Long enough that nothing expected to succeed ever times out, even under sanitizers.
constexpr Milliseconds kGenerousTimeout = 5s;
// Short enough to keep the timeout tests fast.
constexpr Milliseconds kShortTimeout = 200ms;

Bytes bytes_of(const std::string& text) { return Bytes(text.begin(), text.end()); }
std::string text_of(const Bytes& bytes) { return std::string(bytes.begin(), bytes.end()); }

using tn::test::message_of;

// A directory of its own for each test's files, removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tn_store_test_XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// A TCP port on which nothing listens (bound once by us, then released).
uint16_t unused_port() {
  const int descriptor = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ::bind(descriptor, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  ::getsockname(descriptor, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(descriptor);
  return ntohs(address.sin_port);
}

std::shared_ptr<Store> tcp_master(std::optional<int> world_size = std::nullopt, uint16_t port = 0,
                                  Milliseconds timeout = kGenerousTimeout) {
  TCPStoreOptions options;
  options.is_master = true;
  options.port = port;
  options.world_size = world_size;
  options.timeout = timeout;
  return make_tcp_store(options);
}

std::shared_ptr<Store> tcp_client(uint16_t port, std::optional<int> world_size = std::nullopt,
                                  Milliseconds timeout = kGenerousTimeout) {
  TCPStoreOptions options;
  options.port = port;
  options.world_size = world_size;
  options.timeout = timeout;
  return make_tcp_store(options);
}

// ---------------------------------------------------------------------------------------------
// Semantics shared by every store

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

// ---------------------------------------------------------------------------------------------
// Prefix store

TEST(PrefixStore, KeysAreIsolatedByPrefix) {
  auto inner = make_hash_store(kShortTimeout);
  auto alpha = make_prefix_store("alpha", inner);
  auto beta = make_prefix_store("beta", inner);
  alpha->set("key", bytes_of("a"));
  beta->set("key", bytes_of("b"));
  EXPECT_EQ(text_of(alpha->get("key")), "a");
  EXPECT_EQ(text_of(beta->get("key")), "b");
  EXPECT_EQ(text_of(inner->get("alpha/key")), "a");
  EXPECT_FALSE(inner->check({"key"}));
  alpha->set("only_alpha", bytes_of("1"));
  EXPECT_FALSE(beta->check({"only_alpha"}));
  EXPECT_THROW(beta->get("only_alpha"), TimeoutError);
}

TEST(PrefixStore, PrefixesNest) {
  auto inner = make_hash_store(kGenerousTimeout);
  auto outer = make_prefix_store("b", make_prefix_store("a", inner));
  outer->add("n", 1);
  EXPECT_EQ(text_of(inner->get("a/b/n")), "1");
}

TEST(PrefixStore, PrefixOfAndInnerOf) {
  auto inner = make_hash_store();
  auto prefixed = make_prefix_store("group", inner);
  EXPECT_EQ(prefix_of(*prefixed), "group");
  EXPECT_EQ(inner_of(*prefixed), inner);
  EXPECT_EQ(prefix_of(*inner), "");
  EXPECT_EQ(inner_of(*inner), nullptr);
}

TEST(PrefixStore, UsesItsOwnTimeout) {
  auto inner = make_hash_store(kGenerousTimeout);
  auto prefixed = make_prefix_store("group", inner);
  prefixed->set_timeout(kShortTimeout);
  const auto start = Clock::now();
  const std::string message = message_of<TimeoutError>([&] { prefixed->get("missing"); });
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_NE(message.find("'group/missing'"), std::string::npos) << message;
}

TEST(PrefixStore, NullInnerIsInvalid) { EXPECT_THROW(make_prefix_store("p", nullptr), InvalidArgument); }

// ---------------------------------------------------------------------------------------------
// File store

TEST(FileStore, TwoObjectsOnOnePathShareKeys) {
  TempDir dir;
  auto first = make_file_store(dir.file("store"), std::nullopt, kGenerousTimeout);
  auto second = make_file_store(dir.file("store"), std::nullopt, kGenerousTimeout);
  first->set("from_first", bytes_of("1"));
  EXPECT_EQ(text_of(second->get("from_first")), "1");
  second->add("counter", 2);
  EXPECT_EQ(first->add("counter", 3), 5);
  EXPECT_TRUE(second->delete_key("from_first"));
  EXPECT_FALSE(first->check({"from_first"}));
  EXPECT_EQ(first->num_keys(), 1);
}

TEST(FileStore, SharedWithAForkedChildProcess) {
  TempDir dir;
  const std::string path = dir.file("store");
  auto parent = make_file_store(path, std::nullopt, kGenerousTimeout);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child never returns into the test framework: it reports through its exit status.
    int status = 1;
    try {
      auto store = make_file_store(path, std::nullopt, kGenerousTimeout);
      store->set("from_child", bytes_of("hello"));
      status = text_of(store->get("from_parent")) == "hi" ? 0 : 2;
      store->add("finished", 1);
    } catch (...) {
      status = 3;
    }
    ::_exit(status);
  }
  parent->set("from_parent", bytes_of("hi"));
  EXPECT_EQ(text_of(parent->get("from_child")), "hello");
  parent->wait({"finished"}, kGenerousTimeout);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The child has left; the parent is the last user and removes the file.
  EXPECT_TRUE(std::filesystem::exists(path));
  parent.reset();
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(FileStore, LastUserRemovesTheFile) {
  TempDir dir;
  const std::string path = dir.file("store");
  auto first = make_file_store(path, std::nullopt, kGenerousTimeout);
  auto second = make_file_store(path, std::nullopt, kGenerousTimeout);
  first->set("key", bytes_of("1"));
  first.reset();
  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_EQ(text_of(second->get("key")), "1");
  second.reset();
  EXPECT_FALSE(std::filesystem::exists(path));
}

// A process that holds the file's lock and never lets go (stopped, or not a store at all) makes
// operations time out naming the file, instead of blocking them forever.
TEST(FileStore, ALockNeverReleasedTimesOutNamingTheFile) {
  TempDir dir;
  const std::string path = dir.file("store");
  auto store = make_file_store(path, std::nullopt, std::chrono::milliseconds(300));
  store->set("key", bytes_of("1"));
  const int holder = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(holder, 0);
  ASSERT_EQ(::flock(holder, LOCK_EX), 0);
  const auto start = std::chrono::steady_clock::now();
  try {
    store->set("other", bytes_of("2"));
    FAIL() << "set went through a lock held elsewhere";
  } catch (const TimeoutError& error) {
    EXPECT_NE(std::string(error.what()).find(path), std::string::npos) << error.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  ::close(holder);
  EXPECT_EQ(text_of(store->get("key")), "1");  // usable again once the lock is free
}

TEST(FileStore, NumUsersThUserRemovesTheFile) {
  TempDir dir;
  const std::string path = dir.file("store");
  auto first = make_file_store(path, 2, kGenerousTimeout);
  auto second = make_file_store(path, 2, kGenerousTimeout);
  first.reset();
  EXPECT_TRUE(std::filesystem::exists(path));
  second.reset();
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(FileStore, AFileRemovedUnderneathStartsOver) {
  TempDir dir;
  const std::string path = dir.file("store");
  auto store = make_file_store(path, std::nullopt, kShortTimeout);
  store->set("key", bytes_of("1"));
  std::filesystem::remove(path);
  EXPECT_FALSE(store->check({"key"}));
  store->set("key", bytes_of("2"));
  EXPECT_EQ(text_of(store->get("key")), "2");
}

TEST(FileStore, BadArguments) {
  TempDir dir;
  EXPECT_THROW(make_file_store("", std::nullopt), InvalidArgument);
  EXPECT_THROW(make_file_store(dir.file("store"), 0), InvalidArgument);
  const std::string message =
      message_of<DistError>([&] { make_file_store(dir.file("no_such_dir/store"), std::nullopt); });
  EXPECT_NE(message.find("no_such_dir"), std::string::npos) << message;
}

// ---------------------------------------------------------------------------------------------
// TCP store

TEST(TcpStore, PortZeroPicksARealPort) {
  auto master = tcp_master();
  const uint16_t port = tcp_store_port(*master);
  EXPECT_NE(port, 0);
  EXPECT_EQ(tcp_store_host(*master), "127.0.0.1");
  auto client = tcp_client(port);
  EXPECT_EQ(tcp_store_port(*client), port);
  EXPECT_THROW(tcp_store_port(*make_hash_store()), InvalidArgument);
}

TEST(TcpStore, MasterAndManyClientsInThreads) {
  auto master = tcp_master();
  const uint16_t port = tcp_store_port(*master);
  constexpr int kClients = 6;
  std::vector<std::thread> threads;
  std::vector<std::string> rank_keys;
  for (int rank = 0; rank < kClients; ++rank) rank_keys.push_back("rank/" + std::to_string(rank));
  std::atomic<int> failures = 0;
  for (int rank = 0; rank < kClients; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        auto client = tcp_client(port);
        for (int add = 0; add < 10; ++add) client->add("counter", 1);
        client->set(rank_keys[rank], bytes_of(std::to_string(rank)));
        client->wait(rank_keys);
        for (int peer = 0; peer < kClients; ++peer) {
          if (text_of(client->get(rank_keys[peer])) != std::to_string(peer)) ++failures;
        }
      } catch (const std::exception&) {
        ++failures;
      }
    });
  }
  master->wait(rank_keys);
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(text_of(master->get("counter")), std::to_string(kClients * 10));
}

TEST(TcpStore, MasterWaitsForWorkers) {
  const uint16_t port = unused_port();
  // The clients start first and retry until the master listens.
  std::vector<std::thread> workers;
  std::atomic<int> failures = 0;
  for (int worker = 0; worker < 2; ++worker) {
    workers.emplace_back([&] {
      try {
        tcp_client(port, 3)->set("joined", bytes_of("1"));
      } catch (const std::exception&) {
        ++failures;
      }
    });
  }
  std::this_thread::sleep_for(50ms);
  auto master = tcp_master(3, port);
  for (auto& worker : workers) worker.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(text_of(master->get("init/")), "3");
  // Like c10d's, num_keys counts the workers' counter.
  EXPECT_EQ(master->num_keys(), 2);
}

TEST(TcpStore, MasterTimesOutWaitingForMissingWorkers) {
  const auto start = Clock::now();
  const std::string message = message_of<TimeoutError>([] { tcp_master(3, 0, kShortTimeout); });
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_NE(message.find("timed out"), std::string::npos) << message;
  EXPECT_NE(message.find("1 of 3"), std::string::npos) << message;
}

TEST(TcpStore, ClientTimesOutWhenNoServerListens) {
  const uint16_t port = unused_port();
  const auto start = Clock::now();
  const std::string message =
      message_of<TimeoutError>([&] { tcp_client(port, std::nullopt, kShortTimeout); });
  const auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, kShortTimeout - 10ms);
  EXPECT_LT(elapsed, 2s);
  EXPECT_NE(message.find("timed out"), std::string::npos) << message;
  EXPECT_NE(message.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << message;
}

TEST(TcpStore, ClientOfAGoneServerGetsPeerError) {
  auto master = tcp_master();
  const uint16_t port = tcp_store_port(*master);
  auto client = tcp_client(port);
  client->set("key", bytes_of("1"));
  master.reset();
  const std::string address = "127.0.0.1:" + std::to_string(port);
  const std::string message = message_of<PeerError>([&] { client->set("key", bytes_of("2")); });
  EXPECT_NE(message.find(address), std::string::npos) << message;
  const std::string again = message_of<PeerError>([&] { client->get("key"); });
  EXPECT_NE(again.find(address), std::string::npos) << again;
}

TEST(TcpStore, ServerStopsWhileAClientWaits) {
  auto master = tcp_master();
  auto client = tcp_client(tcp_store_port(*master));
  std::thread stopper([&] {
    std::this_thread::sleep_for(100ms);
    master.reset();
  });
  const auto start = Clock::now();
  EXPECT_THROW(client->get("never_set"), PeerError);
  EXPECT_LT(Clock::now() - start, 2s);
  stopper.join();
}

TEST(TcpStore, TimedOutRequestsLeaveTheConnectionUsable) {
  auto master = tcp_master();
  auto client = tcp_client(tcp_store_port(*master));
  client->set_timeout(kShortTimeout);
  EXPECT_THROW(client->get("never_set"), TimeoutError);
  EXPECT_THROW(client->wait({"never_set"}, kShortTimeout), TimeoutError);
  // A key set after the timeouts must not be answered to the abandoned requests.
  master->set("never_set", bytes_of("late"));
  client->set("key", bytes_of("value"));
  EXPECT_EQ(text_of(client->get("key")), "value");
  EXPECT_EQ(client->add("counter", 4), 4);
  EXPECT_EQ(text_of(client->get("never_set")), "late");
}

TEST(TcpStore, BadOptions) {
  TCPStoreOptions no_port;
  EXPECT_THROW(make_tcp_store(no_port), InvalidArgument);
  TCPStoreOptions bad_world;
  bad_world.is_master = true;
  bad_world.world_size = 0;
  EXPECT_THROW(make_tcp_store(bad_world), InvalidArgument);
}

// A raw connection to the master's port, for sending what no client would.
class RawConnection {
 public:
  explicit RawConnection(uint16_t port) : descriptor_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(descriptor_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
      throw std::runtime_error("raw connect failed");
    }
    timeval receive_timeout{.tv_sec = 3, .tv_usec = 0};
    ::setsockopt(descriptor_, SOL_SOCKET, SO_RCVTIMEO, &receive_timeout, sizeof(receive_timeout));
  }
  ~RawConnection() { ::close(descriptor_); }

  void send(const Bytes& bytes) { ::send(descriptor_, bytes.data(), bytes.size(), MSG_NOSIGNAL); }

  // True when the server closed the connection (rather than leaving it open past 3 s).
  bool closed_by_server() {
    uint8_t byte = 0;
    const ssize_t received = ::recv(descriptor_, &byte, 1, 0);
    return received == 0 || (received < 0 && errno == ECONNRESET);
  }

 private:
  int descriptor_;
};

Bytes frame_header(uint64_t body_bytes) {
  Bytes header;
  for (int byte = 0; byte < 8; ++byte) header.push_back(static_cast<uint8_t>(body_bytes >> (8 * byte)));
  return header;
}

class TcpStoreUnderAttack : public testing::Test {
 protected:
  void expect_still_serving() {
    auto client = tcp_client(port_);
    client->set("after", bytes_of("ok"));
    EXPECT_EQ(text_of(master_->get("after")), "ok");
  }

  std::shared_ptr<Store> master_ = tcp_master();
  uint16_t port_ = tcp_store_port(*master_);
};

TEST_F(TcpStoreUnderAttack, GarbageBytesCloseOnlyThatConnection) {
  auto bystander = tcp_client(port_);
  RawConnection attacker(port_);
  attacker.send(bytes_of("GET / HTTP/1.1\r\nHost: example\r\n\r\nthis is not a store request"));
  EXPECT_TRUE(attacker.closed_by_server());
  bystander->set("bystander", bytes_of("fine"));
  EXPECT_EQ(text_of(bystander->get("bystander")), "fine");
  expect_still_serving();
}

TEST_F(TcpStoreUnderAttack, HugeAnnouncedLengthIsRefused) {
  RawConnection attacker(port_);
  attacker.send(frame_header(UINT64_MAX));
  EXPECT_TRUE(attacker.closed_by_server());
  RawConnection almost_within_limits(port_);
  almost_within_limits.send(frame_header(uint64_t{8} << 30));
  EXPECT_TRUE(almost_within_limits.closed_by_server());
  expect_still_serving();
}

TEST_F(TcpStoreUnderAttack, MalformedBodiesAreRefused) {
  // An unknown request type.
  RawConnection unknown_type(port_);
  Bytes frame = frame_header(1);
  frame.push_back(200);
  unknown_type.send(frame);
  EXPECT_TRUE(unknown_type.closed_by_server());
  // A set (type 1) whose key announces more bytes than the body holds.
  RawConnection cut_short(port_);
  frame = frame_header(9);
  frame.push_back(1);
  const Bytes key_length = frame_header(1000);
  frame.insert(frame.end(), key_length.begin(), key_length.end());
  cut_short.send(frame);
  EXPECT_TRUE(cut_short.closed_by_server());
  // A connection that hangs up halfway through a frame.
  {
    RawConnection quitter(port_);
    quitter.send(frame_header(100));
  }
  expect_still_serving();
}

}  // namespace
}  // namespace tn::dist
