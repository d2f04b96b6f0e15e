// What is particular to the file store: sharing between processes, locks, cleanup.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store_test_util.h"

namespace tn::dist {
namespace {

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

}  // namespace
}  // namespace tn::dist
