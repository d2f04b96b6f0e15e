// Errors of the distributed library. Each names what failed, so a caller never has to
// guess which rank or which operation a failure belongs to.
#pragma once

#include <stdexcept>
#include <string>

namespace tn::dist {

struct DistError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A wait ran past its deadline (c10d raises these as RuntimeError mentioning "timed out").
struct TimeoutError : DistError {
  using DistError::DistError;
};
// A peer died, disconnected or sent something the protocol does not allow.
struct PeerError : DistError {
  using DistError::DistError;
};
// Ranks called different collectives, or the same one with different sizes, dtypes or ops.
struct MismatchError : DistError {
  using DistError::DistError;
};
// The caller's own arguments are invalid (wrong rank, wrong buffer count, unsupported dtype/op).
struct InvalidArgument : DistError {
  using DistError::DistError;
};

}  // namespace tn::dist
