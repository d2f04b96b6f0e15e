// Files that survive kill -9 and power loss: written under a temporary name, fsynced, renamed
// into place, and the directory fsynced, so a file either exists complete under its final name or
// not at all (an interrupted write leaves at most a temporary or unreferenced file, which
// StateStore::open deletes). Plus reading with a size check, BLAKE2b-256, and the directory lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tn::server::detail {

// BLAKE2b-256 (libsodium crypto_generichash, no key) as 64 lowercase hex digits.
std::string blake2b_256_hex(std::span<const std::byte> bytes);

struct WrittenFile {
  std::string blake2b_256_hex;
  uint64_t byte_size = 0;
};

// Makes the directory's entries (files created, renamed or deleted in it) durable.
void fsync_directory(const std::filesystem::path& directory);

// Creates `directory` (and missing parents), fsyncing each parent whose entries changed, so that
// a file later made durable inside it cannot vanish with the directory after a power loss.
void create_directories_durably(const std::filesystem::path& directory);

// Writes the concatenation of `pieces` to directory/name: first to a temporary name in the same
// directory (".tmp-<name>"), fsync, rename over directory/name, fsync the directory. Hashes as it
// writes.
WrittenFile write_file_durably(const std::filesystem::path& directory, const std::string& name,
                               std::span<const std::span<const std::byte>> pieces);

// The whole file, refused (CorruptFile naming `path`) when it is missing, unreadable or not
// `expected_size` bytes long (checked before reading, so a wrong size costs nothing).
std::shared_ptr<const std::vector<std::byte>> read_file(const std::filesystem::path& path,
                                                        uint64_t expected_size);

// An exclusive flock on directory/LOCK for the object's lifetime: two coordinators on one state
// directory would each delete the other's in-flight files as orphans. Refuses (Conflict) when held.
class DirectoryLock {
 public:
  explicit DirectoryLock(const std::filesystem::path& directory);
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;
  ~DirectoryLock();

 private:
  int descriptor_ = -1;
};

}  // namespace tn::server::detail
