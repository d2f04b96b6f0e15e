#include "durable_files.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "server/state_errors.h"

namespace tn::server::detail {

namespace {

constexpr size_t kDigestBytes = 32;
constexpr std::string_view kTemporaryPrefix = ".tmp-";

std::string system_error(const std::string& what, const std::filesystem::path& path) {
  return what + " " + path.string() + ": " + std::strerror(errno);
}

std::string to_hex(const unsigned char* bytes, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * size);
  for (size_t i = 0; i < size; ++i) {
    hex += kDigits[bytes[i] >> 4];
    hex += kDigits[bytes[i] & 15];
  }
  return hex;
}

// Closes the descriptor on every path out, including exceptions.
class FileDescriptor {
 public:
  explicit FileDescriptor(int descriptor) : descriptor_(descriptor) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (descriptor_ >= 0) ::close(descriptor_);
  }
  int get() const { return descriptor_; }
  // close() reports write-back errors on some file systems, so a file is closed explicitly
  // (and checked) before it is renamed into place.
  int close() {
    const int result = ::close(descriptor_);
    descriptor_ = -1;
    return result;
  }

 private:
  int descriptor_;
};

void write_all(int descriptor, std::span<const std::byte> bytes, const std::filesystem::path& path) {
  while (!bytes.empty()) {
    const ssize_t written = ::write(descriptor, bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      throw StateError(system_error("cannot write", path));
    }
    bytes = bytes.subspan(size_t(written));
  }
}

}  // namespace

void fsync_directory(const std::filesystem::path& directory) {
  FileDescriptor descriptor(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (descriptor.get() < 0) throw StateError(system_error("cannot open directory", directory));
  if (::fsync(descriptor.get()) != 0) throw StateError(system_error("cannot fsync directory", directory));
}

std::string blake2b_256_hex(std::span<const std::byte> bytes) {
  unsigned char digest[kDigestBytes];
  crypto_generichash(digest, sizeof digest, reinterpret_cast<const unsigned char*>(bytes.data()),
                     bytes.size(), nullptr, 0);
  return to_hex(digest, sizeof digest);
}

void create_directories_durably(const std::filesystem::path& directory) {
  if (std::filesystem::is_directory(directory)) return;
  const std::filesystem::path parent = directory.parent_path();
  if (!parent.empty()) create_directories_durably(parent);
  if (::mkdir(directory.c_str(), 0755) != 0 && errno != EEXIST)
    throw StateError(system_error("cannot create directory", directory));
  fsync_directory(parent.empty() ? std::filesystem::path(".") : parent);
}

WrittenFile write_file_durably(const std::filesystem::path& directory, const std::string& name,
                               std::span<const std::span<const std::byte>> pieces) {
  const std::filesystem::path temporary = directory / (std::string(kTemporaryPrefix) + name);
  const std::filesystem::path final_path = directory / name;
  FileDescriptor file(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (file.get() < 0) throw StateError(system_error("cannot create", temporary));
  crypto_generichash_state hash;
  crypto_generichash_init(&hash, nullptr, 0, kDigestBytes);
  WrittenFile written;
  for (std::span<const std::byte> piece : pieces) {
    write_all(file.get(), piece, temporary);
    crypto_generichash_update(&hash, reinterpret_cast<const unsigned char*>(piece.data()), piece.size());
    written.byte_size += piece.size();
  }
  if (::fsync(file.get()) != 0) throw StateError(system_error("cannot fsync", temporary));
  if (file.close() != 0) throw StateError(system_error("cannot close", temporary));
  if (::rename(temporary.c_str(), final_path.c_str()) != 0)
    throw StateError(system_error("cannot rename " + temporary.string() + " to", final_path));
  fsync_directory(directory);
  unsigned char digest[kDigestBytes];
  crypto_generichash_final(&hash, digest, sizeof digest);
  written.blake2b_256_hex = to_hex(digest, sizeof digest);
  return written;
}

std::shared_ptr<const std::vector<std::byte>> read_file(const std::filesystem::path& path,
                                                        uint64_t expected_size) {
  FileDescriptor file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (file.get() < 0)
    throw CorruptFile(path.string(), std::string("cannot be opened: ") + std::strerror(errno));
  struct stat status {};
  if (::fstat(file.get(), &status) != 0)
    throw CorruptFile(path.string(), std::string("cannot be examined: ") + std::strerror(errno));
  if (!S_ISREG(status.st_mode)) throw CorruptFile(path.string(), "is not a regular file");
  if (uint64_t(status.st_size) != expected_size)
    throw CorruptFile(path.string(), "is " + std::to_string(status.st_size) +
                                         " bytes, the database recorded " + std::to_string(expected_size));
  auto bytes = std::make_shared<std::vector<std::byte>>(expected_size);
  size_t filled = 0;
  while (filled < bytes->size()) {
    const ssize_t got = ::read(file.get(), bytes->data() + filled, bytes->size() - filled);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw CorruptFile(path.string(), std::string("cannot be read: ") + std::strerror(errno));
    if (got == 0)
      throw CorruptFile(path.string(), "ended after " + std::to_string(filled) + " of " +
                                           std::to_string(expected_size) + " bytes");
    filled += size_t(got);
  }
  return bytes;
}

DirectoryLock::DirectoryLock(const std::filesystem::path& directory) {
  const std::filesystem::path path = directory / "LOCK";
  descriptor_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (descriptor_ < 0) throw StateError(system_error("cannot open", path));
  if (::flock(descriptor_, LOCK_EX | LOCK_NB) != 0) {
    const bool held = errno == EWOULDBLOCK;
    const std::string message = held
                                    ? "state directory " + directory.string() +
                                          " is in use by another StateStore (" + path.string() + " is locked)"
                                    : system_error("cannot lock", path);
    ::close(descriptor_);
    if (held) throw Conflict(message);
    throw StateError(message);
  }
}

DirectoryLock::~DirectoryLock() { ::close(descriptor_); }

}  // namespace tn::server::detail
