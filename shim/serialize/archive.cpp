#include "archive.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>

namespace tn::serialize {

namespace {

constexpr uint32_t kLocalHeaderSignature = 0x04034b50;
constexpr uint32_t kCentralHeaderSignature = 0x02014b50;
constexpr uint32_t kEndSignature = 0x06054b50;
constexpr uint32_t kEnd64Signature = 0x06064b50;
constexpr uint32_t kEnd64LocatorSignature = 0x07064b50;
constexpr size_t kLocalHeaderSize = 30;
constexpr size_t kCentralHeaderSize = 46;
constexpr size_t kEndSize = 22;
constexpr size_t kEnd64Size = 56;
constexpr size_t kEnd64LocatorSize = 20;
constexpr uint32_t kMax32 = 0xFFFFFFFF;
constexpr uint16_t kMax16 = 0xFFFF;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint16_t kPaddingExtraId = 0x4246;  // "FB": upstream's alignment padding
constexpr uint64_t kAlignment = 64;           // record data starts on this boundary, as upstream's
// Readers accept what upstream 1.13 reads: versions 1 to 10.
constexpr uint64_t kMinReadableVersion = 1;
constexpr uint64_t kMaxReadableVersion = 10;
constexpr uint16_t kDosDate1980 = (0 << 9) | (1 << 5) | 1;  // 1980-01-01: deterministic output

uint32_t crc32_of(const void* data, size_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* bytes = static_cast<const Bytef*>(data);
  while (size > 0) {  // zlib takes uInt lengths
    auto step = uInt(std::min<size_t>(size, std::numeric_limits<uInt>::max()));
    crc = crc32(crc, bytes, step);
    bytes += step;
    size -= step;
  }
  return uint32_t(crc);
}

// Little-endian field writer and bounds-checked reader over a byte buffer.
struct Bytes {
  std::string data;
  void u16(uint64_t v) { put(v, 2); }
  void u32(uint64_t v) { put(v, 4); }
  void u64(uint64_t v) { put(v, 8); }
  void text(const std::string& s) { data += s; }
  void put(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) data.push_back(char((v >> (8 * i)) & 0xFF));
  }
};

struct Cursor {
  const uint8_t* data;
  size_t size;
  size_t at = 0;
  const char* what;
  uint64_t get(int n) {
    if (at + size_t(n) > size)
      throw ArchiveError(std::string("PytorchStreamReader failed reading ") + what + ": truncated");
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t(data[at + size_t(i)]) << (8 * i);
    at += size_t(n);
    return v;
  }
  uint16_t u16() { return uint16_t(get(2)); }
  uint32_t u32() { return uint32_t(get(4)); }
  uint64_t u64() { return get(8); }
  std::string text(size_t n) {
    if (at + n > size)
      throw ArchiveError(std::string("PytorchStreamReader failed reading ") + what + ": truncated");
    std::string s(reinterpret_cast<const char*>(data + at), n);
    at += n;
    return s;
  }
};

}  // namespace

// ---- writer ----

ArchiveWriter::ArchiveWriter(std::string archive_name, Sink sink)
    : archive_name_(std::move(archive_name)), sink_(std::move(sink)) {}

void ArchiveWriter::emit(const void* data, size_t size) {
  sink_(data, size);
  cursor_ += size;
}

void ArchiveWriter::set_min_version(uint64_t version) { version_ = std::max(version_, version); }

std::vector<std::string> ArchiveWriter::written_records() const {
  std::vector<std::string> names;
  for (const Entry& e : entries_) names.push_back(e.name.substr(archive_name_.size() + 1));
  return names;
}

void ArchiveWriter::write_record(const std::string& name, const void* data, size_t size) {
  if (finished_) throw ArchiveError("cannot write record " + name + ": the archive is already finished");
  std::string full = archive_name_ + "/" + name;
  for (const Entry& e : entries_)
    if (e.name == full) throw ArchiveError("Tried to serialize file twice: " + name);
  if (full.size() > kMax16) throw ArchiveError("record name too long: " + name);
  uint32_t crc = crc32_of(data, size);
  bool size64 = size >= kMax32, offset64 = cursor_ >= kMax32;
  Bytes zip64;
  if (size64 || offset64) {
    Bytes fields;
    if (size64) {
      fields.u64(size);
      fields.u64(size);
    }
    if (offset64) fields.u64(cursor_);
    zip64.u16(kZip64ExtraId);
    zip64.u16(fields.data.size());
    zip64.text(fields.data);
  }
  // Pad the extra field so the data starts on a 64-byte boundary (readers may map it directly).
  uint64_t start = cursor_ + kLocalHeaderSize + full.size() + zip64.data.size() + 4;
  uint64_t padding = (kAlignment - start % kAlignment) % kAlignment;
  Bytes header;
  header.u32(kLocalHeaderSignature);
  header.u16(size64 || offset64 ? 45 : 20);  // version needed: 4.5 for zip64
  header.u16(0);                             // flags: sizes and CRC are in this header
  header.u16(0);                             // stored
  header.u16(0);                             // time
  header.u16(kDosDate1980);
  header.u32(crc);
  header.u32(size64 ? kMax32 : size);
  header.u32(size64 ? kMax32 : size);
  header.u16(full.size());
  header.u16(zip64.data.size() + 4 + padding);
  header.text(full);
  header.text(zip64.data);
  header.u16(kPaddingExtraId);
  header.u16(padding);
  header.text(std::string(padding, 'Z'));
  Entry entry{full, size, crc, cursor_};
  emit(header.data.data(), header.data.size());
  if (size > 0) emit(data, size);
  entries_.push_back(std::move(entry));
}

void ArchiveWriter::finish() {
  if (finished_) return;
  bool has_version = false;
  for (const Entry& e : entries_) {
    std::string relative = e.name.substr(archive_name_.size() + 1);
    has_version = has_version || relative == "version" || relative == ".data/version";
  }
  if (!has_version) {
    std::string version = std::to_string(version_) + "\n";
    write_record(version_ >= 6 ? ".data/version" : "version", version.data(), version.size());
  }
  uint64_t directory_offset = cursor_;
  Bytes directory;
  for (const Entry& e : entries_) {
    bool size64 = e.size >= kMax32, offset64 = e.local_header_offset >= kMax32;
    Bytes fields;
    if (size64) {
      fields.u64(e.size);
      fields.u64(e.size);
    }
    if (offset64) fields.u64(e.local_header_offset);
    Bytes extra;
    if (!fields.data.empty()) {
      extra.u16(kZip64ExtraId);
      extra.u16(fields.data.size());
      extra.text(fields.data);
    }
    directory.u32(kCentralHeaderSignature);
    directory.u16(size64 || offset64 ? 45 : 20);  // made by
    directory.u16(size64 || offset64 ? 45 : 20);  // needed
    directory.u16(0);
    directory.u16(0);
    directory.u16(0);
    directory.u16(kDosDate1980);
    directory.u32(e.crc);
    directory.u32(size64 ? kMax32 : e.size);
    directory.u32(size64 ? kMax32 : e.size);
    directory.u16(e.name.size());
    directory.u16(extra.data.size());
    directory.u16(0);  // comment
    directory.u16(0);  // disk
    directory.u16(0);  // internal attributes
    directory.u32(0);  // external attributes
    directory.u32(offset64 ? kMax32 : e.local_header_offset);
    directory.text(e.name);
    directory.text(extra.data);
  }
  uint64_t directory_size = directory.data.size();
  emit(directory.data.data(), directory.data.size());
  bool end64 = entries_.size() >= kMax16 || directory_offset >= kMax32 || directory_size >= kMax32;
  Bytes end;
  if (end64) {
    uint64_t end64_offset = cursor_;
    end.u32(kEnd64Signature);
    end.u64(kEnd64Size - 12);
    end.u16(45);
    end.u16(45);
    end.u32(0);
    end.u32(0);
    end.u64(entries_.size());
    end.u64(entries_.size());
    end.u64(directory_size);
    end.u64(directory_offset);
    end.u32(kEnd64LocatorSignature);
    end.u32(0);
    end.u64(end64_offset);
    end.u32(1);
  }
  end.u32(kEndSignature);
  end.u16(0);
  end.u16(0);
  end.u16(end64 ? kMax16 : entries_.size());
  end.u16(end64 ? kMax16 : entries_.size());
  end.u32(end64 ? kMax32 : directory_size);
  end.u32(end64 ? kMax32 : directory_offset);
  end.u16(0);
  emit(end.data.data(), end.data.size());
  finished_ = true;
}

// ---- reader ----

void ArchiveReader::read_exactly(uint64_t offset, void* into, size_t size, const char* what) const {
  if (offset > archive_size_ || size > archive_size_ - offset || source_(offset, into, size) != size)
    throw ArchiveError(std::string("PytorchStreamReader failed reading ") + what +
                       ": the archive is truncated (it ends before byte " + std::to_string(offset + size) +
                       ")");
}

ArchiveReader::ArchiveReader(Source source, uint64_t archive_size)
    : source_(std::move(source)), archive_size_(archive_size) {
  read_directory(locate_directory());
  read_version();
}

ArchiveReader::Directory ArchiveReader::locate_directory() const {
  // The end record is in the last 22 + 65535 (comment) bytes.
  if (archive_size_ < kEndSize)
    throw ArchiveError("PytorchStreamReader failed reading zip archive: failed finding central directory");
  size_t tail_size = size_t(std::min<uint64_t>(archive_size_, kEndSize + kMax16));
  std::vector<uint8_t> tail(tail_size);
  read_exactly(archive_size_ - tail_size, tail.data(), tail_size, "zip archive");
  std::optional<size_t> end_at;
  for (size_t i = tail_size - kEndSize + 1; i-- > 0;) {
    Cursor probe{tail.data() + i, kEndSize, 0, "zip archive"};
    if (probe.u32() == kEndSignature) {
      end_at = i;
      break;
    }
  }
  if (!end_at)
    throw ArchiveError("PytorchStreamReader failed reading zip archive: failed finding central directory");
  Cursor end{tail.data() + *end_at, kEndSize, 4, "zip archive"};
  end.u16();
  end.u16();
  uint64_t count = end.u16();
  end.u16();
  uint64_t directory_size = end.u32();
  uint64_t directory_offset = end.u32();
  uint64_t end_offset = archive_size_ - tail_size + *end_at;
  if (count == kMax16 || directory_size == kMax32 || directory_offset == kMax32)
    return read_zip64_end(end_offset);
  return {count, directory_size, directory_offset};
}

ArchiveReader::Directory ArchiveReader::read_zip64_end(uint64_t end_offset) const {
  if (end_offset < kEnd64LocatorSize)
    throw ArchiveError("PytorchStreamReader failed reading zip archive: bad zip64 locator");
  uint8_t locator_bytes[kEnd64LocatorSize];
  read_exactly(end_offset - kEnd64LocatorSize, locator_bytes, kEnd64LocatorSize, "zip archive");
  Cursor locator{locator_bytes, kEnd64LocatorSize, 0, "zip archive"};
  if (locator.u32() != kEnd64LocatorSignature)
    throw ArchiveError("PytorchStreamReader failed reading zip archive: bad zip64 locator");
  locator.u32();
  uint64_t end64_offset = locator.u64();
  uint8_t end64_bytes[kEnd64Size];
  read_exactly(end64_offset, end64_bytes, kEnd64Size, "zip archive");
  Cursor end64{end64_bytes, kEnd64Size, 0, "zip archive"};
  if (end64.u32() != kEnd64Signature)
    throw ArchiveError("PytorchStreamReader failed reading zip archive: bad zip64 end record");
  end64.text(20);
  Directory directory;
  directory.count = end64.u64();
  end64.u64();
  directory.size = end64.u64();
  directory.offset = end64.u64();
  return directory;
}

void ArchiveReader::read_directory(const Directory& where) {
  const uint64_t count = where.count, directory_size = where.size, directory_offset = where.offset;
  // Untrusted sizes: the directory must lie inside the archive and hold at least its entries.
  if (directory_offset > archive_size_ || directory_size > archive_size_ - directory_offset ||
      count > directory_size / kCentralHeaderSize)
    throw ArchiveError(
        "PytorchStreamReader failed reading zip archive: the central directory is out of bounds");
  std::vector<uint8_t> directory(directory_size);
  read_exactly(directory_offset, directory.data(), directory.size(), "zip archive");
  Cursor at{directory.data(), directory.size(), 0, "zip archive central directory"};
  for (uint64_t i = 0; i < count; ++i) {
    if (at.u32() != kCentralHeaderSignature)
      throw ArchiveError("PytorchStreamReader failed reading zip archive: bad central directory entry " +
                         std::to_string(i));
    at.u16();
    at.u16();
    uint16_t flags = at.u16();
    uint16_t method = at.u16();
    at.u32();
    uint32_t crc = at.u32();
    uint64_t compressed = at.u32();
    uint64_t size = at.u32();
    size_t name_size = at.u16(), extra_size = at.u16(), comment_size = at.u16();
    at.u16();
    at.u16();
    at.u32();
    uint64_t offset = at.u32();
    std::string name = at.text(name_size);
    Cursor extra{directory.data() + at.at, std::min(extra_size, directory.size() - at.at), 0,
                 "zip archive central directory"};
    at.text(extra_size);
    at.text(comment_size);
    while (extra.at + 4 <= extra.size) {
      uint16_t id = extra.u16();
      size_t field_size = extra.u16();
      Cursor field{extra.data + extra.at, std::min(field_size, extra.size - extra.at), 0,
                   "zip64 extra field"};
      extra.at += field.size;
      if (id != kZip64ExtraId) continue;
      if (size == kMax32) size = field.u64();
      if (compressed == kMax32) compressed = field.u64();
      if (offset == kMax32) offset = field.u64();
    }
    if (flags & 1) throw ArchiveError("PytorchStreamReader: record " + name + " is encrypted");
    if (method != 0 || compressed != size)
      throw ArchiveError("PytorchStreamReader: record " + name + " is compressed (method " +
                         std::to_string(method) +
                         "); only stored records are read, as torch.save writes them");
    auto slash = name.find('/');
    if (slash == std::string::npos) throw ArchiveError("file in archive is not in a subdirectory: " + name);
    if (archive_name_.empty() && entries_.empty()) archive_name_ = name.substr(0, slash);
    if (name.substr(0, slash) != archive_name_)
      throw ArchiveError("PytorchStreamReader: record " + name + " is not under the archive folder " +
                         archive_name_);
    std::string relative = name.substr(slash + 1);
    if (!entries_.emplace(relative, Entry{size, crc, offset}).second)
      throw ArchiveError("PytorchStreamReader: record " + relative + " appears twice");
    order_.push_back(relative);
  }
}

void ArchiveReader::read_version() {
  const char* version_name = has_record(".data/version") ? ".data/version" : "version";
  if (!has_record(version_name))
    throw ArchiveError("PytorchStreamReader failed locating file version: file not found");
  if (record_size(version_name) > 32)
    throw ArchiveError("PytorchStreamReader: the version record is too long");
  std::string text(record_size(version_name), '\0');
  read_record(version_name, text.data());
  try {
    size_t used = 0;
    version_ = std::stoull(text, &used);
    if (text.find_first_not_of(" \n\r", used) != std::string::npos) throw std::invalid_argument(text);
  } catch (const std::exception&) {
    throw ArchiveError("PytorchStreamReader: the version record is not a number: " + text);
  }
  if (version_ < kMinReadableVersion || version_ > kMaxReadableVersion)
    throw ArchiveError("Attempted to read a PyTorch file with version " + std::to_string(version_) +
                       ", but the supported versions are " + std::to_string(kMinReadableVersion) + " to " +
                       std::to_string(kMaxReadableVersion));
}

std::vector<std::string> ArchiveReader::records() const { return order_; }

bool ArchiveReader::has_record(const std::string& name) const { return entries_.count(name) != 0; }

const ArchiveReader::Entry& ArchiveReader::entry(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end())
    throw ArchiveError("PytorchStreamReader failed locating file " + name + ": file not found");
  return it->second;
}

uint64_t ArchiveReader::record_size(const std::string& name) const { return entry(name).size; }

void ArchiveReader::read_record(const std::string& name, void* into) const {
  const Entry& e = entry(name);
  uint8_t header_bytes[kLocalHeaderSize];
  std::string what = "file " + name;
  read_exactly(e.local_header_offset, header_bytes, kLocalHeaderSize, what.c_str());
  Cursor header{header_bytes, kLocalHeaderSize, 0, what.c_str()};
  if (header.u32() != kLocalHeaderSignature)
    throw ArchiveError("PytorchStreamReader failed reading file " + name + ": bad local header");
  header.text(22);
  uint64_t name_size = header.u16(), extra_size = header.u16();
  read_exactly(e.local_header_offset + kLocalHeaderSize + name_size + extra_size, into, e.size, what.c_str());
  if (crc32_of(into, e.size) != e.crc)
    throw ArchiveError("PytorchStreamReader failed reading file " + name +
                       ": CRC-32 mismatch (the file is corrupt)");
}

}  // namespace tn::serialize
