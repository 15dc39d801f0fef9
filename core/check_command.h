// `gpuprov check [--cloud CLOUD]` (like `sky check`): for each installed cloud driver, whether
// its credentials were found, where from (never the secret), the result of its one read-only
// API call (the driver's `check`), the account, and what to do when it fails. The same checks
// choose the cloud of a `provision` that names none.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "app_context.h"
#include "cloud.h"

namespace gpuprov {

/// The Docker test cloud: never chosen without --cloud (scripts/demo.sh names it).
inline constexpr const char* kTestCloud = "docker";

struct CloudCheckReport {
  std::string cloud;
  std::string driver_file;
  bool usable = false;           // the check call succeeded
  std::string credentials;       // "found", "missing or rejected", "unknown"
  std::string credentials_from;  // e.g. "$DIGITALOCEAN_TOKEN", "~/.aws/credentials [dev]"
  std::string account;           // the driver's description of the account
  std::string result;            // "ok", or what failed
  std::string fix;               // what to do when it failed
  bool test_cloud = false;       // kTestCloud
};

/// The report of one cloud from \a run (opening the driver and calling its check). A driver
/// error with status AUTH means the credentials are missing or rejected; other errors leave it
/// unknown. Ctrl-C (status CANCELLED, exit code 130) is thrown on.
CloudCheckReport CheckReportOf(const std::string& cloud, const std::function<CloudCheck()>& run);

/// Checks every driver that manages VMs (or only \a cloud, which must be installed);
/// \a with_test_cloud false leaves kTestCloud out.
std::vector<CloudCheckReport> CheckClouds(const DriverHost& host, const Config& config,
                                          const std::optional<std::string>& cloud,
                                          bool with_test_cloud = true);

/// The cloud a `provision` without --cloud (or spec, GPUPROV_CLOUD, [defaults] cloud) uses:
/// the only usable one, the test cloud not counted. Throws UsageError naming the usable clouds
/// (or saying there is none) otherwise.
std::string ChooseDefaultCloud(const std::vector<CloudCheckReport>& reports);

/// Prints the reports; exit 0 when the cloud asked for (else any cloud but the test cloud) is
/// usable, 1 otherwise.
int RunCheck(const AppContext& app, const std::optional<std::string>& cloud);

}  // namespace gpuprov
