// The coordinator's Prometheus metrics, rendered in the text exposition format (version 0.0.4).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace tn::server {

class Metrics {
 public:
  // A request refused before it was served, by reason ("bad_signature", "reused_nonce", ...).
  void count_refusal(std::string_view reason);
  // A round attempt closed: "completed" or "abandoned", and how long it was open.
  void count_round(std::string_view outcome, double seconds);
  void add_bytes_broadcast(uint64_t bytes);
  void add_bytes_reduced(uint64_t bytes);
  void set_devices_registered(uint64_t count);
  // A central DP task's epsilon after its completed rounds (privacy accountant's, at its delta).
  void set_task_epsilon(const std::string& task, double epsilon);

  // Everything, with the number of devices checked in right now (a gauge the caller reads).
  std::string render(uint64_t devices_checked_in) const;

 private:
  static constexpr std::array<double, 10> kDurationBuckets = {0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800};
  struct Histogram {
    std::array<uint64_t, kDurationBuckets.size()> buckets{};  // cumulative, as Prometheus wants
    uint64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mutex_;
  std::map<std::string, uint64_t, std::less<>> refusals_;
  std::map<std::string, uint64_t, std::less<>> rounds_;
  Histogram round_seconds_;
  uint64_t bytes_broadcast_ = 0;
  uint64_t bytes_reduced_ = 0;
  uint64_t devices_registered_ = 0;
  std::map<std::string, double> task_epsilon_;
};

}  // namespace tn::server
