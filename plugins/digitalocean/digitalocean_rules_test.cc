// SPDX-License-Identifier: Apache-2.0
#include "digitalocean_rules.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "driver_test_util.h"
#include "gpuprov/sdk.hpp"

namespace gpuprov::digitalocean {
namespace {

using Poco::JSON::Object;

using drivers::testing::ScopedEnv;
using drivers::testing::ScopedTempDir;

// Every place a token can come from, cleared for a test.
struct CleanTokenEnv {
  ScopedEnv a{"DIGITALOCEAN_TOKEN", nullptr};
  ScopedEnv b{"DIGITALOCEAN_ACCESS_TOKEN", nullptr};
  ScopedEnv c{"DO_API_TOKEN", nullptr};
  ScopedEnv d{"DIGITALOCEAN_CONTEXT", nullptr};
  ScopedEnv e{"MY_DO_TOKEN", nullptr};
  ScopedEnv f{"XDG_CONFIG_HOME", "/nonexistent-gpuprov-test"};
};

TEST(DigitalOceanToken, ResolutionOrder) {
  CleanTokenEnv clean;
  ScopedTempDir tmp("gpuprov-do");
  const std::filesystem::path& dir = tmp.path();
  std::filesystem::create_directories(dir / "doctl");
  std::ofstream(dir / "doctl" / "config.yaml")
      << "access-token: tok-doctl\nauth-contexts:\n  team: tok-team\ncontext: default\n";
  ScopedEnv xdg("XDG_CONFIG_HOME", dir.c_str());

  Object::Ptr config = new Object();
  EXPECT_EQ(ResolveToken(config)->value, "tok-doctl");
  {
    ScopedEnv ctx("DIGITALOCEAN_CONTEXT", "team");
    EXPECT_EQ(ResolveToken(config)->value, "tok-team");
  }
  config->set("token", "tok-config");
  EXPECT_EQ(ResolveToken(config)->value, "tok-config");
  ScopedEnv do_api("DO_API_TOKEN", "tok-do-api");
  EXPECT_EQ(ResolveToken(config)->value, "tok-do-api");
  ScopedEnv access("DIGITALOCEAN_ACCESS_TOKEN", "tok-access");
  EXPECT_EQ(ResolveToken(config)->value, "tok-access");
  ScopedEnv token("DIGITALOCEAN_TOKEN", "tok-token");
  EXPECT_EQ(ResolveToken(config)->value, "tok-token");
  EXPECT_EQ(ResolveToken(config)->origin, "$DIGITALOCEAN_TOKEN");
  config->set("token_env", "MY_DO_TOKEN");
  EXPECT_EQ(ResolveToken(config)->value, "tok-token");  // named but unset: next in order
  ScopedEnv mine("MY_DO_TOKEN", "tok-mine");
  EXPECT_EQ(ResolveToken(config)->value, "tok-mine");
}

TEST(DigitalOceanToken, NoneFound) {
  CleanTokenEnv clean;
  EXPECT_FALSE(ResolveToken(new Object()));
  EXPECT_NE(TokenHint().find("DIGITALOCEAN_TOKEN"), std::string::npos);
  EXPECT_NE(TokenHint().find("DIGITALOCEAN_ACCESS_TOKEN"), std::string::npos);
}

TEST(DigitalOceanRules, NamesAndTags) {
  EXPECT_NO_THROW(drivers::ValidateVmName("gpu-box.1", kVmNameRules));
  for (const char* bad : {"", "-a", "a-", "a_b", "a b", "x/y"}) {
    EXPECT_THROW(drivers::ValidateVmName(bad, kVmNameRules), gpuprov::sdk::DriverError) << bad;
  }
  EXPECT_THROW(drivers::ValidateVmName(std::string(64, 'a'), kVmNameRules), gpuprov::sdk::DriverError);
  EXPECT_EQ(VmTag("gpu-box.1"), "gpuprov-vm:gpu-box_1");
  EXPECT_EQ(KeyTag("123"), "gpuprov-key:123");
  EXPECT_EQ(TagSafe("team=ml x"), "team_ml_x");
  EXPECT_EQ(TagSafe(std::string(300, 'a')).size(), 255u);
  EXPECT_EQ(FirewallName("demo"), "gpuprov-demo");
}

TEST(DigitalOceanRules, States) {
  EXPECT_EQ(StateOf("new"), "pending");
  EXPECT_EQ(StateOf("active"), "running");
  EXPECT_EQ(StateOf("off"), "stopped");
  EXPECT_EQ(StateOf("archive"), "terminated");
  EXPECT_EQ(StateOf("weird"), "error");
}

TEST(DigitalOceanRules, UserDataLimit) {
  EXPECT_NO_THROW(drivers::CheckUserData(std::string(65536, 'x'), kMaxUserDataBytes, "DigitalOcean"));
  EXPECT_THROW(drivers::CheckUserData(std::string(65537, 'x'), kMaxUserDataBytes, "DigitalOcean"), gpuprov::sdk::DriverError);
}

TEST(DigitalOceanRules, ErrorsAndClassification) {
  EXPECT_EQ(ApiMessage(R"({"id":"unprocessable_entity","message":"Size is not available in this region."})"),
            "Size is not available in this region. (unprocessable_entity)");
  EXPECT_EQ(ApiMessage("<html>bad gateway</html>"), "<html>bad gateway</html>");
  EXPECT_EQ(ApiMessage(""), "no error message");
  EXPECT_EQ(Classify422("Size is not available in this region."), GPUPROV_STATUS_CAPACITY);
  EXPECT_EQ(Classify422("Region is not available"), GPUPROV_STATUS_CAPACITY);
  EXPECT_EQ(Classify422("creating this/these droplet(s) will exceed your droplet limit"),
            GPUPROV_STATUS_QUOTA);
  EXPECT_EQ(Classify422("You specified an invalid size for Droplet creation."),
            GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(Classify422("GPUs are busy", {"busy"}), GPUPROV_STATUS_CAPACITY);
}

// F10 (REFERENCE.md §F10): QUOTA only for the account's limits, never for a
// message that merely mentions a limit or "exceeds" (a field that is too long).
TEST(DigitalOceanRules, Classify422QuotaOnlyForAccountLimits) {
  EXPECT_EQ(Classify422("validation error: autoscale desired max nodes exceed limits, 24 "
                        "additional nodes but not enough available droplet limit"),
            GPUPROV_STATUS_QUOTA);
  EXPECT_EQ(Classify422("user_data exceeds the limit of 64 KiB"), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(Classify422("Name is too long (maximum is 255 characters); limit your input"),
            GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(Classify422("tags: a tag name may not exceed 255 characters"),
            GPUPROV_STATUS_INVALID_INPUT);
}

}  // namespace
}  // namespace gpuprov::digitalocean
