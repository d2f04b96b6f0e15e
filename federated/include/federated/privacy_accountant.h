// Privacy accounting for differentially private tasks: the Rényi differential privacy (RDP) of the
// sampled Gaussian mechanism, composed over rounds and converted to (epsilon, delta).
//
// The mechanism: each round includes every device independently with probability
// `sampling_rate` (Poisson subsampling), sums their updates clipped to L2 norm C, and adds
// Gaussian noise of standard deviation noise_multiplier * C. Its RDP at order alpha is the
// Rényi divergence between N(0, sigma^2) mixed with N(1, sigma^2) at weight q and N(0, sigma^2),
// computed as in Mironov, Talwar and Zhang, "Rényi Differential Privacy of the Sampled Gaussian
// Mechanism" (2019), section 3.3: the binomial sum for integer orders, the two-sided series for
// fractional ones, both in log space. These are the quantities TF Privacy's and Opacus'
// compute_rdp return.
//
// The coordinator keeps one per central DP task (server/coordinator/src/central_dp.h; docs/privacy.md).
#pragma once

#include <cstdint>
#include <vector>

namespace tn::federated::privacy {

// RDP at `order` of one round. Refuses (ParameterRefused, naming the parameter) a sampling rate
// outside [0, 1], a noise multiplier that is not positive and finite, and an order not above 1 or
// above 100,000. Integer orders cost `order` terms; fractional ones a series that stops once,
// past the order, its terms fall below e^-30.
double sampled_gaussian_rdp(double sampling_rate, double noise_multiplier, double order);

// RDP at each of `orders` of `rounds` identical rounds: RDP composes additively.
std::vector<double> sampled_gaussian_rdp(double sampling_rate, double noise_multiplier, uint64_t rounds,
                                         const std::vector<double>& orders);

struct PrivacySpent {
  double epsilon;  // +infinity when no order gives a finite bound
  double order;    // the order that gave it
};

// (epsilon, delta) from RDP values at `orders`, minimised over the orders, by the conversion of
// Mironov, "Rényi Differential Privacy" (CSF 2017), Proposition 3: an (alpha, rdp)-RDP mechanism
// is (rdp + log(1/delta) / (alpha - 1), delta)-DP. Tighter conversions exist (Balle et al. 2020,
// Canonne, Kamath and Steinke 2020, as newer TF Privacy uses); this one is the classic bound that
// early TF Privacy and Abadi et al.'s moments accountant use. Refuses delta outside (0, 1), empty
// or mismatched lists, orders not above 1 and negative or NaN RDP values.
PrivacySpent epsilon_from_rdp(const std::vector<double>& orders, const std::vector<double>& rdp,
                              double delta);

// 1.1, 1.2, ..., 10.9, then 12, 13, ..., 63, then 128, 256, 512: TF Privacy's usual list, fine
// enough near small orders (large epsilon) and reaching the large ones that small epsilons need.
std::vector<double> default_orders();

// The RDP spent by a task so far, at fixed orders, for rounds whose sampling rate or noise may
// differ from round to round.
class RdpAccountant {
 public:
  // Refuses an empty list and orders that sampled_gaussian_rdp refuses.
  explicit RdpAccountant(std::vector<double> orders = default_orders());

  // Adds `rounds` rounds of the sampled Gaussian mechanism. Refuses as sampled_gaussian_rdp does,
  // and then leaves the total as it was.
  void add_rounds(double sampling_rate, double noise_multiplier, uint64_t rounds = 1);

  const std::vector<double>& orders() const { return orders_; }
  const std::vector<double>& rdp() const { return rdp_; }
  PrivacySpent spent(double delta) const { return epsilon_from_rdp(orders_, rdp_, delta); }

 private:
  std::vector<double> orders_;
  std::vector<double> rdp_;
};

}  // namespace tn::federated::privacy
