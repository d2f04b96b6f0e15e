#include "distributed/frame.h"

#include <iterator>

#include "core/enum_name.h"
#include "core/scalar_type.h"
#include "distributed/process_group.h"

namespace tn::dist {

const char* collective_name(Collective collective) {
  // In the enum's order.
  static constexpr const char* kNames[] = {"none",      "allreduce", "broadcast",      "reduce",
                                           "allgather", "gather",    "scatter",        "reduce_scatter",
                                           "alltoall",  "barrier",   "deadline_reduce"};
  static_assert(std::size(kNames) == static_cast<size_t>(Collective::DeadlineReduce) + 1);
  return enum_name(collective, kNames, "unknown collective");
}

std::string describe(const Signature& signature) {
  std::string text = collective_name(signature.collective);
  if (signature.collective == Collective::Barrier) return text;
  text += "(" + std::string(scalar_type_name(static_cast<ScalarType>(signature.dtype))) + ", " +
          std::to_string(signature.count) + " elements";
  switch (signature.collective) {
    case Collective::Allreduce:
    case Collective::Reduce:
    case Collective::ReduceScatter:
    case Collective::DeadlineReduce:
      text += std::string(", ") + reduce_op_name(static_cast<ReduceOp>(signature.reduce_op));
      break;
    default:
      break;
  }
  if (signature.root >= 0) text += ", root " + std::to_string(signature.root);
  return text + ")";
}

std::string check_header(const FrameHeader& header, int expected_source, int world_size) {
  if (header.magic != kFrameMagic) return "bad magic (not a torchnative frame)";
  if (header.version != kFrameVersion)
    return "protocol version " + std::to_string(header.version) + ", this rank speaks " +
           std::to_string(kFrameVersion);
  if (header.kind != FrameKind::Collective && header.kind != FrameKind::PointToPoint &&
      header.kind != FrameKind::Abort && header.kind != FrameKind::Hello)
    return "unknown frame kind " + std::to_string(static_cast<int>(header.kind));
  if (header.source < 0 || header.source >= world_size)
    return "source rank " + std::to_string(header.source) + " outside the group";
  if (expected_source >= 0 && header.source != expected_source)
    return "frame claims source rank " + std::to_string(header.source) + " on rank " +
           std::to_string(expected_source) + "'s connection";
  if (header.length > kMaxFrameBytes)
    return "announced length " + std::to_string(header.length) + " too large";
  return {};
}

}  // namespace tn::dist
