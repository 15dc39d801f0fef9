// SPDX-License-Identifier: Apache-2.0
#include "standard_settings.h"

#include <Poco/JSON/Parser.h>
#include <gtest/gtest.h>

#include <iterator>
#include <string>

#include "driver_request.h"

namespace gpuprov::drivers {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

Poco::JSON::Object::Ptr Config(const std::string& json) {
  return Poco::JSON::Parser().parse(json).extract<Poco::JSON::Object::Ptr>();
}

TEST(StandardSettings, ReadersTakeTheSettingOrTheDriversDefault) {
  const auto set = Config(R"({"poll_interval_ms": 250, "delete_wait_seconds": 30,
                              "token_env": "MY_TOKEN"})");
  EXPECT_EQ(PollIntervalSetting(set, milliseconds(2000)), milliseconds(250));
  EXPECT_EQ(DeleteWaitSetting(set, seconds(600)), seconds(30));
  EXPECT_EQ(TokenEnvSetting(set), "MY_TOKEN");
  const auto none = Config("{}");
  EXPECT_EQ(PollIntervalSetting(none, milliseconds(2000)), milliseconds(2000));
  EXPECT_EQ(DeleteWaitSetting(none, seconds(600)), seconds(600));
  EXPECT_EQ(TokenEnvSetting(none), "");
  EXPECT_EQ(PollIntervalSetting(nullptr, milliseconds(5)), milliseconds(5));
  // A poll interval of 0 would spin.
  EXPECT_EQ(PollIntervalSetting(Config(R"({"poll_interval_ms": 0})"), milliseconds(9)),
            milliseconds(1));
}

TEST(StandardSettings, TheKeysHaveTheStandardNamesAndTypes) {
  EXPECT_STREQ(PollIntervalKey("h").name, "poll_interval_ms");
  EXPECT_EQ(PollIntervalKey("h").type, GPUPROV_CONFIG_INTEGER);
  EXPECT_STREQ(DeleteWaitKey("h").name, "delete_wait_seconds");
  EXPECT_STREQ(TokenEnvKey("h").name, "token_env");
  EXPECT_EQ(TokenEnvKey("h").type, GPUPROV_CONFIG_STRING);
  EXPECT_STREQ(kRetryKey.name, "retry");
  EXPECT_EQ(kRetryKey.type, GPUPROV_CONFIG_TABLE);
  ASSERT_EQ(kRetryKey.member_count, std::size(kRetryMembers));
  for (size_t i = 0; i < kRetryKey.member_count; ++i) {
    EXPECT_EQ(kRetryKey.members[i], &kRetryMembers[i]);
    EXPECT_EQ(kRetryMembers[i].type, GPUPROV_CONFIG_INTEGER) << kRetryMembers[i].name;
  }
}

TEST(StandardSettings, EveryDeclaredRetryMemberIsReadByRetryPolicyFrom) {
  // A value for each declared member, none of them a default: the policy must change in each.
  Poco::JSON::Object::Ptr retry = new Poco::JSON::Object;
  for (const auto& member : kRetryMembers) retry->set(member.name, 7);
  Poco::JSON::Object::Ptr config = new Poco::JSON::Object;
  config->set(kRetrySetting, retry);
  const RetryPolicy p = RetryPolicyFrom(config);
  EXPECT_EQ(p.max_attempts, 7);
  EXPECT_EQ(p.base_delay, milliseconds(7));
  EXPECT_EQ(p.max_delay, milliseconds(7));
  EXPECT_EQ(p.max_retry_after, milliseconds(7));
  EXPECT_EQ(p.total_budget, milliseconds(7));
  EXPECT_EQ(p.attempt_timeout, milliseconds(7));
  // Fewer than one attempt would never send the request.
  retry->set("max_attempts", 0);
  EXPECT_EQ(RetryPolicyFrom(config).max_attempts, 1);
}

}  // namespace
}  // namespace gpuprov::drivers
