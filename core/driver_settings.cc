#include "driver_settings.h"

#include <algorithm>
#include <vector>

#include "error.h"

namespace gpuprov {
namespace {

constexpr const char* kEndpointKey = "endpoint";

gpuprov_type_config_type TypeOf(const CloudSettingScalar& value) {
  if (std::holds_alternative<std::string>(value)) return GPUPROV_CONFIG_STRING;
  if (std::holds_alternative<std::int64_t>(value)) return GPUPROV_CONFIG_INTEGER;
  if (std::holds_alternative<bool>(value)) return GPUPROV_CONFIG_BOOLEAN;
  return GPUPROV_CONFIG_STRING_LIST;
}

gpuprov_type_config_type TypeOf(const CloudSettingValue& value) {
  const std::optional<CloudSettingScalar> scalar = AsScalar(value);
  return scalar ? TypeOf(*scalar) : GPUPROV_CONFIG_TABLE;
}

std::string Article(const char* type) {
  return std::string(type[0] == 'i' ? "an " : "a ") + type;
}

std::string NamesText(const std::vector<DriverConfigKey>& keys) {
  std::vector<std::string> names;
  for (const auto& k : keys) {
    if (k.replaced_by.empty()) names.push_back(k.name);
  }
  std::sort(names.begin(), names.end());
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

const DriverConfigKey* FindKey(const std::vector<DriverConfigKey>& keys, const std::string& name) {
  for (const auto& k : keys) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

/// Checks tables key by key: \a driver's declared keys against config's values.
class SettingsChecker {
 public:
  SettingsChecker(const Config& config, const DriverInfo& driver)
      : driver_(driver),
        file_(config.display_name.empty() ? std::string("config.toml") : config.display_name),
        hint_("`gpuprov drivers " + driver.name + "` describes each key") {
    if (auto it = config.cloud_key_lines.find(driver.name); it != config.cloud_key_lines.end()) {
      lines_ = it->second;
    }
  }

  /// file:line: of a key ("retry.max_attempts" for a member).
  std::string At(const std::string& key) const {
    auto it = lines_.find(key);
    return file_ + (it != lines_.end() && it->second > 0 ? ":" + std::to_string(it->second) : "") +
           ": ";
  }

  /// Keys in file order, so the first mistake a reader sees is the one reported.
  std::vector<std::string> ByLine(const CloudSettings& table) const {
    std::vector<std::pair<int, std::string>> keys;
    for (const auto& entry : table) {
      auto it = lines_.find(entry.first);
      keys.emplace_back(it == lines_.end() ? 0 : it->second, entry.first);
    }
    std::sort(keys.begin(), keys.end());
    std::vector<std::string> out;
    for (auto& k : keys) out.push_back(std::move(k.second));
    return out;
  }

  /// Throws when \a value (written as \a written, the path in [clouds.NAME]) is not of \a key's
  /// type, or is a table with a member the key does not declare or of another type.
  void CheckValue(const std::string& written, const DriverConfigKey& key,
                  const CloudSettingValue& value) const {
    const gpuprov_type_config_type got = TypeOf(value);
    if (got != key.type) throw Mistyped(written, key, got);
    if (key.type != GPUPROV_CONFIG_TABLE) return;
    const auto& table = std::get<CloudSettingTable>(value);
    std::vector<std::pair<int, std::string>> members;
    for (const auto& entry : table) {
      auto it = lines_.find(written + "." + entry.first);
      members.emplace_back(it == lines_.end() ? 0 : it->second, entry.first);
    }
    std::sort(members.begin(), members.end());
    for (const auto& [line, name] : members) {
      const std::string path = written + "." + name;
      const DriverConfigKey* member = FindKey(key.members, name);
      if (member == nullptr) {
        throw UsageError(At(path) + "unknown key '" + name + "' in clouds." + driver_.name + "." +
                             written + "; the " + driver_.name + " driver's " + key.name +
                             " accepts: " + NamesText(key.members),
                         "check the spelling, or remove it; " + hint_);
      }
      const gpuprov_type_config_type member_got = TypeOf(table.at(name));
      if (member_got != member->type) throw Mistyped(path, *member, member_got);
    }
  }

 private:
  Error Mistyped(const std::string& written, const DriverConfigKey& key,
                      gpuprov_type_config_type got) const {
    std::string fix = hint_;
    if (key.type == GPUPROV_CONFIG_INTEGER && got == GPUPROV_CONFIG_STRING) {
      fix = "write the number without quotes";
    } else if (key.type == GPUPROV_CONFIG_BOOLEAN && got == GPUPROV_CONFIG_STRING) {
      fix = "write true or false without quotes";
    } else if (key.type == GPUPROV_CONFIG_STRING && got != GPUPROV_CONFIG_TABLE &&
               got != GPUPROV_CONFIG_STRING_LIST) {
      fix = "put the value in quotes";
    } else if (key.type == GPUPROV_CONFIG_STRING_LIST) {
      fix = "write a list in brackets: " + key.name + " = [\"a\", \"b\"]";
    } else if (key.type == GPUPROV_CONFIG_TABLE) {
      fix = "write a table in braces: " + key.name + " = {" + key.members.front().name +
            " = ...}; " + hint_;
    }
    return UsageError(At(written) + "key 'clouds." + driver_.name + "." + written +
                          "' must be " + Article(ConfigTypeName(key.type)) + " for the " +
                          driver_.name + " driver, not " + Article(ConfigTypeName(got)),
                      fix);
  }

  const DriverInfo& driver_;
  std::string file_;
  std::string hint_;
  std::map<std::string, int> lines_;
};

}  // namespace

std::string AllowedKeysText(const DriverInfo& driver) {
  std::vector<DriverConfigKey> keys{{kEndpointKey, GPUPROV_CONFIG_STRING, ""}};
  if (driver.config_keys) {
    keys.insert(keys.end(), driver.config_keys->begin(), driver.config_keys->end());
  }
  return NamesText(keys);
}

CheckedCloudSettings CheckCloudSettings(const Config& config, const DriverInfo& driver) {
  CheckedCloudSettings out{config, {}};
  if (!driver.config_keys) return out;
  auto table = config.clouds.find(driver.name);
  if (table == config.clouds.end()) return out;
  const SettingsChecker checker(config, driver);
  const DriverConfigKey endpoint{kEndpointKey, GPUPROV_CONFIG_STRING, ""};
  CloudSettings current;
  for (const std::string& key : checker.ByLine(table->second)) {
    const CloudSettingValue& value = table->second.at(key);
    const DriverConfigKey* declared =
        key == kEndpointKey ? &endpoint : FindKey(*driver.config_keys, key);
    // The host checked at load that a former name's key (and member) is declared.
    const std::string& name = declared ? declared->replaced_by : key;
    const size_t dot = name.find('.');
    const std::string top = name.substr(0, dot);
    const DriverConfigKey* target = declared ? FindKey(*driver.config_keys, top) : nullptr;
    const DriverConfigKey* member_key =
        target && dot != std::string::npos ? FindKey(target->members, name.substr(dot + 1))
                                           : nullptr;
    if (declared == nullptr ||
        (!declared->replaced_by.empty() &&
         (target == nullptr || (dot != std::string::npos && member_key == nullptr)))) {
      throw UsageError(checker.At(key) + "unknown key '" + key + "' in [clouds." + driver.name +
                           "]; the " + driver.name + " driver accepts: " + AllowedKeysText(driver),
                       "check the spelling, or remove the line; `gpuprov drivers " + driver.name +
                           "` describes each key");
    }
    if (declared->replaced_by.empty()) {
      checker.CheckValue(key, *declared, value);
      // Members that former names earlier in the file put in this table stay beside its own.
      auto earlier = current.find(key);
      if (earlier != current.end() && std::holds_alternative<CloudSettingTable>(earlier->second)) {
        for (const auto& [member, member_value] : std::get<CloudSettingTable>(value)) {
          std::get<CloudSettingTable>(earlier->second)[member] = member_value;
        }
      } else {
        current[key] = value;
      }
      continue;
    }
    // A former name: checked as the current key (or table member) and passed under its name.
    const auto* written_table = table->second.count(top) > 0
                                    ? std::get_if<CloudSettingTable>(&table->second.at(top))
                                    : nullptr;
    const bool both = dot == std::string::npos
                          ? table->second.count(top) > 0
                          : written_table != nullptr &&
                                written_table->count(name.substr(dot + 1)) > 0;
    if (both) {
      throw UsageError(checker.At(key) + "key 'clouds." + driver.name + "." + key +
                           "' is the former name of '" + name + "', which is set too",
                       "remove the line with '" + key + "'");
    }
    out.warnings.push_back(checker.At(key) + "key 'clouds." + driver.name + "." + key +
                           "' is a former name: write '" + name + "' (the " + driver.name +
                           " driver reads '" + key + "' only until the next release)");
    if (dot == std::string::npos) {
      checker.CheckValue(key, *target, value);
      current[name] = value;
      continue;
    }
    checker.CheckValue(key, *member_key, value);
    CloudSettingValue& into = current[top];
    if (!std::holds_alternative<CloudSettingTable>(into)) into = CloudSettingTable{};
    std::get<CloudSettingTable>(into)[member_key->name] = *AsScalar(value);
  }
  out.config.clouds[driver.name] = std::move(current);
  return out;
}

}  // namespace gpuprov
