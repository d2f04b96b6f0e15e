#include "params.h"

#include <cmath>
#include <sstream>

#include "federated/errors.h"

namespace tn::federated::detail {
namespace {

std::string number_str(double value) {
  std::ostringstream s;
  s.precision(17);
  s << value;
  return s.str();
}

std::string range_str(const Range& range) {
  std::string high = std::isinf(range.high) ? "inf" : number_str(range.high);
  return (range.low_open ? "(" : "[") + number_str(range.low) + ", " + high + (range.high_open ? ")" : "]");
}

bool within(double value, const Range& range) {
  bool above_low = range.low_open ? value > range.low : value >= range.low;
  bool below_high = range.high_open ? value < range.high : value <= range.high;
  return above_low && below_high;
}

}  // namespace

ParamReader::ParamReader(std::string strategy, const nlohmann::json& params)
    : strategy_(std::move(strategy)), params_(params) {
  if (!params_.is_object())
    throw ParameterRefused(strategy_ + ": parameters must be a JSON object, got " + params_.dump());
}

const nlohmann::json* ParamReader::take(const std::string& key) {
  known_.insert(key);
  auto found = params_.find(key);
  return found == params_.end() ? nullptr : &*found;
}

double ParamReader::real(const std::string& key, std::optional<double> fallback, Range range) {
  const nlohmann::json* given = take(key);
  if (!given && !fallback) throw ParameterRefused(strategy_ + ": parameter '" + key + "' is required");
  if (given && !given->is_number())
    throw ParameterRefused(strategy_ + ": parameter '" + key + "' must be a number, got " + given->dump());
  double value = given ? given->get<double>() : *fallback;
  if (!std::isfinite(value) || !within(value, range))
    throw ParameterRefused(strategy_ + ": parameter '" + key + "' = " + number_str(value) + " is outside " +
                           range_str(range));
  resolved_[key] = value;
  return value;
}

int64_t ParamReader::integer(const std::string& key, std::optional<int64_t> fallback, int64_t minimum,
                             int64_t maximum) {
  const nlohmann::json* given = take(key);
  if (!given && !fallback) throw ParameterRefused(strategy_ + ": parameter '" + key + "' is required");
  if (given && !given->is_number_integer())
    throw ParameterRefused(strategy_ + ": parameter '" + key + "' must be an integer, got " + given->dump());
  bool too_large = given && given->is_number_unsigned() && given->get<uint64_t>() > uint64_t(maximum);
  int64_t value = given ? (too_large ? maximum : given->get<int64_t>()) : *fallback;
  if (too_large || value < minimum || value > maximum)
    throw ParameterRefused(strategy_ + ": parameter '" + key +
                           "' = " + (given ? given->dump() : std::to_string(value)) + " is outside [" +
                           std::to_string(minimum) + ", " + std::to_string(maximum) + "]");
  resolved_[key] = value;
  return value;
}

nlohmann::json ParamReader::object(const std::string& key) {
  const nlohmann::json* given = take(key);
  nlohmann::json value = given ? *given : nlohmann::json::object();
  if (!value.is_object())
    throw ParameterRefused(strategy_ + ": parameter '" + key + "' must be a JSON object, got " +
                           value.dump());
  resolved_[key] = value;
  return value;
}

nlohmann::json ParamReader::finish() {
  for (const auto& [key, value] : params_.items()) {
    if (known_.contains(key)) continue;
    std::string known;
    for (const std::string& name : known_) known += (known.empty() ? "" : ", ") + name;
    throw ParameterRefused(strategy_ + ": unknown parameter '" + key + "' (known: " + known + ")");
  }
  return resolved_;
}

}  // namespace tn::federated::detail
