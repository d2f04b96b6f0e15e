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

// The vectorized lambdas of upstream's cpu_kernel_vec kernels, lane by lane over n
// packed elements (see cpu_kernel_vec in common.h for which elements take them).
void vml_logaddexp(const double* a, const double* b, double* out, int64_t n);
void vml_logaddexp(const float* a, const float* b, float* out, int64_t n);
// elu with upstream's coefficients: negcoef = alpha * scale, poscoef = scale,
// negiptcoef = input_scale, each in the storage type.
void vml_elu(const double* x, double* out, int64_t n, double negcoef, double poscoef, double negiptcoef);
void vml_elu(const float* x, float* out, int64_t n, float negcoef, float poscoef, float negiptcoef);

}  // namespace tn
