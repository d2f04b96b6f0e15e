// The vectorized math library upstream's "*_vml_cpu" kernels use on x86-64: every
// element of exp, log, sin, tanh, ... goes through SLEEF's 1-ulp AVX2 functions (the
// same Debian libsleef upstream links), so calling them here gives upstream's bits.
// The vectorized lambdas of cpu_kernel_vec kernels (logaddexp, elu) are here too, built
// from the same AVX2 operations and SLEEF calls as upstream's Vectorized<T>.
// This file alone is compiled for AVX2 (see shim/CMakeLists.txt); callers check
// vml_available(), defined in baseline code, before calling in.
#include "vml.h"

#include <immintrin.h>
#include <sleef.h>

#include <array>
#include <cstring>
#include <limits>

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

// One AVX2 vector of T, with the Vectorized<T> operations upstream's kernels use.
struct Double4 {
  using T = double;
  using V = __m256d;
  static constexpr int64_t lanes = 4;
  static V load(const T* p) { return _mm256_loadu_pd(p); }
  static void store(T* p, V v) { _mm256_storeu_pd(p, v); }
  static V splat(T x) { return _mm256_set1_pd(x); }
  static V add(V a, V b) { return _mm256_add_pd(a, b); }
  static V sub(V a, V b) { return _mm256_sub_pd(a, b); }
  static V mul(V a, V b) { return _mm256_mul_pd(a, b); }
  static V div(V a, V b) { return _mm256_div_pd(a, b); }
  // The instructions: b where either is NaN or they are equal.
  static V max(V a, V b) { return _mm256_max_pd(a, b); }
  static V min(V a, V b) { return _mm256_min_pd(a, b); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
  static V abs(V a) { return _mm256_andnot_pd(_mm256_set1_pd(-0.0), a); }
  static V neg(V a) { return _mm256_xor_pd(_mm256_set1_pd(-0.0), a); }
  // IEEE maximum: a NaN in either lane gives NaN (all-ones bits).
  static V maximum(V a, V b) { return _mm256_or_pd(_mm256_max_pd(a, b), _mm256_cmp_pd(a, b, _CMP_UNORD_Q)); }
  static V equal(V a, V b) { return _mm256_cmp_pd(a, b, _CMP_EQ_OQ); }
  static V greater(V a, V b) { return _mm256_cmp_pd(a, b, _CMP_GT_OQ); }
  static V both(V a, V b) { return _mm256_and_pd(a, b); }
  static V select(V mask, V yes, V no) { return _mm256_blendv_pd(no, yes, mask); }
  static V exp(V a) { return Sleef_expd4_u10(a); }
  static V log(V a) { return Sleef_logd4_u10(a); }
  static V erf(V a) { return Sleef_erfd4_u10(a); }
  static V tanh(V a) { return Sleef_tanhd4_u10(a); }
};

struct Float8 {
  using T = float;
  using V = __m256;
  static constexpr int64_t lanes = 8;
  static V load(const T* p) { return _mm256_loadu_ps(p); }
  static void store(T* p, V v) { _mm256_storeu_ps(p, v); }
  static V splat(T x) { return _mm256_set1_ps(x); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V min(V a, V b) { return _mm256_min_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V abs(V a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
  static V neg(V a) { return _mm256_xor_ps(_mm256_set1_ps(-0.0f), a); }
  static V maximum(V a, V b) { return _mm256_or_ps(_mm256_max_ps(a, b), _mm256_cmp_ps(a, b, _CMP_UNORD_Q)); }
  static V equal(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
  static V greater(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
  static V both(V a, V b) { return _mm256_and_ps(a, b); }
  static V select(V mask, V yes, V no) { return _mm256_blendv_ps(no, yes, mask); }
  static V exp(V a) { return Sleef_expf8_u10(a); }
  static V log(V a) { return Sleef_logf8_u10(a); }
  static V erf(V a) { return Sleef_erff8_u10(a); }
  static V tanh(V a) { return Sleef_tanhf8_u10(a); }
};

// out[i] = f(in_0[i], ...) a vector at a time. Full vectors are loaded and stored in
// place; only the tail goes through zero-padded buffers, so no lane reads past an input.
template <typename L, size_t N, typename F>
void map_lanes(const std::array<const typename L::T*, N>& in, typename L::T* out, int64_t n, F f) {
  using T = typename L::T;
  auto step = [&](const std::array<const T*, N>& from, T* to) {
    if constexpr (N == 1)
      L::store(to, f(L::load(from[0])));
    else
      L::store(to, f(L::load(from[0]), L::load(from[1])));
  };
  std::array<const T*, N> from;
  int64_t i = 0;
  for (; i + L::lanes <= n; i += L::lanes) {
    for (size_t k = 0; k < N; ++k) from[k] = in[k] + i;
    step(from, out + i);
  }
  if (i == n) return;
  size_t tail = size_t(n - i) * sizeof(T);
  T buffers[N][L::lanes] = {};
  for (size_t k = 0; k < N; ++k) {
    std::memcpy(buffers[k], in[k] + i, tail);
    from[k] = buffers[k];
  }
  T result[L::lanes];
  step(from, result);
  std::memcpy(out + i, result, tail);
}

// Upstream's vectorized logaddexp: max(a, b) + log(1 + exp(-|a - b|)), and a itself
// where a and b are the same infinity.
template <typename L>
void logaddexp_lanes(const typename L::T* a, const typename L::T* b, typename L::T* out, int64_t n) {
  using V = typename L::V;
  using T = typename L::T;
  map_lanes<L, 2>({a, b}, out, n, [](V x, V y) {
    V m = L::maximum(x, y);
    V sum = L::add(m, L::log(L::add(L::splat(T(1)), L::exp(L::neg(L::abs(L::sub(x, y)))))));
    V same_infinity =
        L::both(L::equal(x, y), L::equal(L::abs(x), L::splat(std::numeric_limits<T>::infinity())));
    return L::select(same_infinity, x, sum);
  });
}

// Upstream's vectorized elu: x * poscoef where x > 0, else (exp(x * negiptcoef) - 1) * negcoef.
template <typename L>
void elu_lanes(const typename L::T* x, typename L::T* out, int64_t n, typename L::T negcoef,
               typename L::T poscoef, typename L::T negiptcoef) {
  using V = typename L::V;
  using T = typename L::T;
  map_lanes<L, 1>({x}, out, n, [=](V v) {
    V negative = L::mul(L::sub(L::exp(L::mul(v, L::splat(negiptcoef))), L::splat(T(1))), L::splat(negcoef));
    return L::select(L::greater(v, L::splat(T(0))), L::mul(v, L::splat(poscoef)), negative);
  });
}

// Upstream's vectorized gelu: x 0.5 (1 + erf(x alpha)), or 0.5 x (1 + tanh(beta (x + kappa x^3)))
// with x + kappa x^3 one FMA, as its compiler fused it.
template <typename L>
void gelu_lanes(const typename L::T* x, typename L::T* out, int64_t n, bool tanh) {
  using V = typename L::V;
  using T = typename L::T;
  using C = GeluConstants<T>;
  const V half = L::splat(T(0.5)), one = L::splat(T(1));
  if (!tanh)
    return map_lanes<L, 1>({x}, out, n, [=](V v) {
      return L::mul(L::mul(v, half), L::add(one, L::erf(L::mul(v, L::splat(C::alpha)))));
    });
  map_lanes<L, 1>({x}, out, n, [=](V v) {
    V inner = L::mul(L::splat(C::beta), L::fmadd(L::splat(C::kappa), L::mul(L::mul(v, v), v), v));
    return L::mul(L::mul(half, v), L::add(one, L::tanh(inner)));
  });
}

// A product the compiler may not fuse into an addition that takes it (-ffp-contract): where
// upstream's compiler left a multiply and an add apart.
template <typename V>
V unfused(V product) {
  asm("" : "+x"(product));
  return product;
}

// Upstream's vectorized gelu gradient dy gelu'(x): dy (cdf + x pdf) with x pdf + cdf one FMA; for
// tanh dy (0.5 (1 + t) + 0.5 x (1 - t^2) beta (1 + 3 kappa x^2)), t = tanh(beta (x + kappa x^3)),
// with the inner sum, 1 - t^2 and 1 + 3 kappa x^2 FMAs (what its compiler fused).
template <typename L>
void gelu_backward_lanes(const typename L::T* dy, const typename L::T* x, typename L::T* out, int64_t n,
                         bool tanh) {
  using V = typename L::V;
  using T = typename L::T;
  using C = GeluConstants<T>;
  const V half = L::splat(T(0.5)), one = L::splat(T(1));
  if (!tanh)
    return map_lanes<L, 2>({dy, x}, out, n, [=](V g, V v) {
      V cdf = L::mul(half, L::add(one, L::erf(L::mul(v, L::splat(C::alpha)))));
      V pdf = L::mul(L::splat(C::pdf_scale), L::exp(L::mul(L::mul(v, v), L::splat(T(-0.5)))));
      return L::mul(g, L::fmadd(v, pdf, cdf));
    });
  map_lanes<L, 2>({dy, x}, out, n, [=](V g, V v) {
    V square = L::mul(v, v);
    V t = L::tanh(L::mul(L::splat(C::beta), L::fmadd(L::splat(C::kappa), L::mul(square, v), v)));
    V left_derivative = L::mul(half, L::add(one, t));
    V tanh_derivative = L::fmadd(L::neg(t), t, one);
    V inner_derivative = L::mul(L::splat(C::beta), L::fmadd(L::splat(T(3) * C::kappa), square, one));
    V right_derivative = L::mul(L::mul(L::mul(half, v), tanh_derivative), inner_derivative);
    return L::mul(g, L::add(unfused(left_derivative), unfused(right_derivative)));
  });
}

// Upstream's vectorized sigmoid: 1 / (1 + exp(0 - x)), the reciprocal a division.
template <typename L>
void sigmoid_lanes(const typename L::T* x, typename L::T* out, int64_t n) {
  using V = typename L::V;
  using T = typename L::T;
  const V one = L::splat(T(1));
  map_lanes<L, 1>({x}, out, n,
                  [=](V v) { return L::div(one, L::add(one, L::exp(L::sub(L::splat(T(0)), v)))); });
}

// Upstream's vectorized sigmoid gradient from the result: dy (1 - y) y.
template <typename L>
void sigmoid_backward_lanes(const typename L::T* dy, const typename L::T* y, typename L::T* out, int64_t n) {
  using V = typename L::V;
  using T = typename L::T;
  const V one = L::splat(T(1));
  map_lanes<L, 2>({dy, y}, out, n, [=](V g, V v) { return L::mul(L::mul(g, L::sub(one, v)), v); });
}

// Upstream's vectorized silu: x / (1 + exp(-x)).
template <typename L>
void silu_lanes(const typename L::T* x, typename L::T* out, int64_t n) {
  using V = typename L::V;
  using T = typename L::T;
  const V one = L::splat(T(1));
  map_lanes<L, 1>({x}, out, n, [=](V v) { return L::div(v, L::add(one, L::exp(L::neg(v)))); });
}

// Upstream's vectorized silu gradient: dy s (1 + x (1 - s)), s = 1 / (1 + exp(-x)), with
// 1 + x (1 - s) one FMA, as its compiler fused it.
template <typename L>
void silu_backward_lanes(const typename L::T* dy, const typename L::T* x, typename L::T* out, int64_t n) {
  using V = typename L::V;
  using T = typename L::T;
  const V one = L::splat(T(1));
  map_lanes<L, 2>({dy, x}, out, n, [=](V g, V v) {
    V s = L::div(one, L::add(one, L::exp(L::neg(v))));
    return L::mul(L::mul(g, s), L::fmadd(v, L::sub(one, s), one));
  });
}

// Upstream's vectorized clamp by numbers: min(high, max(low, x)), x kept where NaN or equal.
template <typename L>
void clamp_lanes(const typename L::T* x, typename L::T* out, int64_t n, typename L::T low,
                 typename L::T high) {
  using V = typename L::V;
  const V lo = L::splat(low), hi = L::splat(high);
  map_lanes<L, 1>({x}, out, n, [=](V v) { return L::min(hi, L::max(lo, v)); });
}

// Upstream's vectorized hardtanh gradient: ((x > low) & (x < high)) & dy, bitwise.
template <typename L>
void hardtanh_backward_lanes(const typename L::T* dy, const typename L::T* x, typename L::T* out, int64_t n,
                             typename L::T low, typename L::T high) {
  using V = typename L::V;
  const V lo = L::splat(low), hi = L::splat(high);
  map_lanes<L, 2>({dy, x}, out, n,
                  [=](V g, V v) { return L::both(L::both(L::greater(v, lo), L::greater(hi, v)), g); });
}

}  // namespace

void vml_apply(VmlOp op, const double* in, double* out, int64_t n) {
  map_lanes<Double4, 1>({in}, out, n, entry(op).d);
}

void vml_apply(VmlOp op, const float* in, float* out, int64_t n) {
  map_lanes<Float8, 1>({in}, out, n, entry(op).f);
}

void vml_logaddexp(const double* a, const double* b, double* out, int64_t n) {
  logaddexp_lanes<Double4>(a, b, out, n);
}
void vml_logaddexp(const float* a, const float* b, float* out, int64_t n) {
  logaddexp_lanes<Float8>(a, b, out, n);
}

void vml_elu(const double* x, double* out, int64_t n, double negcoef, double poscoef, double negiptcoef) {
  elu_lanes<Double4>(x, out, n, negcoef, poscoef, negiptcoef);
}
void vml_elu(const float* x, float* out, int64_t n, float negcoef, float poscoef, float negiptcoef) {
  elu_lanes<Float8>(x, out, n, negcoef, poscoef, negiptcoef);
}

void vml_gelu(const double* x, double* out, int64_t n, bool tanh) { gelu_lanes<Double4>(x, out, n, tanh); }
void vml_gelu(const float* x, float* out, int64_t n, bool tanh) { gelu_lanes<Float8>(x, out, n, tanh); }

void vml_gelu_backward(const double* dy, const double* x, double* out, int64_t n, bool tanh) {
  gelu_backward_lanes<Double4>(dy, x, out, n, tanh);
}
void vml_gelu_backward(const float* dy, const float* x, float* out, int64_t n, bool tanh) {
  gelu_backward_lanes<Float8>(dy, x, out, n, tanh);
}

// The float64 and float32 entry points of a lanes template over one input, or over two.
#define TN_VML_LANES_1(NAME, LANES)                                                 \
  void NAME(const double* x, double* out, int64_t n) { LANES<Double4>(x, out, n); } \
  void NAME(const float* x, float* out, int64_t n) { LANES<Float8>(x, out, n); }
#define TN_VML_LANES_2(NAME, LANES)                                                                     \
  void NAME(const double* a, const double* b, double* out, int64_t n) { LANES<Double4>(a, b, out, n); } \
  void NAME(const float* a, const float* b, float* out, int64_t n) { LANES<Float8>(a, b, out, n); }
TN_VML_LANES_1(vml_sigmoid, sigmoid_lanes)
TN_VML_LANES_2(vml_sigmoid_backward, sigmoid_backward_lanes)
TN_VML_LANES_1(vml_silu, silu_lanes)
TN_VML_LANES_2(vml_silu_backward, silu_backward_lanes)

void vml_hardtanh_backward(const double* dy, const double* x, double* out, int64_t n, double low,
                           double high) {
  hardtanh_backward_lanes<Double4>(dy, x, out, n, low, high);
}
void vml_hardtanh_backward(const float* dy, const float* x, float* out, int64_t n, float low, float high) {
  hardtanh_backward_lanes<Float8>(dy, x, out, n, low, high);
}

void vml_clamp(const double* x, double* out, int64_t n, double low, double high) {
  clamp_lanes<Double4>(x, out, n, low, high);
}
void vml_clamp(const float* x, float* out, int64_t n, float low, float high) {
  clamp_lanes<Float8>(x, out, n, low, high);
}

}  // namespace tn
