// Masks: ChaCha20 expansion of seeds into words modulo 2^bits, and a device's masked input
// (secure_aggregation.h).
#include <string>

#include "secagg_internal.h"

namespace tn::federated::secagg {
namespace detail {

void check_bits(unsigned bits) {
  if (bits < 1 || bits > 32)
    throw SecAggRefused(SecAggRefused::Reason::Parameter,
                        "secure aggregation: bits " + std::to_string(bits) + " is outside [1, 32]");
}

uint32_t word_mask(unsigned bits) { return bits == 32 ? ~uint32_t{0} : (uint32_t{1} << bits) - 1; }

void apply_mask(std::vector<uint32_t>& vector, const Bytes32& seed, Sign sign, unsigned bits) {
  // A keystream word reduced modulo 2^bits is uniform there because 2^bits divides 2^32.
  const uint32_t mask = word_mask(bits);
  KeyStream stream(seed);
  for (uint32_t& word : vector) {
    uint32_t pad = stream.next_word();
    word = (sign == Sign::Add ? word + pad : word - pad) & mask;
  }
}

}  // namespace detail

using detail::Sign;

namespace {

// Refuses (Parameter) a word of `words` not below 2^bits, naming it: a vector out of range would
// otherwise be reduced silently and shift the sum.
void check_words(const std::vector<uint32_t>& words, unsigned bits, const std::string& what) {
  const uint32_t mask = detail::word_mask(bits);
  for (size_t i = 0; i < words.size(); ++i)
    if (words[i] > mask)
      throw SecAggRefused(SecAggRefused::Reason::Parameter,
                          "secure aggregation: " + what + " word " + std::to_string(i) + " is " +
                              std::to_string(words[i]) + ", not below 2^" + std::to_string(bits));
}

}  // namespace

std::vector<uint32_t> expand_mask(const Bytes32& seed, size_t length, unsigned bits) {
  detail::check_bits(bits);
  std::vector<uint32_t> mask(length, 0);
  detail::apply_mask(mask, seed, Sign::Add, bits);
  return mask;
}

std::vector<uint32_t> mask_input(const std::vector<uint32_t>& input, unsigned bits,
                                 const Bytes32& self_mask_seed, DeviceIndex me,
                                 const std::map<DeviceIndex, Bytes32>& pairwise_seeds) {
  detail::check_bits(bits);
  check_words(input, bits, "input");
  std::vector<uint32_t> masked = input;
  detail::apply_mask(masked, self_mask_seed, Sign::Add, bits);
  for (const auto& [peer, seed] : pairwise_seeds) {
    if (peer == me)
      throw SecAggRefused(
          SecAggRefused::Reason::Parameter,
          "secure aggregation: device " + std::to_string(me) + " has a pairwise seed with itself");
    detail::apply_mask(masked, seed, me < peer ? Sign::Add : Sign::Subtract, bits);
  }
  return masked;
}

void add_modular(std::vector<uint32_t>& sum, const std::vector<uint32_t>& term, unsigned bits) {
  detail::check_bits(bits);
  if (sum.size() != term.size())
    throw SecAggRefused(SecAggRefused::Reason::Parameter,
                        "secure aggregation: adding " + std::to_string(term.size()) + " words to a sum of " +
                            std::to_string(sum.size()));
  check_words(term, bits, "masked input");
  const uint32_t mask = detail::word_mask(bits);
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = (sum[i] + term[i]) & mask;
}

}  // namespace tn::federated::secagg
