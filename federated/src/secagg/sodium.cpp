// libsodium's start-up for the SecAgg+ sources (secagg_internal.h).
#include "federated/errors.h"
#include "secagg_internal.h"

namespace tn::federated::secagg::detail {

void require_sodium() {
  // sodium_init() is idempotent and thread-safe; the static makes later calls free.
  static const bool started = sodium_init() >= 0;
  if (!started) throw Error("secure aggregation: libsodium could not be initialised");
}

}  // namespace tn::federated::secagg::detail
