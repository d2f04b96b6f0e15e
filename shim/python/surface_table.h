// The generated list of torch._C's surface (see shim/codegen/gen_surface.py).
#pragma once

#include <cstddef>

namespace tn::py {

struct SurfaceRow {
  const char* module;  // "torch._C", "torch._C._autograd", ...
  const char* owner;   // class name for methods/members, "" at module level
  const char* name;
  const char* kind;  // function, class, enum, method, member, attribute
};

extern const SurfaceRow kSurfaceTable[];
extern const size_t kSurfaceTableSize;

}  // namespace tn::py
