// Errors of the federated library. Every message names what is refused and why, so a
// coordinator can pass it on to the device or the operator unchanged.
#pragma once

#include <stdexcept>
#include <string>

namespace tn::federated {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Something a caller supplied was refused: an update, a parameter, a checkpoint.
struct Refused : Error {
  using Error::Error;
};

// A device's update was refused. `reason` lets a server choose its answer (a late update is
// not the same fault as a corrupt one) without parsing the message.
struct UpdateRefused : Refused {
  enum class Reason {
    Malformed,     // names, shapes, dtypes or byte counts do not match the model
    NonFinite,     // a NaN or an infinity
    TooLarge,      // over the configured byte limit
    BadExamples,   // example count not positive or over the limit
    WrongRound,    // another round's update: late, early or replayed
    WrongVersion,  // trained on another model version
    NotSelected,   // the device was not selected for this round
    Duplicate,     // the device already contributed to this round
    RoundClosed,   // the deadline passed or the round has all the updates it wants
  };
  UpdateRefused(Reason why, const std::string& message) : Refused(message), reason(why) {}
  Reason reason;
};

// A configuration or strategy parameter (or a saved state that does not fit) was refused.
struct ParameterRefused : Refused {
  using Refused::Refused;
};

// The strategy cannot do what was asked, e.g. aggregate from a weighted sum when it needs
// the individual updates.
struct Unsupported : Error {
  using Error::Error;
};

// The aggregate could not be formed, e.g. it overflows the tensor's dtype. The model and the
// strategy's state are left as they were.
struct AggregationFailed : Error {
  using Error::Error;
};

// A call that the current state does not allow (submitting with no open round, ...).
struct StateError : Error {
  using Error::Error;
};

// A task gave up: a round was abandoned more often than its retry limit allows.
struct TaskFailed : Error {
  using Error::Error;
};

}  // namespace tn::federated
