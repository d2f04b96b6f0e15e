// c10d's FileStore: the processes of one machine share an append-only log of records in one
// file. Every operation takes flock on the file, replays the records it has not seen yet into
// a local cache, and appends its own record when it changes something. The log also records
// users joining and leaving, so the last user to leave can remove the file.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <system_error>
#include <thread>

#include "distributed/store.h"
#include "store_common.h"

namespace tn::dist {
namespace {

using Clock = std::chrono::steady_clock;

// Other processes' writes become visible only by polling the file; waits re-read it at growing
// intervals up to this one.
constexpr Milliseconds kMaxPollInterval{10};

enum class RecordKind : uint8_t { kSet = 1, kDelete = 2, kUserJoined = 3, kUserLeft = 4 };

std::string errno_message() { return std::generic_category().message(errno); }

void append_u64(Bytes& out, uint64_t value) {
  for (int byte = 0; byte < 8; ++byte) out.push_back(static_cast<uint8_t>(value >> (8 * byte)));
}

void append_field(Bytes& out, const uint8_t* data, size_t size) {
  append_u64(out, size);
  out.insert(out.end(), data, data + size);
}

Bytes encode_record(RecordKind kind, const std::string& key = {}, const Bytes& value = {}) {
  Bytes record{static_cast<uint8_t>(kind)};
  if (kind == RecordKind::kSet || kind == RecordKind::kDelete) {
    append_field(record, reinterpret_cast<const uint8_t*>(key.data()), key.size());
  }
  if (kind == RecordKind::kSet) append_field(record, value.data(), value.size());
  return record;
}

// Reads records out of the unread tail of the log; a record cut short is one still being
// written (or never finished), so it is left for a later read.
class RecordParser {
 public:
  explicit RecordParser(const Bytes& tail) : tail_(tail) {}

  size_t consumed() const { return consumed_; }

  // Calls on_record(kind, key, value) for each complete record.
  template <typename OnRecord>
  void parse(const std::string& path, uint64_t tail_offset, OnRecord&& on_record) {
    for (;;) {
      size_t position = consumed_;
      if (position >= tail_.size()) return;
      const auto kind = static_cast<RecordKind>(tail_[position++]);
      std::string key;
      Bytes value;
      switch (kind) {
        case RecordKind::kSet:
        case RecordKind::kDelete: {
          const uint8_t* key_bytes = nullptr;
          size_t key_size = 0;
          if (!take_field(position, key_bytes, key_size)) return;
          key.assign(reinterpret_cast<const char*>(key_bytes), key_size);
          if (kind == RecordKind::kSet) {
            const uint8_t* value_bytes = nullptr;
            size_t value_size = 0;
            if (!take_field(position, value_bytes, value_size)) return;
            value.assign(value_bytes, value_bytes + value_size);
          }
          break;
        }
        case RecordKind::kUserJoined:
        case RecordKind::kUserLeft:
          break;
        default:
          throw DistError("file store '" + path + "' is corrupt: unknown record at offset " +
                          std::to_string(tail_offset + consumed_));
      }
      consumed_ = position;
      on_record(kind, key, value);
    }
  }

 private:
  bool take_field(size_t& position, const uint8_t*& data, size_t& size) const {
    if (tail_.size() - position < 8) return false;
    uint64_t announced = 0;
    for (int byte = 0; byte < 8; ++byte) announced |= uint64_t{tail_[position + byte]} << (8 * byte);
    if (announced > tail_.size() - position - 8) return false;
    data = tail_.data() + position + 8;
    size = announced;
    position += 8 + announced;
    return true;
  }

  const Bytes& tail_;
  size_t consumed_ = 0;
};

// An open descriptor of the store's file holding a flock; closing it releases the lock.
class LockedFile {
 public:
  explicit LockedFile(int descriptor) : descriptor_(descriptor) {}
  ~LockedFile() { ::close(descriptor_); }
  LockedFile(const LockedFile&) = delete;
  LockedFile& operator=(const LockedFile&) = delete;
  int descriptor() const { return descriptor_; }

 private:
  int descriptor_;
};

class FileStore final : public Store {
 public:
  FileStore(std::string path, std::optional<int> num_users, Milliseconds timeout)
      : Store(timeout), path_(std::move(path)), num_users_(num_users) {
    if (path_.empty()) throw InvalidArgument("make_file_store: the path is empty");
    if (num_users_ && *num_users_ <= 0) {
      throw InvalidArgument("make_file_store: num_users must be positive, got " +
                            std::to_string(*num_users_));
    }
    const auto file = lock_file(LOCK_EX);
    refresh(*file);
    append(*file, encode_record(RecordKind::kUserJoined));
  }

  // The last user to leave (or the num_users-th, when given) removes the file, as in c10d.
  // Failures are swallowed: a destructor cannot report them and the file is only left behind.
  ~FileStore() override {
    try {
      const auto file = lock_file(LOCK_EX);
      refresh(*file);
      append(*file, encode_record(RecordKind::kUserLeft));
      refresh(*file);
      const bool all_left = users_left_ >= users_joined_;
      const bool num_users_left = num_users_ && users_left_ >= *num_users_;
      // Unlinking under the lock: users that opened the file meanwhile notice it is gone once
      // they hold the lock, and start over on a new file.
      if (all_left || num_users_left) ::unlink(path_.c_str());
    } catch (const std::exception&) {
    }
  }

  void set(const std::string& key, const Bytes& value) override {
    std::lock_guard lock(mutex_);
    const auto file = lock_file(LOCK_EX);
    refresh(*file);
    append(*file, encode_record(RecordKind::kSet, key, value));
    refresh(*file);
  }

  Bytes get(const std::string& key) override {
    Bytes value;
    poll_until_present({key}, timeout(), "get", [&] { value = cache_->get(key); });
    return value;
  }

  int64_t add(const std::string& key, int64_t delta) override {
    std::lock_guard lock(mutex_);
    const auto file = lock_file(LOCK_EX);
    refresh(*file);
    // The cache computes the sum with the hash store's parsing and overflow checks.
    const int64_t sum = cache_->add(key, delta);
    const std::string digits = std::to_string(sum);
    append(*file, encode_record(RecordKind::kSet, key, Bytes(digits.begin(), digits.end())));
    refresh(*file);
    return sum;
  }

  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    std::lock_guard lock(mutex_);
    const auto file = lock_file(LOCK_EX);
    refresh(*file);
    if (!cache_->check({key})) {
      if (!expected.empty()) return expected;
    } else if (Bytes current = cache_->get(key); current != expected) {
      return current;
    }
    append(*file, encode_record(RecordKind::kSet, key, desired));
    refresh(*file);
    return desired;
  }

  bool check(const std::vector<std::string>& keys) override {
    std::lock_guard lock(mutex_);
    refresh(*lock_file(LOCK_SH));
    return cache_->check(keys);
  }

  void wait(const std::vector<std::string>& keys, Milliseconds timeout) override {
    poll_until_present(keys, timeout, "wait", [] {});
  }

  // Upstream's FileStore answers true whether or not the key existed (it only appends a
  // deletion record); so does this one, to agree with it.
  bool delete_key(const std::string& key) override {
    std::lock_guard lock(mutex_);
    const auto file = lock_file(LOCK_EX);
    refresh(*file);
    if (cache_->check({key})) {
      append(*file, encode_record(RecordKind::kDelete, key));
      refresh(*file);
    }
    return true;
  }

  // Only the callers' keys: users joining and leaving are records, not keys.
  int64_t num_keys() override {
    std::lock_guard lock(mutex_);
    refresh(*lock_file(LOCK_SH));
    return cache_->num_keys();
  }

 private:
  // Opens and locks the file now at path_. Another user may remove the file between our open
  // and our lock; then the descriptor refers to a dead file and we start over. A lock another
  // process never lets go of (stopped, or a foreign program holding it) fails after the
  // store's timeout instead of blocking forever.
  std::unique_ptr<LockedFile> lock_file(int lock_operation) {
    const bool unlimited = unlimited_timeout(timeout());
    const auto deadline = unlimited ? Clock::time_point::max() : Clock::now() + timeout();
    for (;;) {
      const int descriptor = ::open(path_.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (descriptor < 0) throw DistError("file store cannot open '" + path_ + "': " + errno_message());
      auto file = std::make_unique<LockedFile>(descriptor);
      for (auto pause = std::chrono::microseconds(50); ::flock(descriptor, lock_operation | LOCK_NB) != 0;
           pause = std::min(pause * 2, std::chrono::microseconds(20000))) {
        if (errno != EWOULDBLOCK && errno != EINTR)
          throw DistError("file store cannot lock '" + path_ + "': " + errno_message());
        if (Clock::now() >= deadline)
          throw TimeoutError("file store could not lock '" + path_ + "' within " +
                             std::to_string(timeout().count()) + " ms: another process holds its lock");
        std::this_thread::sleep_for(pause);
      }
      struct stat opened {};
      struct stat at_path {};
      if (::fstat(descriptor, &opened) != 0) {
        throw DistError("file store cannot stat '" + path_ + "': " + errno_message());
      }
      if (::stat(path_.c_str(), &at_path) == 0 && at_path.st_dev == opened.st_dev &&
          at_path.st_ino == opened.st_ino) {
        return file;
      }
    }
  }

  // Replays the records appended since the last refresh. A different file at path_ (the old
  // one was removed) or a shorter one means a new log: the cache starts over.
  void refresh(const LockedFile& file) {
    struct stat status {};
    if (::fstat(file.descriptor(), &status) != 0) {
      throw DistError("file store cannot stat '" + path_ + "': " + errno_message());
    }
    const auto size = static_cast<uint64_t>(status.st_size);
    if (status.st_dev != device_ || status.st_ino != inode_ || size < replayed_bytes_) {
      device_ = status.st_dev;
      inode_ = status.st_ino;
      replayed_bytes_ = 0;
      users_joined_ = 0;
      users_left_ = 0;
      cache_ = make_hash_store();
    }
    Bytes tail(size - replayed_bytes_);
    size_t read_bytes = 0;
    while (read_bytes < tail.size()) {
      const ssize_t chunk = ::pread(file.descriptor(), tail.data() + read_bytes, tail.size() - read_bytes,
                                    static_cast<off_t>(replayed_bytes_ + read_bytes));
      if (chunk < 0 && errno == EINTR) continue;
      if (chunk < 0) throw DistError("file store cannot read '" + path_ + "': " + errno_message());
      if (chunk == 0) break;
      read_bytes += static_cast<size_t>(chunk);
    }
    tail.resize(read_bytes);
    RecordParser parser(tail);
    parser.parse(path_, replayed_bytes_, [this](RecordKind kind, const std::string& key, const Bytes& value) {
      switch (kind) {
        case RecordKind::kSet:
          cache_->set(key, value);
          break;
        case RecordKind::kDelete:
          cache_->delete_key(key);
          break;
        case RecordKind::kUserJoined:
          ++users_joined_;
          break;
        case RecordKind::kUserLeft:
          ++users_left_;
          break;
      }
    });
    replayed_bytes_ += parser.consumed();
  }

  // Appends one whole record. A failed write is cut back off, so the log never holds half a
  // record that every reader would wait on forever.
  void append(const LockedFile& file, const Bytes& record) {
    struct stat status {};
    if (::fstat(file.descriptor(), &status) != 0) {
      throw DistError("file store cannot stat '" + path_ + "': " + errno_message());
    }
    size_t written = 0;
    while (written < record.size()) {
      const ssize_t chunk = ::write(file.descriptor(), record.data() + written, record.size() - written);
      if (chunk < 0 && errno == EINTR) continue;
      if (chunk < 0) {
        const std::string reason = errno_message();
        if (::ftruncate(file.descriptor(), status.st_size) != 0) {
          throw DistError("file store '" + path_ + "' is corrupt after a failed write: " + reason);
        }
        throw DistError("file store cannot write '" + path_ + "': " + reason);
      }
      written += static_cast<size_t>(chunk);
    }
  }

  // Other processes cannot signal us, so waiting means re-reading the file until the keys
  // show up; on_present runs under the same lock that saw them all.
  template <typename OnPresent>
  void poll_until_present(const std::vector<std::string>& keys, Milliseconds timeout, const char* operation,
                          OnPresent&& on_present) {
    if (timeout < Milliseconds::zero()) {
      throw InvalidArgument(std::string(operation) + ": negative timeout of " +
                            std::to_string(timeout.count()) + " ms");
    }
    const bool unlimited = unlimited_timeout(timeout);
    const auto deadline = unlimited ? Clock::time_point::max() : Clock::now() + timeout;
    auto interval = Milliseconds(1);
    for (;;) {
      std::vector<std::string> missing;
      {
        std::lock_guard lock(mutex_);
        refresh(*lock_file(LOCK_SH));
        std::copy_if(keys.begin(), keys.end(), std::back_inserter(missing),
                     [this](const std::string& key) { return !cache_->check({key}); });
        if (missing.empty()) {
          on_present();
          return;
        }
      }
      const auto now = Clock::now();
      if (now >= deadline) {
        throw TimeoutError(std::string(operation) + " timed out after " + std::to_string(timeout.count()) +
                           " ms for key(s) " + quote_keys(missing));
      }
      std::this_thread::sleep_for(std::min<Clock::duration>(interval, deadline - now));
      interval = std::min(interval * 2, kMaxPollInterval);
    }
  }

  const std::string path_;
  const std::optional<int> num_users_;
  // Serializes this object's threads; flock only excludes other open descriptions of the file.
  std::mutex mutex_;
  std::shared_ptr<Store> cache_ = make_hash_store();
  // Which file the cache was replayed from, and how much of it.
  dev_t device_ = 0;
  ino_t inode_ = 0;
  uint64_t replayed_bytes_ = 0;
  int64_t users_joined_ = 0;
  int64_t users_left_ = 0;
};

}  // namespace

std::shared_ptr<Store> make_file_store(const std::string& path, std::optional<int> num_users,
                                       Milliseconds timeout) {
  return std::make_shared<FileStore>(path, num_users, timeout);
}

}  // namespace tn::dist
