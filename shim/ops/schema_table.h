// The generated table of upstream's operator schemas (see shim/codegen/gen_schemas.py).
#pragma once

#include <cstddef>

namespace tn {

struct SchemaTableRow {
  const char* schema;
  unsigned variants;  // bit 0: function, bit 1: Tensor method
  const char* python_module;
  const char* dispatch_keys;  // comma separated
};

extern const SchemaTableRow kSchemaTable[];
extern const size_t kSchemaTableSize;

}  // namespace tn
