// Reading a strategy's JSON parameters, refusing by name what does not fit. Private.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

namespace tn::federated::detail {

// An interval for a real parameter; an open end excludes its bound.
struct Range {
  double low;
  double high;
  bool low_open = false;
  bool high_open = false;
};

class ParamReader {
 public:
  // Refuses (ParameterRefused) params that are not a JSON object.
  ParamReader(std::string strategy, const nlohmann::json& params);

  // A finite number within `range`, or `fallback` when absent (required when there is none).
  double real(const std::string& key, std::optional<double> fallback, Range range);
  // An integer in [minimum, maximum], or `fallback` when absent (required when there is none).
  int64_t integer(const std::string& key, std::optional<int64_t> fallback, int64_t minimum, int64_t maximum);
  // A JSON object, {} when absent.
  nlohmann::json object(const std::string& key);
  // Refuses any parameter that was not read, listing the known ones. Returns every parameter
  // read, with defaults filled in.
  nlohmann::json finish();

 private:
  const nlohmann::json* take(const std::string& key);

  std::string strategy_;
  const nlohmann::json& params_;
  std::set<std::string> known_;
  nlohmann::json resolved_ = nlohmann::json::object();
};

}  // namespace tn::federated::detail
