#include "check_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error.h"

namespace gpuprov {
namespace {

using ::testing::HasSubstr;

TEST(CheckReportOf, APassingCheckIsUsableWithWhereFromAndAccount) {
  const CloudCheckReport r = CheckReportOf("digitalocean", [] {
    CloudCheck c;
    c.account = "team acme";
    c.credentials_from = "$DIGITALOCEAN_TOKEN";
    return c;
  });
  EXPECT_TRUE(r.usable);
  EXPECT_EQ(r.credentials, "found");
  EXPECT_EQ(r.credentials_from, "$DIGITALOCEAN_TOKEN");
  EXPECT_EQ(r.account, "team acme");
  EXPECT_EQ(r.result, "ok");
  EXPECT_EQ(r.fix, "");
  EXPECT_FALSE(r.test_cloud);
}

TEST(CheckReportOf, AnAuthErrorIsMissingOrRejectedWithTheDriversFix) {
  const CloudCheckReport r = CheckReportOf("lambda", []() -> CloudCheck {
    throw DriverCallError(GPUPROV_STATUS_AUTH, "no Lambda API key found",
                          "set LAMBDA_API_KEY or write ~/.lambda_cloud/lambda_keys");
  });
  EXPECT_FALSE(r.usable);
  EXPECT_EQ(r.credentials, "missing or rejected");
  EXPECT_EQ(r.result, "no Lambda API key found");
  EXPECT_EQ(r.fix, "set LAMBDA_API_KEY or write ~/.lambda_cloud/lambda_keys");
  const CloudCheckReport no_hint = CheckReportOf(
      "aws", []() -> CloudCheck { throw DriverCallError(GPUPROV_STATUS_AUTH, "AuthFailure", ""); });
  // The build tree's gpuprov_test finds the source's README (an install: its package's).
  EXPECT_THAT(no_hint.fix, HasSubstr("plugins/aws/README.md lists where the driver looks"));
}

TEST(CheckReportOf, OtherFailuresLeaveCredentialsUnknownAndCtrlCIsThrownOn) {
  const CloudCheckReport r = CheckReportOf("gcp", []() -> CloudCheck {
    throw DriverCallError(GPUPROV_STATUS_TRANSIENT, "connection refused", "");
  });
  EXPECT_EQ(r.credentials, "unknown");
  EXPECT_THAT(r.fix, HasSubstr("gpuprov -v check --cloud gcp"));
  const CloudCheckReport usage = CheckReportOf("aws", []() -> CloudCheck {
    throw UsageError("config.toml:3: unknown key 'x' in [clouds.aws]", "see gpuprov drivers aws");
  });
  EXPECT_EQ(usage.fix, "see gpuprov drivers aws");
  EXPECT_THROW(CheckReportOf("aws",
                             []() -> CloudCheck {
                               throw DriverCallError(GPUPROV_STATUS_CANCELLED, "cancelled", "");
                             }),
               DriverCallError);
  EXPECT_TRUE(CheckReportOf("docker", [] { return CloudCheck{}; }).test_cloud);
}

CloudCheckReport Report(const std::string& cloud, bool usable) {
  CloudCheckReport r;
  r.cloud = cloud;
  r.usable = usable;
  r.test_cloud = cloud == kTestCloud;
  return r;
}

TEST(ChooseDefaultCloud, TheOnlyUsableCloudNotCountingTheTestCloud) {
  EXPECT_EQ(
      ChooseDefaultCloud({Report("aws", false), Report("lambda", true), Report("docker", true)}),
      "lambda");
}

TEST(ChooseDefaultCloud, NoneOrSeveralIsAUsageErrorNamingThem) {
  try {
    ChooseDefaultCloud({Report("aws", false), Report("docker", true)});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
    EXPECT_THAT(e.what(), HasSubstr("no cloud's credentials work"));
    EXPECT_THAT(e.hint(), HasSubstr("gpuprov check"));
    EXPECT_THAT(e.hint(), HasSubstr("--cloud docker"));
  }
  try {
    ChooseDefaultCloud({Report("aws", true), Report("gcp", false), Report("lambda", true)});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
    EXPECT_THAT(e.what(), HasSubstr("2 clouds are usable: aws, lambda"));
    EXPECT_THAT(e.hint(), HasSubstr("cloud = \"aws\" in [defaults]"));
  }
}

}  // namespace
}  // namespace gpuprov
