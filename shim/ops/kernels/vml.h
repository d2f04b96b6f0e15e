// Upstream's vectorized math functions (SLEEF, AVX2) for the "*_vml_cpu" kernels.
#pragma once

#include <algorithm>
#include <cmath>
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

// GeluKernelImpl's constants, each its double expression rounded to T as upstream's.
template <typename T>
struct GeluConstants {
  static constexpr T alpha = T(M_SQRT1_2);                         // 1 / sqrt 2, erf's scale
  static constexpr T beta = T(M_SQRT2 * M_2_SQRTPI * 0.5);         // sqrt(2 / pi), the tanh form's
  static constexpr T kappa = T(0.044715);                          // the tanh form's cubic coefficient
  static constexpr T pdf_scale = T(M_2_SQRTPI * M_SQRT1_2 * 0.5);  // 1 / sqrt(2 pi)
};
// gelu (approximate 'none', or 'tanh' when `tanh`) and its gradient dy gelu'(x) as
// GeluKernelImpl's and GeluBackwardKernelImpl's vectorized lambdas.
void vml_gelu(const double* x, double* out, int64_t n, bool tanh);
void vml_gelu(const float* x, float* out, int64_t n, bool tanh);
void vml_gelu_backward(const double* dy, const double* x, double* out, int64_t n, bool tanh);
void vml_gelu_backward(const float* dy, const float* x, float* out, int64_t n, bool tanh);

// sigmoid, its gradient dy (1 - y) y from the result y, silu and its gradient as upstream's
// sigmoid, sigmoid_backward, silu and silu_backward kernels' vectorized lambdas.
void vml_sigmoid(const double* x, double* out, int64_t n);
void vml_sigmoid(const float* x, float* out, int64_t n);
void vml_sigmoid_backward(const double* dy, const double* y, double* out, int64_t n);
void vml_sigmoid_backward(const float* dy, const float* y, float* out, int64_t n);
void vml_silu(const double* x, double* out, int64_t n);
void vml_silu(const float* x, float* out, int64_t n);
void vml_silu_backward(const double* dy, const double* x, double* out, int64_t n);
void vml_silu_backward(const float* dy, const float* x, float* out, int64_t n);
// clamp by numbers as upstream's vectorized lambda (absent bounds infinite): x where it is NaN
// or equal to a bound; in place when out == x.
void vml_clamp(const double* x, double* out, int64_t n, double low, double high);
void vml_clamp(const float* x, float* out, int64_t n, float low, float high);
// hardtanh's gradient as upstream's vectorized lambda: dy where low < x < high, else 0.
void vml_hardtanh_backward(const double* dy, const double* x, double* out, int64_t n, double low,
                           double high);
void vml_hardtanh_backward(const float* dy, const float* x, float* out, int64_t n, float low, float high);

}  // namespace tn
