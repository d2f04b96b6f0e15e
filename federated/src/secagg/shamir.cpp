// Shamir t-of-n secret sharing of 32-byte secrets over GF(2^61 - 1) (secure_aggregation.h).
//
// The Mersenne prime keeps reduction to shifts and adds, so the arithmetic on secret values has
// no data-dependent branches or table look-ups; only public values (the holders' points and the
// threshold) steer loops. A secret is cut into 7-byte chunks (below 2^56 < p), each shared with
// its own random polynomial, so sharing is information-theoretic chunk by chunk.
#include <algorithm>
#include <set>
#include <string>

#include "secagg_internal.h"

namespace tn::federated::secagg {
namespace {

using Reason = SecAggRefused::Reason;

constexpr uint64_t kPrime = (uint64_t{1} << 61) - 1;
constexpr size_t kChunkBytes = 7;
constexpr size_t kChunks = (32 + kChunkBytes - 1) / kChunkBytes;

// Folds v < 2^62 into [0, p) without branching on v.
uint64_t fold(uint64_t v) {
  v = (v & kPrime) + (v >> 61);
  uint64_t over = uint64_t{0} - static_cast<uint64_t>(v >= kPrime);
  return v - (kPrime & over);
}

uint64_t add(uint64_t a, uint64_t b) { return fold(a + b); }
uint64_t subtract(uint64_t a, uint64_t b) { return fold(a + kPrime - b); }

uint64_t multiply(uint64_t a, uint64_t b) {
  unsigned __int128 product = static_cast<unsigned __int128>(a) * b;
  uint64_t low = static_cast<uint64_t>(product) & kPrime;
  uint64_t high = static_cast<uint64_t>(product >> 61);
  return fold(low + high);
}

// a^(p-2) = a^-1 for a != 0; the exponent is public, so its branches leak nothing.
uint64_t inverse(uint64_t a) {
  uint64_t result = 1;
  for (uint64_t exponent = kPrime - 2; exponent != 0; exponent >>= 1) {
    if (exponent & 1) result = multiply(result, a);
    a = multiply(a, a);
  }
  return result;
}

uint64_t random_element() {
  for (;;) {
    uint64_t value = 0;
    randombytes_buf(&value, sizeof value);
    value &= kPrime;  // 61 uniform bits; only p itself is out of range
    if (value != kPrime) return value;
  }
}

std::array<uint64_t, kChunks> chunks_of(const Bytes32& secret) {
  std::array<uint64_t, kChunks> chunks{};
  for (size_t i = 0; i < secret.size(); ++i)
    chunks[i / kChunkBytes] |= uint64_t{secret[i]} << (8 * (i % kChunkBytes));
  return chunks;
}

// Refuses a chunk that no secret produces: only corrupt shares interpolate to one.
Bytes32 secret_of(const std::array<uint64_t, kChunks>& chunks) {
  Bytes32 secret{};
  for (size_t c = 0; c < kChunks; ++c) {
    size_t bytes = std::min(kChunkBytes, secret.size() - c * kChunkBytes);
    if (chunks[c] >> (8 * bytes) != 0)
      throw SecAggRefused(Reason::InconsistentShares,
                          "secure aggregation: the shares do not encode a secret");
    for (size_t b = 0; b < bytes; ++b)
      secret[c * kChunkBytes + b] = static_cast<uint8_t>(chunks[c] >> (8 * b));
  }
  return secret;
}

// The value at `x` of a polynomial with `coefficients` (lowest first), by Horner's rule.
uint64_t evaluate(const std::vector<uint64_t>& coefficients, uint64_t x) {
  uint64_t value = 0;
  for (auto it = coefficients.rbegin(); it != coefficients.rend(); ++it) value = add(multiply(value, x), *it);
  return value;
}

void check_points(const std::vector<uint32_t>& points) {
  std::set<uint32_t> seen;
  for (uint32_t x : points) {
    if (x == 0)
      throw SecAggRefused(Reason::Parameter, "secure aggregation: share point 0 would be the secret itself");
    if (!seen.insert(x).second)
      throw SecAggRefused(Reason::DuplicateShare,
                          "secure aggregation: two shares for holder point " + std::to_string(x));
  }
}

// Lagrange weights w_j with p(z) = sum_j w_j y_j for any polynomial of degree < points.size().
std::vector<uint64_t> lagrange_weights(const std::vector<uint32_t>& points, uint64_t z) {
  std::vector<uint64_t> weights;
  for (size_t j = 0; j < points.size(); ++j) {
    uint64_t numerator = 1, denominator = 1;
    for (size_t m = 0; m < points.size(); ++m) {
      if (m == j) continue;
      numerator = multiply(numerator, subtract(z, points[m]));
      denominator = multiply(denominator, subtract(points[j], points[m]));
    }
    weights.push_back(multiply(numerator, inverse(denominator)));
  }
  return weights;
}

uint64_t interpolate(const std::vector<uint64_t>& weights, const std::vector<Share>& shares, size_t chunk) {
  uint64_t value = 0;
  for (size_t j = 0; j < weights.size(); ++j) value = add(value, multiply(weights[j], shares[j].y[chunk]));
  return value;
}

void check_shares(const std::vector<Share>& shares, uint32_t threshold) {
  if (threshold < 1) throw SecAggRefused(Reason::Parameter, "secure aggregation: threshold 0");
  std::vector<uint32_t> points;
  for (const Share& share : shares) {
    points.push_back(share.x);
    bool well_formed = share.y.size() == kChunks &&
                       std::all_of(share.y.begin(), share.y.end(), [](uint64_t y) { return y < kPrime; });
    if (!well_formed)
      throw SecAggRefused(Reason::InconsistentShares, "secure aggregation: the share of holder point " +
                                                          std::to_string(share.x) + " is malformed");
  }
  check_points(points);
  if (shares.size() < threshold)
    throw SecAggRefused(Reason::BelowThreshold, "secure aggregation: " + std::to_string(shares.size()) +
                                                    " shares are below the threshold " +
                                                    std::to_string(threshold));
}

}  // namespace

std::vector<Share> shamir_split(const Bytes32& secret, uint32_t threshold,
                                const std::vector<uint32_t>& points) {
  detail::require_sodium();
  if (threshold < 1 || threshold > points.size())
    throw SecAggRefused(Reason::Parameter, "secure aggregation: threshold " + std::to_string(threshold) +
                                               " for " + std::to_string(points.size()) + " shares");
  check_points(points);
  std::vector<Share> shares;
  for (uint32_t x : points) shares.push_back(Share{x, std::vector<uint64_t>(kChunks)});
  std::array<uint64_t, kChunks> chunks = chunks_of(secret);
  std::vector<uint64_t> coefficients(threshold);
  for (size_t c = 0; c < kChunks; ++c) {
    coefficients[0] = chunks[c];
    for (size_t i = 1; i < threshold; ++i) coefficients[i] = random_element();
    for (Share& share : shares) share.y[c] = evaluate(coefficients, share.x);
  }
  sodium_memzero(coefficients.data(), coefficients.size() * sizeof(uint64_t));
  sodium_memzero(chunks.data(), sizeof chunks);
  return shares;
}

Bytes32 shamir_combine(const std::vector<Share>& shares, uint32_t threshold) {
  check_shares(shares, threshold);
  std::vector<Share> basis(shares.begin(), shares.begin() + threshold);
  std::vector<uint32_t> basis_points;
  for (const Share& share : basis) basis_points.push_back(share.x);
  // Shares past the threshold must lie on the polynomial the first `threshold` define.
  for (size_t extra = threshold; extra < shares.size(); ++extra) {
    std::vector<uint64_t> weights = lagrange_weights(basis_points, shares[extra].x);
    for (size_t c = 0; c < kChunks; ++c)
      if (interpolate(weights, basis, c) != shares[extra].y[c])
        throw SecAggRefused(Reason::InconsistentShares, "secure aggregation: the share of holder point " +
                                                            std::to_string(shares[extra].x) +
                                                            " disagrees with the others");
  }
  std::vector<uint64_t> weights = lagrange_weights(basis_points, 0);
  std::array<uint64_t, kChunks> chunks{};
  for (size_t c = 0; c < kChunks; ++c) chunks[c] = interpolate(weights, basis, c);
  Bytes32 secret = secret_of(chunks);
  sodium_memzero(chunks.data(), sizeof chunks);
  return secret;
}

}  // namespace tn::federated::secagg
