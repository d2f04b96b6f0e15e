// The container of torch.save's default format: an uncompressed zip archive whose records all
// live under one folder ("<archive>/data.pkl", "<archive>/data/0", "<archive>/version"), each
// record's bytes aligned to 64 bytes. Knows nothing of tensors or Python.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace tn::serialize {

// A malformed, truncated or corrupt archive, or a misuse of the writer; the message names the
// record and what is wrong with it.
struct ArchiveError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class ArchiveWriter {
 public:
  // Receives the archive's bytes in order; it must take all of them or throw.
  using Sink = std::function<void(const void* data, size_t size)>;
  ArchiveWriter(std::string archive_name, Sink sink);

  // Records are written as they come; `name` is relative to the archive folder.
  void write_record(const std::string& name, const void* data, size_t size);
  // Adds the "version" record unless one was written, then the central directory.
  void finish();
  void set_min_version(uint64_t version);
  bool finished() const { return finished_; }
  const std::string& archive_name() const { return archive_name_; }
  std::vector<std::string> written_records() const;

 private:
  struct Entry {
    std::string name;  // full name inside the zip, with the archive folder
    uint64_t size;
    uint32_t crc;
    uint64_t local_header_offset;
  };
  void emit(const void* data, size_t size);
  std::string archive_name_;
  Sink sink_;
  uint64_t cursor_ = 0;
  uint64_t version_ = 3;  // upstream 1.13 writes format version 3 unless told more
  std::vector<Entry> entries_;
  bool finished_ = false;
};

class ArchiveReader {
 public:
  // Reads `size` bytes at `offset` into `into`; returns how many it could read (fewer at the end).
  using Source = std::function<size_t(uint64_t offset, void* into, size_t size)>;
  ArchiveReader(Source source, uint64_t archive_size);

  const std::string& archive_name() const { return archive_name_; }
  std::vector<std::string> records() const;  // relative names, in archive order
  bool has_record(const std::string& name) const;
  uint64_t record_size(const std::string& name) const;
  // Reads a record whole into `into` (record_size bytes) and checks its CRC-32.
  void read_record(const std::string& name, void* into) const;
  // The file format version the archive declares ("version" or ".data/version").
  uint64_t version() const { return version_; }

 private:
  struct Entry {
    uint64_t size;
    uint32_t crc;
    uint64_t local_header_offset;
  };
  const Entry& entry(const std::string& name) const;
  void read_exactly(uint64_t offset, void* into, size_t size, const char* what) const;
  // Where the central directory is, from the end record (zip64's when a field overflows).
  struct Directory {
    uint64_t count, size, offset;
  };
  Directory locate_directory() const;
  Directory read_zip64_end(uint64_t end_offset) const;
  void read_directory(const Directory& directory);
  void read_version();
  Source source_;
  uint64_t archive_size_;
  std::string archive_name_;
  std::vector<std::string> order_;
  std::map<std::string, Entry> entries_;
  uint64_t version_ = 0;
};

}  // namespace tn::serialize
