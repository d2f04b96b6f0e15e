// The vectorized math library upstream's "*_vml_cpu" kernels use on x86-64: every
// element of exp, log, sin, tanh, ... goes through SLEEF's 1-ulp AVX2 functions (the
// same Debian libsleef upstream links), so calling them here gives upstream's bits.
// This file alone is compiled for AVX2 (see shim/CMakeLists.txt); callers check
// vml_available(), defined in baseline code, before calling in.
#include "vml.h"

#include <immintrin.h>
#include <sleef.h>

#include <cstring>

namespace tn {

namespace {

using DoubleFn = __m256d (*)(__m256d);
using FloatFn = __m256 (*)(__m256);

struct VmlEntry {
  DoubleFn d;
  FloatFn f;
};

VmlEntry entry(VmlOp op) {
  switch (op) {
    case VmlOp::Exp:
      return {[](__m256d v) { return Sleef_expd4_u10(v); }, [](__m256 v) { return Sleef_expf8_u10(v); }};
    case VmlOp::Expm1:
      return {[](__m256d v) { return Sleef_expm1d4_u10(v); }, [](__m256 v) { return Sleef_expm1f8_u10(v); }};
    case VmlOp::Log:
      return {[](__m256d v) { return Sleef_logd4_u10(v); }, [](__m256 v) { return Sleef_logf8_u10(v); }};
    case VmlOp::Log2:
      return {[](__m256d v) { return Sleef_log2d4_u10(v); }, [](__m256 v) { return Sleef_log2f8_u10(v); }};
    case VmlOp::Log10:
      return {[](__m256d v) { return Sleef_log10d4_u10(v); }, [](__m256 v) { return Sleef_log10f8_u10(v); }};
    case VmlOp::Log1p:
      return {[](__m256d v) { return Sleef_log1pd4_u10(v); }, [](__m256 v) { return Sleef_log1pf8_u10(v); }};
    case VmlOp::Sin:
      return {[](__m256d v) { return Sleef_sind4_u10(v); }, [](__m256 v) { return Sleef_sinf8_u10(v); }};
    case VmlOp::Cos:
      return {[](__m256d v) { return Sleef_cosd4_u10(v); }, [](__m256 v) { return Sleef_cosf8_u10(v); }};
    case VmlOp::Tan:
      return {[](__m256d v) { return Sleef_tand4_u10(v); }, [](__m256 v) { return Sleef_tanf8_u10(v); }};
    case VmlOp::Asin:
      return {[](__m256d v) { return Sleef_asind4_u10(v); }, [](__m256 v) { return Sleef_asinf8_u10(v); }};
    case VmlOp::Acos:
      return {[](__m256d v) { return Sleef_acosd4_u10(v); }, [](__m256 v) { return Sleef_acosf8_u10(v); }};
    case VmlOp::Atan:
      return {[](__m256d v) { return Sleef_atand4_u10(v); }, [](__m256 v) { return Sleef_atanf8_u10(v); }};
    case VmlOp::Tanh:
      return {[](__m256d v) { return Sleef_tanhd4_u10(v); }, [](__m256 v) { return Sleef_tanhf8_u10(v); }};
    case VmlOp::Erf:
      return {[](__m256d v) { return Sleef_erfd4_u10(v); }, [](__m256 v) { return Sleef_erff8_u10(v); }};
    case VmlOp::Erfc:
      return {[](__m256d v) { return Sleef_erfcd4_u15(v); }, [](__m256 v) { return Sleef_erfcf8_u15(v); }};
    case VmlOp::Lgamma:
      return {[](__m256d v) { return Sleef_lgammad4_u10(v); },
              [](__m256 v) { return Sleef_lgammaf8_u10(v); }};
  }
  return {nullptr, nullptr};
}

}  // namespace

// Full vectors are loaded and stored in place; only the tail goes through a zero-padded
// buffer, so no lane ever reads past the input.
void vml_apply(VmlOp op, const double* in, double* out, int64_t n) {
  DoubleFn fn = entry(op).d;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) _mm256_storeu_pd(out + i, fn(_mm256_loadu_pd(in + i)));
  if (i == n) return;
  double buffer[4] = {};
  std::memcpy(buffer, in + i, size_t(n - i) * sizeof(double));
  _mm256_storeu_pd(buffer, fn(_mm256_loadu_pd(buffer)));
  std::memcpy(out + i, buffer, size_t(n - i) * sizeof(double));
}

void vml_apply(VmlOp op, const float* in, float* out, int64_t n) {
  FloatFn fn = entry(op).f;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, fn(_mm256_loadu_ps(in + i)));
  if (i == n) return;
  float buffer[8] = {};
  std::memcpy(buffer, in + i, size_t(n - i) * sizeof(float));
  _mm256_storeu_ps(buffer, fn(_mm256_loadu_ps(buffer)));
  std::memcpy(out + i, buffer, size_t(n - i) * sizeof(float));
}

}  // namespace tn
