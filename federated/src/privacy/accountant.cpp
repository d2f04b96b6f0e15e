// The sampled Gaussian mechanism's RDP and its conversion to (epsilon, delta) (privacy_accountant.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <sstream>
#include <string>
#include <utility>

#include "federated/errors.h"
#include "federated/privacy_accountant.h"

namespace tn::federated::privacy {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

std::string number(double value) {
  std::ostringstream out;
  out.precision(17);
  out << value;
  return out.str();
}

void check_mechanism(double sampling_rate, double noise_multiplier) {
  if (!(sampling_rate >= 0 && sampling_rate <= 1))
    throw ParameterRefused("privacy: sampling_rate " + number(sampling_rate) + " is outside [0, 1]");
  if (!(noise_multiplier > 0 && std::isfinite(noise_multiplier)))
    throw ParameterRefused("privacy: noise_multiplier " + number(noise_multiplier) +
                           " must be positive and finite");
}

// An integer order costs that many terms: a bound keeps a call short (TF Privacy's and Opacus'
// lists stop at 512 and 256; epsilon from orders past a few thousand is never the smallest).
constexpr double kLargestOrder = 100000;

void check_order(double order) {
  if (!(order > 1 && order <= kLargestOrder))
    throw ParameterRefused("privacy: order " + number(order) + " must be above 1 and at most " +
                           number(kLargestOrder));
}

// log(exp(a) + exp(b)) without overflow; -infinity stands for a zero term.
double log_add(double a, double b) {
  if (a == -kInfinity) return b;
  if (b == -kInfinity) return a;
  double high = std::max(a, b);
  return high + std::log1p(std::exp(-std::abs(a - b)));
}

// log(exp(a) - exp(b)) for a >= b.
double log_sub(double a, double b) {
  if (b == -kInfinity) return a;
  return a + std::log(-std::expm1(b - a));
}

// log(erfc(x)). erfc underflows past x = 26.5, where the terms that need it are still significant
// (a tiny erfc multiplies a huge exp(i^2 / (2 sigma^2))), so from 26 on the asymptotic expansion
// erfc(x) = exp(-x^2) / (x sqrt(pi)) * sum_k (-1)^k (2k-1)!! / (2x^2)^k, whose ninth term is below
// 3e-21 there.
double log_erfc(double x) {
  if (x < 26) return std::log(std::erfc(x));
  double series = 1, term = 1;
  for (int k = 1; k <= 8; ++k) {
    term *= -(2.0 * k - 1) / (2 * x * x);
    series += term;
  }
  return -x * x - std::log(x) - 0.5 * std::log(std::numbers::pi) + std::log(series);
}

// log A_alpha for integer alpha: A = sum_k C(alpha, k) (1-q)^(alpha-k) q^k exp((k^2 - k) / (2 sigma^2)),
// all terms positive (Mironov, Talwar, Zhang 2019, section 3.3).
double log_a_integer(double q, double sigma, uint64_t alpha) {
  double log_q = std::log(q), log_1mq = std::log1p(-q);
  double log_binomial = 0, log_a = -kInfinity;
  for (uint64_t k = 0; k <= alpha; ++k) {
    double kk = static_cast<double>(k);
    double exponent = (kk * kk - kk) / (2 * sigma * sigma);
    log_a = log_add(log_a, log_binomial + kk * log_q + static_cast<double>(alpha - k) * log_1mq + exponent);
    if (k < alpha) log_binomial += std::log(static_cast<double>(alpha - k)) - std::log(kk + 1);
  }
  return log_a;
}

// log A_alpha for fractional alpha: the two series of Mironov, Talwar, Zhang 2019, section 3.3,
// split at z0 = sigma^2 log(1/q - 1) + 1/2, where q N(1, sigma^2) overtakes (1-q) N(0, sigma^2). The
// generalised binomial coefficients change sign past alpha, so positive and negative terms are
// summed apart and subtracted once. Past alpha the terms alternate and shrink; the series stops
// when both are below e^-30, so each omitted tail is too and log A (A >= 1) is off by less than
// 2 e^-30 = 1.9e-13.
double log_a_fractional(double q, double sigma, double alpha) {
  double log_q = std::log(q), log_1mq = std::log1p(-q);
  double z0 = sigma * sigma * (log_1mq - log_q) + 0.5;
  double scale = std::numbers::sqrt2 * sigma, two_var = 2 * sigma * sigma;
  double positive = -kInfinity, negative = -kInfinity;
  double log_binomial = 0;  // log |C(alpha, i)|
  bool binomial_positive = true;
  for (double i = 0;; ++i) {
    double j = alpha - i;
    double s0 = log_binomial + i * log_q + j * log_1mq + (i * i - i) / two_var + std::log(0.5) +
                log_erfc((i - z0) / scale);
    double s1 = log_binomial + j * log_q + i * log_1mq + (j * j - j) / two_var + std::log(0.5) +
                log_erfc((z0 - j) / scale);
    double& sum = binomial_positive ? positive : negative;
    sum = log_add(sum, log_add(s0, s1));
    if (i > alpha && std::max(s0, s1) < -30) break;
    log_binomial += std::log(std::abs(alpha - i)) - std::log(i + 1);
    if (alpha - i < 0) binomial_positive = !binomial_positive;
  }
  return log_sub(positive, negative);
}

}  // namespace

double sampled_gaussian_rdp(double sampling_rate, double noise_multiplier, double order) {
  check_mechanism(sampling_rate, noise_multiplier);
  check_order(order);
  if (sampling_rate == 0) return 0;
  if (sampling_rate == 1) return order / (2 * noise_multiplier * noise_multiplier);
  double log_a = order == std::floor(order)
                     ? log_a_integer(sampling_rate, noise_multiplier, static_cast<uint64_t>(order))
                     : log_a_fractional(sampling_rate, noise_multiplier, order);
  // A_alpha >= 1 in exact arithmetic; rounding may leave log A a hair below 0 when it is tiny.
  return std::max(0.0, log_a / (order - 1));
}

std::vector<double> sampled_gaussian_rdp(double sampling_rate, double noise_multiplier, uint64_t rounds,
                                         const std::vector<double>& orders) {
  std::vector<double> rdp;
  rdp.reserve(orders.size());
  for (double order : orders)
    rdp.push_back(static_cast<double>(rounds) * sampled_gaussian_rdp(sampling_rate, noise_multiplier, order));
  return rdp;
}

PrivacySpent epsilon_from_rdp(const std::vector<double>& orders, const std::vector<double>& rdp,
                              double delta) {
  if (!(delta > 0 && delta < 1))
    throw ParameterRefused("privacy: delta " + number(delta) + " is outside (0, 1)");
  if (orders.empty()) throw ParameterRefused("privacy: no orders");
  if (orders.size() != rdp.size())
    throw ParameterRefused("privacy: " + std::to_string(orders.size()) + " orders but " +
                           std::to_string(rdp.size()) + " RDP values");
  PrivacySpent best{kInfinity, orders.front()};
  for (size_t i = 0; i < orders.size(); ++i) {
    check_order(orders[i]);
    if (!(rdp[i] >= 0)) throw ParameterRefused("privacy: RDP " + number(rdp[i]) + " is negative or NaN");
    double epsilon = rdp[i] - std::log(delta) / (orders[i] - 1);
    if (epsilon < best.epsilon) best = {epsilon, orders[i]};
  }
  return best;
}

std::vector<double> default_orders() {
  std::vector<double> orders;
  for (int tenths = 11; tenths <= 109; ++tenths) orders.push_back(tenths / 10.0);
  for (int order = 12; order <= 63; ++order) orders.push_back(order);
  for (double order : {128, 256, 512}) orders.push_back(order);
  return orders;
}

RdpAccountant::RdpAccountant(std::vector<double> orders) : orders_(std::move(orders)) {
  if (orders_.empty()) throw ParameterRefused("privacy: no orders");
  for (double order : orders_) check_order(order);
  rdp_.assign(orders_.size(), 0.0);
}

void RdpAccountant::add_rounds(double sampling_rate, double noise_multiplier, uint64_t rounds) {
  std::vector<double> added = sampled_gaussian_rdp(sampling_rate, noise_multiplier, rounds, orders_);
  for (size_t i = 0; i < rdp_.size(); ++i) rdp_[i] += added[i];
}

}  // namespace tn::federated::privacy
