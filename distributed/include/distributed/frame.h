// The wire format between ranks: every message is one fixed-size header and `length` bytes of
// payload. There is no checksum (TCP has one); the header's magic, version, kind, source and
// length are checked before a byte of payload is accepted.
//
// Public because the wire format is the contract between ranks (and between versions of this
// library, see kFrameVersion): a program or test that plays a rank speaks it directly.
#pragma once

#include <cstdint>
#include <string>

namespace tn::dist {

inline constexpr uint32_t kFrameMagic = 0x47504e54;  // "TNPG" little-endian
// 2: deadline_reduce (and a star's large reduce) stream at root's pace, with ready and credit
// frames, so a rank of version 1 would not be understood.
// 3: a full mesh opens a second connection per peer (a hello with slot 1), which a rank of
// version 2 would refuse.
inline constexpr uint16_t kFrameVersion = 3;
// Larger than any buffer a rank may send (256 MiB tested); a header announcing more is malformed.
inline constexpr uint64_t kMaxFrameBytes = uint64_t{1} << 40;

enum class FrameKind : uint8_t { Hello = 1, Collective = 2, PointToPoint = 3, Abort = 4 };

enum class Collective : uint8_t {
  None = 0,
  Allreduce,
  Broadcast,
  Reduce,
  Allgather,
  Gather,
  Scatter,
  ReduceScatter,
  Alltoall,
  Barrier,
  DeadlineReduce,
};
const char* collective_name(Collective collective);

// What a collective's frames carry so that ranks calling different collectives, or the same
// one with different sizes, dtypes, ops or roots, are told so instead of mixing data.
struct Signature {
  Collective collective = Collective::None;
  int8_t dtype = 0;
  uint8_t reduce_op = 0;
  uint8_t reserved = 0;
  int32_t root = -1;
  uint64_t count = 0;  // elements per rank (alltoall: total elements this rank sends)
  bool operator==(const Signature&) const = default;
};
std::string describe(const Signature& signature);

struct FrameHeader {
  uint32_t magic = kFrameMagic;
  uint16_t version = kFrameVersion;
  FrameKind kind = FrameKind::Collective;
  uint8_t reserved = 0;
  int32_t source = 0;
  // Distinguishes the frames one rank sends another within one operation (phase and segment).
  uint32_t slot = 0;
  // Collective: the operation's sequence number in the group. PointToPoint: the user's tag.
  // Hello: the group's session token.
  uint64_t tag = 0;
  Signature signature;
  uint64_t length = 0;
};
static_assert(sizeof(FrameHeader) == 48, "the header is part of the wire format");

// Empty when the header is acceptable from `expected_source`, otherwise why not.
std::string check_header(const FrameHeader& header, int expected_source, int world_size);

}  // namespace tn::dist
