// torch.save's zip container: round trips, and every damaged archive refused by name.
#include "archive.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace tn::serialize {
namespace {

std::string write_archive(const std::vector<std::pair<std::string, std::string>>& records) {
  std::string out;
  ArchiveWriter writer(
      "model", [&](const void* data, size_t size) { out.append(static_cast<const char*>(data), size); });
  for (const auto& [name, data] : records) writer.write_record(name, data.data(), data.size());
  writer.finish();
  return out;
}

ArchiveReader read_archive(const std::string& bytes) {
  return ArchiveReader(
      [&bytes](uint64_t offset, void* into, size_t size) {
        size_t n = offset >= bytes.size() ? 0 : std::min<size_t>(size, bytes.size() - offset);
        std::memcpy(into, bytes.data() + offset, n);
        return n;
      },
      bytes.size());
}

std::string record(const ArchiveReader& reader, const std::string& name) {
  std::string data(reader.record_size(name), '\0');
  reader.read_record(name, data.data());
  return data;
}

std::vector<std::pair<std::string, std::string>> sample_records() {
  std::mt19937 rng(7);
  std::string big(200000, '\0');
  for (char& c : big) c = char(rng());
  return {{"data.pkl", "pickle bytes"}, {"data/0", big}, {"data/1", ""}, {"data/2", std::string(63, 'x')}};
}

TEST(Archive, RoundTripsRecordsUnderTheArchiveFolderWithAlignedData) {
  auto records = sample_records();
  std::string bytes = write_archive(records);
  ArchiveReader reader = read_archive(bytes);
  EXPECT_EQ(reader.archive_name(), "model");
  EXPECT_EQ(reader.version(), 3u);
  std::vector<std::string> expected_names = {"data.pkl", "data/0", "data/1", "data/2", "version"};
  EXPECT_EQ(reader.records(), expected_names);
  for (const auto& [name, data] : records) EXPECT_EQ(record(reader, name), data) << name;
  EXPECT_EQ(record(reader, "version"), "3\n");
  EXPECT_FALSE(reader.has_record("data/3"));
  EXPECT_THROW(reader.record_size("data/3"), ArchiveError);
  // Each record's data starts on a 64-byte boundary: find the big record's first bytes.
  size_t at = bytes.find(records[1].second.substr(0, 64));
  ASSERT_NE(at, std::string::npos);
  EXPECT_EQ(at % 64, 0u);
}

TEST(Archive, WriterRefusesDuplicatesAndWritesAfterFinishing) {
  std::string out;
  ArchiveWriter writer(
      "a", [&](const void* data, size_t size) { out.append(static_cast<const char*>(data), size); });
  writer.write_record("x", "1", 1);
  EXPECT_THROW(writer.write_record("x", "2", 1), ArchiveError);
  writer.finish();
  EXPECT_THROW(writer.write_record("y", "3", 1), ArchiveError);
  writer.set_min_version(6);  // too late to matter, and harmless
  EXPECT_EQ(read_archive(out).version(), 3u);
}

TEST(Archive, VersionSixAndAboveGoesToDotDataVersion) {
  std::string out;
  ArchiveWriter writer(
      "a", [&](const void* data, size_t size) { out.append(static_cast<const char*>(data), size); });
  writer.set_min_version(6);
  writer.finish();
  ArchiveReader reader = read_archive(out);
  EXPECT_TRUE(reader.has_record(".data/version"));
  EXPECT_EQ(reader.version(), 6u);
}

TEST(Archive, EveryTruncationIsRefusedNeverMisread) {
  std::string bytes = write_archive({{"data.pkl", "abc"}, {"data/0", std::string(300, 'q')}});
  for (size_t keep = 0; keep < bytes.size(); ++keep) {
    std::string cut = bytes.substr(0, keep);
    EXPECT_THROW(
        {
          ArchiveReader reader = read_archive(cut);
          for (const std::string& name : reader.records()) record(reader, name);
        },
        ArchiveError)
        << "kept " << keep << " of " << bytes.size() << " bytes";
  }
}

TEST(Archive, AFlippedDataBitFailsTheCrcCheck) {
  std::string bytes = write_archive({{"data/0", std::string(1000, 'q')}});
  bytes[bytes.find(std::string(1000, 'q')) + 500] ^= 4;
  ArchiveReader reader = read_archive(bytes);
  try {
    record(reader, "data/0");
    FAIL() << "corrupt record was read";
  } catch (const ArchiveError& e) {
    EXPECT_NE(std::string(e.what()).find("data/0: CRC-32 mismatch"), std::string::npos) << e.what();
  }
}

TEST(Archive, RandomDamageIsEitherRefusedOrHarmless) {
  auto records = sample_records();
  std::string bytes = write_archive(records);
  std::mt19937 rng(11);
  for (int trial = 0; trial < 3000; ++trial) {
    std::string damaged = bytes;
    size_t at = rng() % damaged.size();
    damaged[at] = char(damaged[at] ^ (1 << (rng() % 8)));
    try {
      ArchiveReader reader = read_archive(damaged);
      for (const auto& [name, data] : records) {
        if (!reader.has_record(name)) continue;
        EXPECT_EQ(record(reader, name), data) << "byte " << at;
      }
    } catch (const ArchiveError&) {
      // refused by name: fine
    }
  }
}

TEST(Archive, GarbageAndForeignArchivesAreRefused) {
  EXPECT_THROW(read_archive(""), ArchiveError);
  EXPECT_THROW(read_archive(std::string(100, '\0')), ArchiveError);
  std::string no_version;
  ArchiveWriter writer(
      "a", [&](const void* data, size_t size) { no_version.append(static_cast<const char*>(data), size); });
  writer.write_record("version", "99\n", 3);  // a version upstream 1.13 cannot read
  writer.finish();
  try {
    read_archive(no_version);
    FAIL();
  } catch (const ArchiveError& e) {
    EXPECT_NE(std::string(e.what()).find("version 99"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tn::serialize
