// Error classes of the project's core: each mirrors the Python exception it becomes
// at the binding layer.
#pragma once

#include <stdexcept>
#include <string>

namespace tn {

// Error classes mirror the Python exception each one becomes at the binding layer.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct TypeError : Error {
  using Error::Error;
};
struct IndexError : Error {
  using Error::Error;
};
struct ValueError : Error {
  using Error::Error;
};
struct NotImplemented : Error {
  using Error::Error;
};
// Reading or writing the elements of a meta tensor, which has none (core/storage.h).
struct MetaDataAccess : NotImplemented {
  using NotImplemented::NotImplemented;
};
// A LAPACK routine's failure on its input (singular, not positive-definite): torch._C._LinAlgError.
struct LinAlgError : Error {
  using Error::Error;
};

[[noreturn]] inline void fail(const std::string& message) { throw Error(message); }

}  // namespace tn
