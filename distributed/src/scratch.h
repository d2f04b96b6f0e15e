// Scratch memory that operations and the transport receive into: uninitialized, shared (an
// in-flight receive keeps it alive) and recycled across operations.
#pragma once

#include <cstdint>
#include <memory>

namespace tn::dist {

std::shared_ptr<uint8_t[]> scratch(uint64_t bytes);

}  // namespace tn::dist
