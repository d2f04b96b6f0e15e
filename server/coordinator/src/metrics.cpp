#include "metrics.h"

#include <iomanip>
#include <sstream>

namespace tn::server {

void Metrics::count_refusal(std::string_view reason) {
  std::lock_guard lock(mutex_);
  auto found = refusals_.find(reason);
  if (found == refusals_.end()) found = refusals_.emplace(std::string(reason), 0).first;
  ++found->second;
}

void Metrics::count_round(std::string_view outcome, double seconds) {
  std::lock_guard lock(mutex_);
  auto found = rounds_.find(outcome);
  if (found == rounds_.end()) found = rounds_.emplace(std::string(outcome), 0).first;
  ++found->second;
  for (size_t i = 0; i < kDurationBuckets.size(); ++i)
    if (seconds <= kDurationBuckets[i]) ++round_seconds_.buckets[i];
  ++round_seconds_.count;
  round_seconds_.sum += seconds;
}

void Metrics::add_bytes_broadcast(uint64_t bytes) {
  std::lock_guard lock(mutex_);
  bytes_broadcast_ += bytes;
}

void Metrics::add_bytes_reduced(uint64_t bytes) {
  std::lock_guard lock(mutex_);
  bytes_reduced_ += bytes;
}

void Metrics::set_devices_registered(uint64_t count) {
  std::lock_guard lock(mutex_);
  devices_registered_ = count;
}

void Metrics::set_task_epsilon(const std::string& task, double epsilon) {
  std::lock_guard lock(mutex_);
  task_epsilon_[task] = epsilon;
}

std::string Metrics::render(uint64_t devices_checked_in) const {
  std::lock_guard lock(mutex_);
  std::ostringstream out;
  out << "# HELP torchnative_rounds_total Round attempts closed, by outcome.\n"
         "# TYPE torchnative_rounds_total counter\n";
  for (const char* outcome : {"completed", "abandoned"}) {
    auto found = rounds_.find(std::string_view(outcome));
    out << "torchnative_rounds_total{outcome=\"" << outcome << "\"} "
        << (found == rounds_.end() ? 0 : found->second) << "\n";
  }
  out << "# HELP torchnative_round_duration_seconds Time from a round's start to its close.\n"
         "# TYPE torchnative_round_duration_seconds histogram\n";
  for (size_t i = 0; i < kDurationBuckets.size(); ++i)
    out << "torchnative_round_duration_seconds_bucket{le=\"" << kDurationBuckets[i] << "\"} "
        << round_seconds_.buckets[i] << "\n";
  out << "torchnative_round_duration_seconds_bucket{le=\"+Inf\"} " << round_seconds_.count << "\n"
      << "torchnative_round_duration_seconds_sum " << round_seconds_.sum << "\n"
      << "torchnative_round_duration_seconds_count " << round_seconds_.count << "\n";
  out << "# HELP torchnative_devices_registered Devices registered.\n"
         "# TYPE torchnative_devices_registered gauge\n"
      << "torchnative_devices_registered " << devices_registered_ << "\n"
      << "# HELP torchnative_devices_checked_in Devices waiting in CheckIn for work now.\n"
         "# TYPE torchnative_devices_checked_in gauge\n"
      << "torchnative_devices_checked_in " << devices_checked_in << "\n"
      << "# HELP torchnative_bytes_broadcast_total Model bytes the hub sent to devices.\n"
         "# TYPE torchnative_bytes_broadcast_total counter\n"
      << "torchnative_bytes_broadcast_total " << bytes_broadcast_ << "\n"
      << "# HELP torchnative_bytes_reduced_total Contribution bytes the hub reduced.\n"
         "# TYPE torchnative_bytes_reduced_total counter\n"
      << "torchnative_bytes_reduced_total " << bytes_reduced_ << "\n"
      << "# HELP torchnative_requests_refused_total Requests refused before being served, by reason.\n"
         "# TYPE torchnative_requests_refused_total counter\n";
  for (const auto& [reason, count] : refusals_)
    out << "torchnative_requests_refused_total{reason=\"" << reason << "\"} " << count << "\n";
  out << "# HELP torchnative_task_privacy_epsilon A central DP task's epsilon after its completed rounds.\n"
         "# TYPE torchnative_task_privacy_epsilon gauge\n"
      << std::setprecision(17);  // the accountant's value, not 6 digits of it
  for (const auto& [task, epsilon] : task_epsilon_)
    out << "torchnative_task_privacy_epsilon{task=\"" << task << "\"} " << epsilon << "\n";
  return out.str();
}

}  // namespace tn::server
