// Upstream's vectorized math functions (SLEEF, AVX2) for the "*_vml_cpu" kernels.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tn {

enum class VmlOp {
  Exp,
  Expm1,
  Log,
  Log2,
  Log10,
  Log1p,
  Sin,
  Cos,
  Tan,
  Asin,
  Acos,
  Atan,
  Tanh,
  Erf,
  Erfc,
  Lgamma
};

// True when this CPU runs the AVX2 variants (as upstream's dispatch would pick).
bool vml_available();
void vml_apply(VmlOp op, const double* in, double* out, int64_t n);
void vml_apply(VmlOp op, const float* in, float* out, int64_t n);

}  // namespace tn
