#include "random.h"

namespace tn {

void Generator::manual_seed(uint64_t seed) {
  seed_ = seed;
  next_double_normal.reset();
  state[0] = uint32_t(seed & 0xffffffffu);
  for (int i = 1; i < kStateSize; ++i)
    state[i] = 1812433253u * (state[i - 1] ^ (state[i - 1] >> 30)) + uint32_t(i);
  index = kStateSize;
}

uint32_t Generator::random() {
  constexpr uint32_t kUpper = 0x80000000u, kLower = 0x7fffffffu, kMatrix = 0x9908b0dfu;
  if (index >= kStateSize) {
    for (int i = 0; i < kStateSize; ++i) {
      uint32_t y = (state[i] & kUpper) | (state[(i + 1) % kStateSize] & kLower);
      state[i] = state[(i + 397) % kStateSize] ^ (y >> 1) ^ ((y & 1u) ? kMatrix : 0u);
    }
    index = 0;
  }
  uint32_t y = state[index++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

uint64_t Generator::random64() {
  uint64_t hi = random();
  uint64_t lo = random();
  return (hi << 32) | lo;
}

Generator& default_generator() {
  static Generator generator;
  return generator;
}

}  // namespace tn
