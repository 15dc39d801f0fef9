#include "driver_settings.h"

#include <algorithm>
#include <vector>

#include "error.h"

namespace gpuprov {
namespace {

constexpr const char* kEndpointKey = "endpoint";

const char* TypeOfValue(const CloudSettingValue& value) {
  if (std::holds_alternative<std::string>(value)) return "string";
  if (std::holds_alternative<std::int64_t>(value)) return "integer";
  return "boolean";
}

gpuprov_type_config_type ConfigTypeOf(const CloudSettingValue& value) {
  if (std::holds_alternative<std::string>(value)) return GPUPROV_CONFIG_STRING;
  if (std::holds_alternative<std::int64_t>(value)) return GPUPROV_CONFIG_INTEGER;
  return GPUPROV_CONFIG_BOOLEAN;
}

std::string Article(const char* type) {
  return std::string(type[0] == 'i' ? "an " : "a ") + type;
}

}  // namespace

std::string AllowedKeysText(const DriverInfo& driver) {
  std::vector<std::string> names{kEndpointKey};
  if (driver.config_keys) {
    for (const auto& k : *driver.config_keys) names.push_back(k.name);
  }
  std::sort(names.begin(), names.end());
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

void CheckCloudSettings(const Config& config, const DriverInfo& driver) {
  if (!driver.config_keys) return;
  auto table = config.clouds.find(driver.name);
  if (table == config.clouds.end()) return;
  const std::string file =
      config.display_name.empty() ? std::string("config.toml") : config.display_name;
  auto lines = config.cloud_key_lines.find(driver.name);
  // Keys in file order, so the first mistake a reader sees is the one reported.
  std::vector<std::pair<int, std::string>> keys;
  for (const auto& [key, value] : table->second) {
    int line = 0;
    if (lines != config.cloud_key_lines.end()) {
      if (auto it = lines->second.find(key); it != lines->second.end()) line = it->second;
    }
    keys.emplace_back(line, key);
  }
  std::sort(keys.begin(), keys.end());
  const std::string hint = "`gpuprov drivers " + driver.name + "` describes each key";
  for (const auto& [line, key] : keys) {
    const CloudSettingValue& value = table->second.at(key);
    const std::string at = file + (line > 0 ? ":" + std::to_string(line) : std::string()) + ": ";
    gpuprov_type_config_type wanted = GPUPROV_CONFIG_STRING;
    bool known = key == kEndpointKey;
    for (const auto& k : *driver.config_keys) {
      if (k.name == key) {
        wanted = k.type;
        known = true;
      }
    }
    if (!known) {
      throw UsageError(at + "unknown key '" + key + "' in [clouds." + driver.name + "]; the " +
                           driver.name + " driver accepts: " + AllowedKeysText(driver),
                       "check the spelling, or remove the line; " + hint);
    }
    if (ConfigTypeOf(value) != wanted) {
      const char* want = ConfigTypeName(wanted);
      std::string fix = hint;
      if (wanted == GPUPROV_CONFIG_INTEGER && ConfigTypeOf(value) == GPUPROV_CONFIG_STRING) {
        fix = "write the number without quotes";
      } else if (wanted == GPUPROV_CONFIG_BOOLEAN &&
                 ConfigTypeOf(value) == GPUPROV_CONFIG_STRING) {
        fix = "write true or false without quotes";
      } else if (wanted == GPUPROV_CONFIG_STRING) {
        fix = "put the value in quotes";
      }
      throw UsageError(at + "key 'clouds." + driver.name + "." + key + "' must be " +
                           Article(want) + " for the " + driver.name + " driver, not " +
                           Article(TypeOfValue(value)),
                       fix);
    }
  }
}

}  // namespace gpuprov
