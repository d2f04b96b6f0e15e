#include "device_metadata.h"

namespace tn::server {

nlohmann::json metadata_to_json(const v1::DeviceMetadata& metadata) {
  return {{"platform", metadata.platform()},
          {"runtime_version", metadata.runtime_version()},
          {"memory_bytes", metadata.memory_bytes()},
          {"labels", std::map<std::string, std::string>(metadata.labels().begin(), metadata.labels().end())}};
}

v1::DeviceMetadata metadata_from_json(const nlohmann::json& stored) {
  v1::DeviceMetadata metadata;
  if (!stored.is_object()) return metadata;
  auto text = [&](const char* key) {
    auto found = stored.find(key);
    return found != stored.end() && found->is_string() ? found->get<std::string>() : std::string();
  };
  metadata.set_platform(text("platform"));
  metadata.set_runtime_version(text("runtime_version"));
  auto memory = stored.find("memory_bytes");
  if (memory != stored.end() && memory->is_number_unsigned())
    metadata.set_memory_bytes(memory->get<uint64_t>());
  auto labels = stored.find("labels");
  if (labels != stored.end() && labels->is_object())
    for (const auto& [key, value] : labels->items())
      if (value.is_string()) (*metadata.mutable_labels())[key] = value.get<std::string>();
  return metadata;
}

}  // namespace tn::server
