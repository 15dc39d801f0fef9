// SPDX-License-Identifier: Apache-2.0
#include "standard_settings.h"

#include <algorithm>

#include "json_util.h"

namespace gpuprov::drivers {

std::chrono::milliseconds PollIntervalSetting(const Poco::JSON::Object::Ptr& config,
                                              std::chrono::milliseconds fallback) {
  if (!config) return fallback;
  return std::chrono::milliseconds(
      std::max<long long>(1, json::Int(config, kPollIntervalSetting, fallback.count())));
}

std::chrono::seconds DeleteWaitSetting(const Poco::JSON::Object::Ptr& config,
                                       std::chrono::seconds fallback) {
  if (!config) return fallback;
  return std::chrono::seconds(json::Int(config, kDeleteWaitSetting, fallback.count()));
}

std::string TokenEnvSetting(const Poco::JSON::Object::Ptr& config) {
  return config ? json::Str(config, kTokenEnvSetting) : "";
}

}  // namespace gpuprov::drivers
