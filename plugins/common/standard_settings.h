// SPDX-License-Identifier: Apache-2.0
//
// The settings every driver names the same way (docs/driver-protocol.md, "Standard settings"),
// declared once for a driver's config key table and read once from its settings. A driver puts
// the ones it reads in its table beside its own keys:
//
//   constexpr gpuprov_type_config_key kMyCloudConfigKeys[] = {
//       kit::kRetryKey,
//       kit::PollIntervalKey("how often a pending VM is polled (5000)"),
//       kit::DeleteWaitKey("how long down waits for the VM to go (600)"),
//       kit::TokenEnvKey("the environment variable that holds the API token"),
//       gpuprov::sdk::StringKey("region", "the region used when provision names none"),
//   };
//
// `endpoint` is the host's own key and never declared: DriverSettings::endpoint holds it.
#pragma once

#include <Poco/JSON/Object.h>

#include <chrono>
#include <string>

#include "gpuprov/sdk.hpp"

namespace gpuprov::drivers {

inline constexpr const char* kRetrySetting = "retry";
inline constexpr const char* kPollIntervalSetting = "poll_interval_ms";
inline constexpr const char* kDeleteWaitSetting = "delete_wait_seconds";
inline constexpr const char* kTokenEnvSetting = "token_env";

/// The members of `retry`, with RetryPolicy's defaults (RetryPolicyFrom reads them).
inline constexpr gpuprov_type_config_key kRetryMembers[] = {
    sdk::IntegerKey("max_attempts", "attempts per HTTP request, the first included (6)"),
    sdk::IntegerKey("base_delay_ms", "back-off after the first failure, doubling after each (500)"),
    sdk::IntegerKey("max_delay_ms", "the longest back-off (20000)"),
    sdk::IntegerKey("max_retry_after_ms", "the longest Retry-After honoured (60000)"),
    sdk::IntegerKey("total_budget_ms", "time for one request with its retries (120000)"),
    sdk::IntegerKey("attempt_timeout_ms", "timeout of one attempt (30000)"),
};

/// `retry = {max_attempts = 6, ...}` (or a [clouds.NAME.retry] section): the HTTP retry policy.
inline constexpr gpuprov_type_config_key kRetryKey = sdk::TableKey<kRetryMembers>(
    kRetrySetting, "the HTTP retry policy: a table of the members below");

/// `poll_interval_ms`: how often a wait asks the cloud again; \a help names what and the default.
constexpr gpuprov_type_config_key PollIntervalKey(const char* help) {
  return sdk::IntegerKey(kPollIntervalSetting, help);
}

/// `delete_wait_seconds`: how long delete_vm waits for the VM to be gone.
constexpr gpuprov_type_config_key DeleteWaitKey(const char* help) {
  return sdk::IntegerKey(kDeleteWaitSetting, help);
}

/// `token_env`: the environment variable that holds the cloud's API token or key, read before
/// the cloud's usual variables.
constexpr gpuprov_type_config_key TokenEnvKey(const char* help) {
  return sdk::StringKey(kTokenEnvSetting, help);
}

/// The settings' poll_interval_ms, else \a fallback; at least 1 ms.
std::chrono::milliseconds PollIntervalSetting(const Poco::JSON::Object::Ptr& config,
                                              std::chrono::milliseconds fallback);

/// The settings' delete_wait_seconds, else \a fallback.
std::chrono::seconds DeleteWaitSetting(const Poco::JSON::Object::Ptr& config,
                                       std::chrono::seconds fallback);

/// The settings' token_env, "" when not set.
std::string TokenEnvSetting(const Poco::JSON::Object::Ptr& config);

}  // namespace gpuprov::drivers
