#include "driver_settings.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error.h"

namespace gpuprov {
namespace {

using ::testing::HasSubstr;

DriverInfo Declaring() {
  DriverInfo d;
  d.name = "mycloud";
  d.config_keys = std::vector<DriverConfigKey>{
      {"region", GPUPROV_CONFIG_STRING, "the region"},
      {"poll_interval_ms", GPUPROV_CONFIG_INTEGER, "polling"},
      {"spot", GPUPROV_CONFIG_BOOLEAN, "spot capacity"},
  };
  return d;
}

/// The message of the UsageError CheckCloudSettings throws for \a toml, or "" when it passes.
std::string ErrorFor(const std::string& toml, const DriverInfo& driver = Declaring()) {
  Config config = ParseConfig(toml, "/home/u/.gpu-provisioner/config.toml");
  try {
    CheckCloudSettings(config, driver);
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
    return e.what();
  }
  return "";
}

TEST(CloudSettings, DeclaredKeysOfTheRightTypePass) {
  EXPECT_EQ(ErrorFor("[clouds.mycloud]\nregion = \"nyc2\"\npoll_interval_ms = 50\nspot = true\n"
                     "endpoint = \"http://127.0.0.1:4010\"\n"),
            "");
  // Another cloud's table is that driver's business.
  EXPECT_EQ(ErrorFor("[clouds.other]\nwhatever = 1\n"), "");
}

TEST(CloudSettings, UnknownKeyNamesFileLineKeyAndTheAllowedList) {
  const std::string e = ErrorFor("[defaults]\ncloud = \"mycloud\"\n\n[clouds.mycloud]\n"
                                 "region = \"nyc2\"\nregoin = \"nyc3\"\n");
  EXPECT_THAT(e, HasSubstr("/home/u/.gpu-provisioner/config.toml:6: unknown key 'regoin' in "
                           "[clouds.mycloud]"));
  EXPECT_THAT(e, HasSubstr("accepts: endpoint, poll_interval_ms, region, spot"));
}

TEST(CloudSettings, MistypedKeyNamesTheTypes) {
  EXPECT_THAT(ErrorFor("[clouds.mycloud]\npoll_interval_ms = \"50\"\n"),
              HasSubstr("config.toml:2: key 'clouds.mycloud.poll_interval_ms' must be an integer "
                        "for the mycloud driver, not a string"));
  EXPECT_THAT(ErrorFor("[clouds.mycloud]\nregion = 3\n"),
              HasSubstr("config.toml:2: key 'clouds.mycloud.region' must be a string"));
  EXPECT_THAT(ErrorFor("[clouds.mycloud]\nspot = \"yes\"\n"),
              HasSubstr("must be a boolean for the mycloud driver, not a string"));
  EXPECT_THAT(ErrorFor("[clouds.mycloud]\nendpoint = 1\n"),
              HasSubstr("key 'clouds.mycloud.endpoint' must be a string"));
}

TEST(CloudSettings, TheFirstMistakeInFileOrderIsReported) {
  EXPECT_THAT(ErrorFor("[clouds.mycloud]\nzzz = 1\naaa = 2\n"), HasSubstr(":2: unknown key 'zzz'"));
}

TEST(CloudSettings, SecretValuesAreNeverQuoted) {
  const std::string e = ErrorFor("[clouds.mycloud]\napi_token = \"hunter2-secret\"\n");
  EXPECT_THAT(e, HasSubstr("unknown key 'api_token'"));
  EXPECT_THAT(e, ::testing::Not(HasSubstr("hunter2")));
}

TEST(CloudSettings, ADriverThatDeclaresNothingGetsItsTableUnchecked) {
  DriverInfo old_driver;
  old_driver.name = "mycloud";  // an ABI 1.0 driver: config_keys is nullopt
  EXPECT_EQ(ErrorFor("[clouds.mycloud]\nanything = 1\n", old_driver), "");
}

TEST(CloudSettings, AllowedKeysTextIsSortedAndHasEndpoint) {
  EXPECT_EQ(AllowedKeysText(Declaring()), "endpoint, poll_interval_ms, region, spot");
}

}  // namespace
}  // namespace gpuprov
