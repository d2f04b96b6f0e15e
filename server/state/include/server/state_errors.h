// Errors of the coordinator's persistent state. Every message names the task, round, device
// or file concerned and what is wrong with it, so it can be logged or shown to an operator as is.
#pragma once

#include <stdexcept>
#include <string>

namespace tn::server {

struct StateError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A task, round, device or model version that does not exist.
struct NotFound : StateError {
  using StateError::StateError;
};

// The call contradicts what is stored: a duplicate id or public key, a round begun while another
// is open, a round number out of sequence, a task that is not running, a state directory that
// another process holds.
struct Conflict : StateError {
  using StateError::StateError;
};

// An argument that can never be stored: a malformed id, a public key that is not 32 bytes, a
// model whose byte counts disagree with its shapes, a round result that does not partition the
// selected devices.
struct InvalidArgument : StateError {
  using StateError::StateError;
};

// A stored file that is missing, truncated, corrupt, or whose size or hash differs from what the
// database recorded. The message is "<path>: <problem>".
struct CorruptFile : StateError {
  CorruptFile(std::string file, std::string what_is_wrong)
      : StateError(file + ": " + what_is_wrong), path(std::move(file)), problem(std::move(what_is_wrong)) {}
  std::string path;
  std::string problem;
};

// SQLite itself failed (I/O error, full disk, a constraint the checks above did not foresee).
struct DatabaseError : StateError {
  using StateError::StateError;
};

}  // namespace tn::server
