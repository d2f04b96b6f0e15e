// Random sampling through a Generator: uniform_, normal_, random_, bernoulli, exponential_, cauchy_,
// geometric_, log_normal_, rand/randn/randint/randperm and their _like forms, normal, multinomial.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>

#include "common.h"
#include "typed_ops.h"

namespace tn {

namespace {

// uniform_real_distribution<T>: the top bits of one draw (float types) or of a 64-bit
// draw (double), as many as the type's mantissa holds, scaled into [from, to).
template <typename T>
T uniform_value(Generator& g, double from, double to) {
  if constexpr (std::is_same_v<T, double>) {
    double x = double(g.random64() & ((1ull << 53) - 1)) * (1.0 / double(1ull << 53));
    return std::fma(x, to - from, from);  // upstream's kernel is FMA-contracted
  } else {
    constexpr int digits = std::is_same_v<T, Half> ? 11 : std::is_same_v<T, BFloat16> ? 8 : 24;
    float x = float(g.random() & ((1u << digits) - 1)) * (1.0f / float(1u << digits));
    return T(std::fma(x, float(to) - float(from), float(from)));
  }
}

void uniform_(const Tensor& self, double from, double to, Generator& g) {
  if (from > to)
    throw Error("uniform_ expects to return a [from, to) range, but found from=" + std::to_string(from) +
                " > to=" + std::to_string(to));
  if (!is_floating(self.dtype())) dtype_not_implemented("check_uniform_bounds", self.dtype());
  TN_DISPATCH_ALL_TYPES(self.dtype(), "uniform_", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    if constexpr (std::is_same_v<compute_t<scalar_t>, double> && !std::is_integral_v<scalar_t>) {
      scalar_t* p = self.template data_as<scalar_t>();
      for_each_in_iteration_order(
          self, [&](const std::array<int64_t, 1>& o) { p[o[0]] = uniform_value<scalar_t>(g, from, to); });
    }
  });
}

// normal_distribution<double>: Box-Muller on two uniform doubles; the sine half is
// kept in the generator for the next draw, as upstream does.
double normal_double(Generator& g, double mean, double std) {
  double z;
  if (g.next_double_normal) {
    z = *g.next_double_normal;
    g.next_double_normal.reset();
  } else {
    double u1 = uniform_value<double>(g, 0, 1), u2 = uniform_value<double>(g, 0, 1);
    double r = std::sqrt(-2.0 * std::log(1.0 - u2));
    double theta = 2.0 * kPi * u1;
    g.next_double_normal = r * std::sin(theta);
    z = r * std::cos(theta);
  }
  return std::fma(z, std, mean);
}

// Upstream's AVX2 normal_fill for float takes log and sincos from avx_mathfun (Cephes'
// single-precision polynomials), compiled with FMA contraction. These reproduce the
// same arithmetic: Cephes' coefficients, the same reduction steps, and a fused
// multiply-add exactly where that build fuses one.
uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }
float from_bits(uint32_t u) { return std::bit_cast<float>(u); }

float cephes_logf(float x) {
  if (x <= 0) return std::numeric_limits<float>::quiet_NaN();
  x = std::max(x, std::numeric_limits<float>::min());  // no subnormals
  float e = float(int(bits(x) >> 23) - 0x7f) + 1.0f;
  x = from_bits((bits(x) & ~0x7f800000u) | bits(0.5f));  // mantissa in [0.5, 1)
  bool below = x < 0.707106781186547524f;
  float extra = below ? x : 0.0f;
  x = x - 1.0f;
  e = e - (below ? 1.0f : 0.0f);
  x = x + extra;
  float z = x * x;
  constexpr float p[] = {7.0376836292E-2f,  -1.1514610310E-1f, 1.1676998740E-1f,
                         -1.2420140846E-1f, 1.4249322787E-1f,  -1.6668057665E-1f,
                         2.0000714765E-1f,  -2.4999993993E-1f, 3.3333331174E-1f};
  float y = p[0];
  for (int i = 1; i < 9; ++i) y = std::fma(y, x, p[i]);
  y = std::fma(y * x, z, e * -2.12194440e-4f);
  y = std::fma(-z, 0.5f, y);
  return std::fma(e, 0.693359375f, x + y);
}

void cephes_sincosf(float angle, float* sine, float* cosine) {
  uint32_t sign_sin = bits(angle) & 0x80000000u;
  float x = std::fabs(angle);
  int32_t octant = (int32_t(x * 1.27323954473516f) + 1) & ~1;  // 4/pi, rounded to an even octant
  float y = float(octant);
  // Extended-precision reduction by pi/4 in three pieces.
  x = std::fma(y, -0.78515625f, x);
  x = std::fma(y, -2.4187564849853515625e-4f, x);
  x = std::fma(y, -3.77489497744594108e-8f, x);
  sign_sin ^= uint32_t(octant & 4) << 29;
  uint32_t sign_cos = uint32_t(~(octant - 2) & 4) << 29;
  bool cos_poly_is_cos = (octant & 2) == 0;
  float z = x * x;
  float c =
      std::fma(std::fma(2.443315711809948E-005f, z, -1.388731625493765E-003f), z, 4.166664568298827E-002f);
  c = std::fma(c * z, z, -(z * 0.5f)) + 1.0f;
  float s = std::fma(std::fma(-1.9515295891E-4f, z, 8.3321608736E-3f), z, -1.6666654611E-1f);
  s = std::fma(s * z, x, x);
  *sine = from_bits(bits(cos_poly_is_cos ? s : c) ^ sign_sin);
  *cosine = from_bits(bits(cos_poly_is_cos ? c : s) ^ sign_cos);
}

// Upstream's float path (size >= 16, contiguous): uniforms first, then Box-Muller on
// pairs (j, j + 8) of each block of 16 with the functions above.
void normal_fill_float(float* data, int64_t size, float mean, float std, Generator& g) {
  for (int64_t i = 0; i < size; ++i) data[i] = uniform_value<float>(g, 0, 1);
  auto fill16 = [&](float* d) {
    for (int j = 0; j < 8; ++j) {
      float radius = std::sqrt(-2.0f * cephes_logf(1.0f - d[j]));
      float theta = float(2.0 * kPi) * d[j + 8];
      float sine, cosine;
      cephes_sincosf(theta, &sine, &cosine);
      d[j] = std::fma(radius * cosine, std, mean);
      d[j + 8] = std::fma(radius * sine, std, mean);
    }
  };
  for (int64_t i = 0; i + 16 <= size; i += 16) fill16(data + i);
  if (size % 16 != 0) {
    float* tail = data + size - 16;
    for (int i = 0; i < 16; ++i) tail[i] = uniform_value<float>(g, 0, 1);
    fill16(tail);
  }
}

// normal_fill: for contiguous tensors of 16 or more, upstream fills uniforms first and
// transforms them 16 at a time (Box-Muller pairs j, j+8), redrawing the last 16 when
// the size is not a multiple of 16.
template <typename T>
void normal_fill(T* data, int64_t size, double mean, double std, Generator& g) {
  using c = std::conditional_t<std::is_same_v<T, double>, double, float>;
  for (int64_t i = 0; i < size; ++i) data[i] = uniform_value<T>(g, 0, 1);
  auto fill16 = [&](T* d) {
    for (int j = 0; j < 8; ++j) {
      T u1 = T(c(1) - c(d[j]));
      T u2 = d[j + 8];
      T radius = T(std::sqrt(c(-2) * std::log(c(u1))));
      T theta = T(2.0f * kPi * double(c(u2)));
      d[j] = T(std::fma(c(radius) * std::cos(c(theta)), c(T(std)), c(T(mean))));
      d[j + 8] = T(std::fma(c(radius) * std::sin(c(theta)), c(T(std)), c(T(mean))));
    }
  };
  for (int64_t i = 0; i + 16 <= size; i += 16) fill16(data + i);
  if (size % 16 != 0) {
    T* tail = data + size - 16;
    for (int i = 0; i < 16; ++i) tail[i] = uniform_value<T>(g, 0, 1);
    fill16(tail);
  }
}

void normal_(const Tensor& self, double mean, double std, Generator& g) {
  if (std < 0) throw Error("normal expects std >= 0.0, but found std " + std::to_string(std));
  if (!is_floating(self.dtype())) dtype_not_implemented("normal_kernel_cpu", self.dtype());
  if (self.is_meta()) return;  // the meta device: nothing to draw into, and no draws taken
  TN_DISPATCH_ALL_TYPES(self.dtype(), "normal_", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    if constexpr (std::is_same_v<compute_t<scalar_t>, double> && !std::is_integral_v<scalar_t>) {
      scalar_t* p = self.template data_as<scalar_t>();
      if (self.numel() >= 16 && self.is_contiguous()) {
        if constexpr (std::is_same_v<scalar_t, float>)
          normal_fill_float(p, self.numel(), float(mean), float(std), g);
        else
          normal_fill<scalar_t>(p, self.numel(), mean, std, g);
      } else {
        for_each_in_iteration_order(
            self, [&](const std::array<int64_t, 1>& o) { p[o[0]] = scalar_t(normal_double(g, mean, std)); });
      }
    }
  });
}

// Upstream refuses a bound the dtype cannot hold (from, and to - 1: the largest drawn value).
void check_in_range(ScalarType dtype, int64_t from, std::optional<int64_t> to) {
  TN_DISPATCH_ALL_TYPES(dtype, "random_", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    double lowest = double(std::numeric_limits<compute_t<scalar_t>>::lowest());
    double highest = double(std::numeric_limits<compute_t<scalar_t>>::max());
    if constexpr (std::is_same_v<scalar_t, Half>) lowest = -65504.0, highest = 65504.0;
    if constexpr (std::is_same_v<scalar_t, bool>) lowest = 0, highest = 1;
    auto outside = [&](int64_t v) { return double(v) < lowest || double(v) > highest; };
    if (outside(from)) throw Error(std::string("from is out of bounds for ") + cpp_type_name(dtype));
    if (to && outside(*to - 1))
      throw Error(std::string("to - 1 is out of bounds for ") + cpp_type_name(dtype));
  });
}

// random_(from, to): (draw mod range) + from, one 32-bit draw while the range fits.
void random_from_to(const Tensor& self, int64_t from, std::optional<int64_t> to_opt, Generator& g) {
  uint64_t range;
  if (to_opt) {
    if (from >= *to_opt)
      throw Error("random_ expects 'from' to be less than 'to', but got from=" + std::to_string(from) +
                  " >= to=" + std::to_string(*to_opt));
    check_in_range(self.dtype(), from, to_opt);
    range = uint64_t(*to_opt) - uint64_t(from);
  } else {
    check_in_range(self.dtype(), from, std::nullopt);
    // random_() samples [0, the type's largest value] (floats: 2^mantissa digits).
    TN_DISPATCH_ALL_TYPES(self.dtype(), "random_", [&](auto tag_) {
      using scalar_t = TN_TYPE(tag_);
      if constexpr (std::is_same_v<scalar_t, bool>)
        range = 2;
      else if constexpr (std::is_integral_v<scalar_t>)
        range = uint64_t(std::numeric_limits<scalar_t>::max()) + 1;
      else if constexpr (std::is_same_v<scalar_t, double>)
        range = (uint64_t(1) << 53) + 1;
      else if constexpr (std::is_same_v<scalar_t, float>)
        range = (uint64_t(1) << 24) + 1;
      else if constexpr (std::is_same_v<scalar_t, Half>)
        range = (uint64_t(1) << 11) + 1;
      else
        range = (uint64_t(1) << 8) + 1;
    });
  }
  TN_DISPATCH_ALL_TYPES(self.dtype(), "random_", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    scalar_t* p = self.template data_as<scalar_t>();
    for_each_in_iteration_order(self, [&](const std::array<int64_t, 1>& o) {
      uint64_t draw = range >= (uint64_t(1) << 32) ? g.random64() : uint64_t(g.random());
      int64_t v = int64_t(draw % range + uint64_t(from));
      p[o[0]] = scalar_t(compute_t<scalar_t>(v));
    });
  });
}

void bernoulli_scalar(const Tensor& self, double p, Generator& g) {
  if (p < 0 || p > 1) throw Error("bernoulli_ expects p to be in [0, 1], but got p=" + std::to_string(p));
  TN_DISPATCH_ALL_TYPES(self.dtype(), "bernoulli_", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    scalar_t* d = self.template data_as<scalar_t>();
    for_each_in_iteration_order(self, [&](const std::array<int64_t, 1>& o) {
      d[o[0]] = scalar_t(compute_t<scalar_t>(uniform_value<double>(g, 0, 1) < p));
    });
  });
}

// bernoulli_(p tensor): float draws, except for double probabilities.
void bernoulli_tensor(const Tensor& self, const Tensor& p_in, Generator& g) {
  // One loop over (self, p) as upstream's iterator walks them: where each draw lands.
  std::vector<Tensor> ordered = in_iteration_order({self, ops::expand(p_in, self.sizes(), false)});
  const Tensor &out = ordered[0], &p = ordered[1];
  TN_DISPATCH_ALL_TYPES(self.dtype(), "bernoulli_", [&](auto tag_) {
    using self_t = TN_TYPE(tag_);
    self_t* d = out.template data_as<self_t>();
    TN_DISPATCH_ALL_TYPES(p.dtype(), "bernoulli_", [&](auto ptag_) {
      using p_t = TN_TYPE(ptag_);
      const p_t* pp = p.template data_as<p_t>();
      strided_loop<2>(out.sizes(), {out.strides(), p.strides()}, [&](const std::array<int64_t, 2>& o) {
        double prob = double(compute_t<p_t>(pp[o[1]]));
        if (!(prob >= 0 && prob <= 1))
          throw Error("Expected p_in >= 0 && p_in <= 1 to be true, but got false.");
        bool hit = std::is_same_v<p_t, double> ? uniform_value<double>(g, 0, 1) < prob
                                               : uniform_value<float>(g, 0, 1) < float(prob);
        d[o[0]] = self_t(compute_t<self_t>(hit));
      });
    });
  });
}

void exponential_(const Tensor& self, double lambda, Generator& g) {
  if (lambda <= 0)
    throw Error("exponential_ expects lambda > 0.0, but found lambda=" + std::to_string(lambda));
  if (!is_floating(self.dtype())) dtype_not_implemented("exponential_cpu", self.dtype());
  TN_DISPATCH_ALL_TYPES(self.dtype(), "exponential_", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    scalar_t* d = self.template data_as<scalar_t>();
    for_each_in_iteration_order(self, [&](const std::array<int64_t, 1>& o) {
      double u = uniform_value<double>(g, 0, 1);
      d[o[0]] = scalar_t(compute_t<scalar_t>(-1.0 / lambda * std::log1p(-u)));
    });
  });
}

// Per-element draws of upstream's serial kernels (cauchy, geometric, log-normal),
// each from double uniforms or normals.
template <typename F>
void fill_serial(const Tensor& self, const char* name, F draw) {
  if (!is_floating(self.dtype()) && std::string(name) != "geometric_")
    dtype_not_implemented(name, self.dtype());
  TN_DISPATCH_ALL_TYPES(self.dtype(), name, [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    scalar_t* d = self.template data_as<scalar_t>();
    for_each_in_iteration_order(
        self, [&](const std::array<int64_t, 1>& o) { d[o[0]] = scalar_t(compute_t<scalar_t>(draw())); });
  });
}

// Upstream's randperm: 0..n-1 then the swaps, written through `out`'s strides (so an expanded
// out holds what upstream's loop leaves in it).
const Tensor& randperm_into(const Tensor& out, int64_t n, Generator& g) {
  if (n < 0) throw Error("n must be non-negative, got" + std::to_string(n));
  if (out.dtype() == ScalarType::Bool) dtype_not_implemented("randperm", out.dtype());
  out.resize({n});
  TN_DISPATCH_ALL_TYPES(out.dtype(), "randperm", [&](auto tag_) {
    using scalar_t = TN_TYPE(tag_);
    scalar_t* r = out.template data_as<scalar_t>();
    int64_t stride = n > 0 ? out.stride(0) : 1;
    for (int64_t i = 0; i < n; ++i) r[i * stride] = scalar_t(compute_t<scalar_t>(i));
    for (int64_t i = 0; i + 1 < n; ++i) {
      int64_t z = int64_t(g.random() % uint32_t(n - i));
      std::swap(r[i * stride], r[(z + i) * stride]);
    }
  });
  return out;
}

Tensor randperm(int64_t n, ScalarType t, Generator& g) { return randperm_into(Tensor::empty({0}, t), n, g); }

// The out= forms of the factories draw straight into the out tensor, as upstream's resize
// and in-place fill do: where each draw lands follows the out tensor's layout.
const Tensor& resized(const Tensor& out, const Shape& size) {
  out.resize(size);
  return out;
}

Tensor fresh(const Args& a, size_t size_index, size_t dtype_index) {
  return Tensor::empty(a.int_list(size_index), a.optional_dtype(dtype_index).value_or(default_dtype()));
}

// randint's result: int64 unless a dtype is given.
Tensor fresh_long(const Args& a, size_t size_index, size_t dtype_index) {
  return Tensor::empty(a.int_list(size_index), a.optional_dtype(dtype_index).value_or(ScalarType::Long));
}

// A *_like factory's result: the shape of argument 0, its dtype unless one is given.
Tensor like(const Args& a, size_t dtype_index) {
  return Tensor::empty(a.tensor(0).sizes(), a.optional_dtype(dtype_index).value_or(a.tensor(0).dtype()));
}

Tensor standard_uniform(Tensor t, Generator& g) {
  uniform_(t, 0, 1, g);
  return t;
}

Tensor standard_normal(Tensor t, Generator& g) {
  normal_(t, 0, 1, g);
  return t;
}

Tensor integers(Tensor t, int64_t low, int64_t high, Generator& g) {
  random_from_to(t, low, high, g);
  return t;
}

Tensor multinomial(const Tensor& self, int64_t samples, bool replacement, Generator& g) {
  if (self.dim() < 1 || self.dim() > 2) throw Error("prob_dist must be 1 or 2 dim");
  if (!is_floating(self.dtype()))
    throw Error("multinomial only supports floating-point dtypes for input, got: " +
                std::string(upstream_type_name(self.dtype())));
  if (samples <= 0) throw Error("cannot sample n_sample <= 0 samples");
  int64_t categories = self.size(-1);
  if (!replacement && samples > categories)
    throw Error("cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  Tensor probs =
      (self.dim() == 1 ? ops::unsqueeze(self, int64_t{0}) : self).to(ScalarType::Double).contiguous();
  int64_t rows = probs.size(0);
  for (int64_t i = 0; i < probs.numel(); ++i) {
    double v = probs.data_as<double>()[i];
    if (!std::isfinite(v) || v < 0)
      throw Error("probability tensor contains either `inf`, `nan` or element < 0");
  }
  Tensor result;
  if (!replacement) {
    // Upstream: probabilities divided by exponential draws, then the largest (topk).
    Tensor q = Tensor::empty(self.sizes(), self.dtype());
    exponential_(q, 1.0, g);
    Tensor ratio = ops::div(self, q);
    if (samples == 1) {
      result = ops::argmax(ratio, int64_t{-1}, true);
    } else {
      result = std::get<1>(ops::topk(ratio, samples, int64_t{-1}, true, true));  // the indices
    }
    return result;
  }
  result = Tensor::empty({rows, samples}, ScalarType::Long);
  std::vector<double> cumulative(static_cast<size_t>(categories));
  for (int64_t r = 0; r < rows; ++r) {
    const double* p = probs.data_as<double>() + r * categories;
    double total = 0;
    for (int64_t j = 0; j < categories; ++j) cumulative[size_t(j)] = total += p[j];
    if (total <= 0) throw Error("invalid multinomial distribution (sum of probabilities <= 0)");
    for (double& c : cumulative) c /= total;
    cumulative.back() = 1;
    for (int64_t s = 0; s < samples; ++s) {
      double u = uniform_value<double>(g, 0, 1);
      int64_t left = 0, right = categories;
      while (right - left > 0) {
        int64_t mid = left + (right - left) / 2;
        if (cumulative[size_t(mid)] < u)
          left = mid + 1;
        else
          right = mid;
      }
      result.data_as<int64_t>()[r * samples + s] = left;
    }
  }
  return self.dim() == 1 ? result.view_as_strided({samples}, {1}, 0) : result;
}

}  // namespace

TN_KERNEL("aten::uniform_", {
  uniform_(a.tensor(0), a.real(1), a.real(2), a.generator(3));
  return a.tensor(0);
});
TN_KERNEL("aten::normal_", {
  normal_(a.tensor(0), a.real(1), a.real(2), a.generator(3));
  return a.tensor(0);
});
TN_KERNEL("aten::random_.from", {
  random_from_to(a.tensor(0), a.integer(1), a.optional_integer(2), a.generator(3));
  return a.tensor(0);
});
TN_KERNEL("aten::random_.to", {
  random_from_to(a.tensor(0), 0, a.integer(1), a.generator(2));
  return a.tensor(0);
});
TN_KERNEL("aten::random_", {
  random_from_to(a.tensor(0), 0, std::nullopt, a.generator(1));
  return a.tensor(0);
});
TN_KERNEL("aten::bernoulli_.float", {
  bernoulli_scalar(a.tensor(0), a.real(1), a.generator(2));
  return a.tensor(0);
});
TN_KERNEL("aten::bernoulli_.Tensor", {
  bernoulli_tensor(a.tensor(0), a.tensor(1), a.generator(2));
  return a.tensor(0);
});
TN_KERNEL("aten::bernoulli", {
  Tensor out = Tensor::empty(a.tensor(0).sizes(), a.tensor(0).dtype());
  bernoulli_tensor(out, a.tensor(0), a.generator(1));
  return out;
});
TN_KERNEL("aten::bernoulli.out", {
  // Upstream resizes out and draws into it, in out's own order.
  const Tensor& out = a.tensor(2);
  if (out.sizes() != a.tensor(0).sizes()) out.resize(a.tensor(0).sizes());
  bernoulli_tensor(out, a.tensor(0), a.generator(1));
  return out;
});
TN_KERNEL("aten::exponential_", {
  exponential_(a.tensor(0), a.real(1), a.generator(2));
  return a.tensor(0);
});
TN_KERNEL("aten::rand", { return standard_uniform(fresh(a, 0, 1), default_generator()); });
TN_KERNEL("aten::rand.generator", { return standard_uniform(fresh(a, 0, 2), a.generator(1)); });
TN_KERNEL("aten::randn", { return standard_normal(fresh(a, 0, 1), default_generator()); });
TN_KERNEL("aten::randn.generator", { return standard_normal(fresh(a, 0, 2), a.generator(1)); });
TN_KERNEL("aten::rand_like", { return standard_uniform(like(a, 1), default_generator()); });
TN_KERNEL("aten::randn_like", { return standard_normal(like(a, 1), default_generator()); });
TN_KERNEL("aten::randint", { return integers(fresh_long(a, 1, 2), 0, a.integer(0), default_generator()); });
TN_KERNEL("aten::randint.generator",
          { return integers(fresh_long(a, 1, 3), 0, a.integer(0), a.generator(2)); });
TN_KERNEL("aten::randint.low",
          { return integers(fresh_long(a, 2, 3), a.integer(0), a.integer(1), default_generator()); });
TN_KERNEL("aten::randint.low_generator",
          { return integers(fresh_long(a, 2, 4), a.integer(0), a.integer(1), a.generator(3)); });
TN_KERNEL("aten::randint_like", { return integers(like(a, 2), 0, a.integer(1), default_generator()); });
TN_KERNEL("aten::randint_like.low_dtype",
          { return integers(like(a, 3), a.integer(1), a.integer(2), default_generator()); });
TN_KERNEL("aten::randperm", {
  return randperm(a.integer(0), a.optional_dtype(1).value_or(ScalarType::Long), default_generator());
});
TN_KERNEL("aten::randperm.generator",
          { return randperm(a.integer(0), a.optional_dtype(2).value_or(ScalarType::Long), a.generator(1)); });
TN_KERNEL("aten::normal.float_float", {
  Tensor t = Tensor::empty(a.int_list(2), a.optional_dtype(4).value_or(default_dtype()));
  normal_(t, a.real(0), a.real(1), a.generator(3));
  return t;
});
TN_KERNEL("aten::normal.Tensor_float", {
  const Tensor& mean = a.tensor(0);
  Tensor t = Tensor::empty(mean.sizes(), mean.dtype());
  normal_(t, 0, a.real(1), a.generator(2));
  return ops::add(t, mean, Scalar(int64_t{1}));
});
TN_KERNEL("aten::normal.float_Tensor", {
  const Tensor& std = a.tensor(1);
  Tensor t = Tensor::empty(std.sizes(), std.dtype());
  normal_(t, 0, 1, a.generator(2));
  return ops::add(ops::mul(t, std), scalar_tensor(Scalar(a.real(0))), Scalar(int64_t{1}));
});
TN_KERNEL("aten::normal.Tensor_Tensor", {
  const Tensor &mean = a.tensor(0), &std = a.tensor(1);
  Tensor t = Tensor::empty(broadcast_shapes(mean.sizes(), std.sizes()), mean.dtype());
  normal_(t, 0, 1, a.generator(2));
  return ops::add(ops::mul(t, std), mean, Scalar(int64_t{1}));
});
namespace {

// The factories' out= forms: out (the last argument) resized to the size argument, then
// drawn into from the generator before out, or from the default generator.
template <typename Draw>
IValue drawn_into_out(const Args& a, size_t size_index, bool has_generator, Draw draw) {
  const Tensor& out = resized(a.tensor(a.size() - 1), a.int_list(size_index));
  draw(out, has_generator ? a.generator(a.size() - 2) : default_generator());
  return out;
}
void uniform01(const Tensor& t, Generator& g) { uniform_(t, 0, 1, g); }
void normal01(const Tensor& t, Generator& g) { normal_(t, 0, 1, g); }

}  // namespace

TN_KERNEL("aten::rand.out", { return drawn_into_out(a, 0, false, uniform01); });
TN_KERNEL("aten::rand.generator_out", { return drawn_into_out(a, 0, true, uniform01); });
TN_KERNEL("aten::randn.out", { return drawn_into_out(a, 0, false, normal01); });
TN_KERNEL("aten::randn.generator_out", { return drawn_into_out(a, 0, true, normal01); });
// randint(high, size) and randint(low, high, size).
TN_KERNEL("aten::randint.out", {
  return drawn_into_out(a, 1, false,
                        [&](const Tensor& t, Generator& g) { random_from_to(t, 0, a.integer(0), g); });
});
TN_KERNEL("aten::randint.generator_out", {
  return drawn_into_out(a, 1, true,
                        [&](const Tensor& t, Generator& g) { random_from_to(t, 0, a.integer(0), g); });
});
TN_KERNEL("aten::randint.low_out", {
  return drawn_into_out(
      a, 2, false, [&](const Tensor& t, Generator& g) { random_from_to(t, a.integer(0), a.integer(1), g); });
});
TN_KERNEL("aten::randint.low_generator_out", {
  return drawn_into_out(
      a, 2, true, [&](const Tensor& t, Generator& g) { random_from_to(t, a.integer(0), a.integer(1), g); });
});
TN_KERNEL("aten::randperm.out", { return randperm_into(a.tensor(1), a.integer(0), default_generator()); });
TN_KERNEL("aten::randperm.generator_out",
          { return randperm_into(a.tensor(2), a.integer(0), a.generator(1)); });
// Upstream's normal out= forms: draws into out, then out.mul_(std).add_(mean) in that order,
// so a mean or std that is the out tensor is read after the draws overwrote it.
TN_KERNEL("aten::normal.float_float_out", {
  normal_(resized(a.tensor(4), a.int_list(2)), a.real(0), a.real(1), a.generator(3));
  return a.tensor(4);
});
TN_KERNEL("aten::normal.Tensor_float_out", {
  const Tensor& out = resized(a.tensor(3), a.tensor(0).sizes());
  normal_(out, 0, a.real(1), a.generator(2));
  return ops::add_(out, a.tensor(0));
});
TN_KERNEL("aten::normal.float_Tensor_out", {
  const Tensor& out = resized(a.tensor(3), a.tensor(1).sizes());
  normal_(out, 0, 1, a.generator(2));
  return ops::add_(ops::mul_(out, a.tensor(1)), Scalar(a.real(0)));
});
TN_KERNEL("aten::normal.Tensor_Tensor_out", {
  const Tensor& out = resized(a.tensor(3), broadcast_shapes(a.tensor(0).sizes(), a.tensor(1).sizes()));
  normal_(out, 0, 1, a.generator(2));
  return ops::add_(ops::mul_(out, a.tensor(1)), a.tensor(0));
});
TN_KERNEL("aten::cauchy_", {
  double median = a.real(1), sigma = a.real(2);
  Generator& g = a.generator(3);
  fill_serial(a.tensor(0), "cauchy_",
              [&] { return median + sigma * std::tan(kPi * (uniform_value<double>(g, 0, 1) - 0.5)); });
  return a.tensor(0);
});
TN_KERNEL("aten::geometric_", {
  double p = a.real(1);
  if (!(p > 0 && p < 1)) throw Error("geometric_ expects p to be in (0, 1), but got p=" + std::to_string(p));
  Generator& g = a.generator(2);
  fill_serial(a.tensor(0), "geometric_",
              [&] { return std::ceil(std::log(uniform_value<double>(g, 0, 1)) / std::log1p(-p)); });
  return a.tensor(0);
});
TN_KERNEL("aten::log_normal_", {
  double mean = a.real(1), std = a.real(2);
  if (std <= 0) throw Error("log_normal_ expects std > 0.0, but found std=" + std::to_string(std));
  Generator& g = a.generator(3);
  fill_serial(a.tensor(0), "log_normal_", [&] { return std::exp(normal_double(g, mean, std)); });
  return a.tensor(0);
});
TN_KERNEL("aten::multinomial",
          { return multinomial(a.tensor(0), a.integer(1), a.boolean(2), a.generator(3)); });

}  // namespace tn
