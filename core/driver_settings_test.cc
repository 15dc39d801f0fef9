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
      {"regions", GPUPROV_CONFIG_STRING_LIST, "more regions"},
      {"retry", GPUPROV_CONFIG_TABLE, "retry policy", "",
       {{"max_attempts", GPUPROV_CONFIG_INTEGER, "attempts"},
        {"codes", GPUPROV_CONFIG_STRING_LIST, "codes to retry"}}},
      {"delete_wait_seconds", GPUPROV_CONFIG_INTEGER, "delete wait"},
      {"delete_timeout_s", 0, "", "delete_wait_seconds"},
      {"http_max_attempts", 0, "", "retry.max_attempts"},
  };
  return d;
}

/// The message of the UsageError CheckCloudSettings throws for \a toml, or "" when it passes.
std::string ErrorFor(const std::string& toml, const DriverInfo& driver = Declaring()) {
  Config config = ParseConfig(toml, "/home/u/.gpu-provisioner/config.toml");
  try {
    (void)CheckCloudSettings(config, driver);
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
  EXPECT_THAT(e, HasSubstr("accepts: delete_wait_seconds, endpoint, poll_interval_ms, region, "
                           "regions, retry, spot"));
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
  EXPECT_EQ(AllowedKeysText(Declaring()),
            "delete_wait_seconds, endpoint, poll_interval_ms, region, regions, retry, spot");
}

TEST(CloudSettings, StringListsAndTablesOfTheRightShapePass) {
  EXPECT_EQ(ErrorFor("[clouds.mycloud]\nregions = [\"a\", \"b\"]\n"
                     "retry = {max_attempts = 6, codes = [\"Throttling\"]}\n"),
            "");
  EXPECT_EQ(ErrorFor("[clouds.mycloud.retry]\nmax_attempts = 2\n"), "");
}

TEST(CloudSettings, ListsAndTablesAreCheckedWithFileAndLine) {
  EXPECT_THAT(ErrorFor("[clouds.mycloud]\nregions = \"a\"\n"),
              HasSubstr("config.toml:2: key 'clouds.mycloud.regions' must be a string list for "
                        "the mycloud driver, not a string"));
  EXPECT_THAT(ErrorFor("[clouds.mycloud]\nregion = [\"a\"]\n"),
              HasSubstr("key 'clouds.mycloud.region' must be a string for the mycloud driver, not "
                        "a string list"));
  EXPECT_THAT(ErrorFor("[clouds.mycloud]\nretry = 6\n"),
              HasSubstr("config.toml:2: key 'clouds.mycloud.retry' must be a table for the "
                        "mycloud driver, not an integer"));
  EXPECT_THAT(ErrorFor("[clouds.mycloud]\nregion = \"x\"\n\n[clouds.mycloud.retry]\n"
                       "max_attempts = 2\nmax_atempts = 3\n"),
              HasSubstr("config.toml:6: unknown key 'max_atempts' in clouds.mycloud.retry; the "
                        "mycloud driver's retry accepts: codes, max_attempts"));
  EXPECT_THAT(ErrorFor("[clouds.mycloud]\nretry = {max_attempts = \"6\"}\n"),
              HasSubstr("config.toml:2: key 'clouds.mycloud.retry.max_attempts' must be an "
                        "integer for the mycloud driver, not a string"));
}

TEST(CloudSettings, AFormerNameIsReadWithAWarningUnderTheCurrentName) {
  const Config config = ParseConfig("[clouds.mycloud]\nregion = \"x\"\ndelete_timeout_s = 60\n",
                                    "/home/u/.gpu-provisioner/config.toml");
  const CheckedCloudSettings checked = CheckCloudSettings(config, Declaring());
  ASSERT_EQ(checked.warnings.size(), 1u);
  EXPECT_THAT(checked.warnings[0],
              HasSubstr("config.toml:3: key 'clouds.mycloud.delete_timeout_s' is a former name: "
                        "write 'delete_wait_seconds'"));
  EXPECT_EQ(CloudSettingsJson(checked.config, "mycloud"),
            R"({"delete_wait_seconds":60,"region":"x"})");
  // The current name alone: no warning, nothing renamed.
  EXPECT_TRUE(CheckCloudSettings(ParseConfig("[clouds.mycloud]\ndelete_wait_seconds = 5\n", "c"),
                                 Declaring())
                  .warnings.empty());
}

TEST(CloudSettings, AFormerNameOfATableMemberGoesIntoThatTable) {
  const Config config =
      ParseConfig("[clouds.mycloud]\nhttp_max_attempts = 2\nretry = {codes = [\"x\"]}\n", "c");
  const CheckedCloudSettings checked = CheckCloudSettings(config, Declaring());
  ASSERT_EQ(checked.warnings.size(), 1u);
  EXPECT_THAT(checked.warnings[0], HasSubstr("write 'retry.max_attempts'"));
  EXPECT_EQ(CloudSettingsJson(checked.config, "mycloud"),
            R"({"retry":{"codes":["x"],"max_attempts":2}})");
  EXPECT_THAT(ErrorFor("[clouds.mycloud]\nhttp_max_attempts = \"2\"\n"),
              HasSubstr("key 'clouds.mycloud.http_max_attempts' must be an integer"));
}

TEST(CloudSettings, AFormerNameBesideItsCurrentNameIsRefused) {
  EXPECT_THAT(ErrorFor("[clouds.mycloud]\ndelete_wait_seconds = 1\ndelete_timeout_s = 2\n"),
              HasSubstr("config.toml:3: key 'clouds.mycloud.delete_timeout_s' is the former name "
                        "of 'delete_wait_seconds', which is set too"));
  EXPECT_THAT(ErrorFor("[clouds.mycloud]\nhttp_max_attempts = 2\nretry = {max_attempts = 3}\n"),
              HasSubstr("is the former name of 'retry.max_attempts', which is set too"));
}

}  // namespace
}  // namespace gpuprov
