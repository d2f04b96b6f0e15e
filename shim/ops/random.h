// The CPU generator: the same mt19937 stream and transforms as upstream's
// CPUGeneratorImpl, so seeded results can be value-identical.
#pragma once

#include <cstdint>
#include <optional>

namespace tn {

class Generator {
 public:
  explicit Generator(uint64_t seed = 67280421310721ull) { manual_seed(seed); }
  void manual_seed(uint64_t seed);
  uint64_t initial_seed() const { return seed_; }
  uint32_t random();    // next 32 bits
  uint64_t random64();  // two draws: first is the high word
  // Uniform in [0, 1) with the precision of float (24 bits) or double (53 bits).
  float uniform_float() { return float(random() & ((1u << 24) - 1)) * (1.0f / float(1u << 24)); }
  double uniform_double() { return double(random64() & ((1ull << 53) - 1)) * (1.0 / double(1ull << 53)); }
  std::optional<double> next_double_normal;  // Box-Muller's second value, as upstream caches it

  static constexpr int kStateSize = 624;
  uint32_t state[kStateSize];
  int index = 0;

 private:
  uint64_t seed_ = 0;
};

Generator& default_generator();

}  // namespace tn
