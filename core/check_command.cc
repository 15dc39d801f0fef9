#include "check_command.h"

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>

#include <memory>
#include <optional>
#include <sstream>

#include "config.h"
#include "console.h"
#include "driver_host.h"
#include "error.h"
#include "fan_out.h"

namespace gpuprov {

CloudCheckReport CheckReportOf(const std::string& cloud, const std::function<CloudCheck()>& run) {
  CloudCheckReport r;
  r.cloud = cloud;
  r.test_cloud = cloud == kTestCloud;
  try {
    const CloudCheck check = run();
    r.usable = true;
    r.credentials = "found";
    r.credentials_from = check.credentials_from;
    r.account = check.account;
    r.result = "ok";
  } catch (const DriverCallError& e) {
    if (e.status() == GPUPROV_STATUS_CANCELLED) throw;
    r.result = e.what();
    r.credentials = e.status() == GPUPROV_STATUS_AUTH ? "missing or rejected" : "unknown";
    r.fix = !e.hint().empty() ? e.hint()
            : e.status() == GPUPROV_STATUS_AUTH
                ? "set the credentials the message names; " + DriverReadme(cloud) +
                      " lists where the driver looks"
                : "retry; if it persists, run `gpuprov -v check --cloud " + cloud + "`";
  } catch (const Error& e) {
    if (e.exit_code() == kExitInterrupted) throw;
    r.result = e.what();
    r.credentials = "unknown";
    r.fix =
        !e.hint().empty() ? e.hint() : "run `gpuprov -v check --cloud " + cloud + "` for details";
  }
  return r;
}

std::vector<CloudCheckReport> CheckClouds(const DriverHost& host, const Config& config,
                                          const std::optional<std::string>& cloud,
                                          bool with_test_cloud) {
  std::vector<DriverInfo> drivers;
  if (cloud) {
    drivers.push_back(host.Find(*cloud));  // throws naming the search path when missing
  } else {
    for (const DriverInfo& info : host.ListAll()) {
      if (!info.shadowed_by.empty() || (!with_test_cloud && info.name == kTestCloud)) continue;
      if (!info.ok() || info.has(GPUPROV_CAP_VM_LIFECYCLE)) drivers.push_back(info);
    }
  }
  // Every cloud's check at once, one thread each (fan_out.h): a check is an API call or two, so
  // `check` and `provision --cloud any` take as long as the slowest cloud, not the sum. Drivers
  // are loaded here first (loading reads files); each job owns what it touches.
  struct Slot {
    std::optional<LoadedDriver> driver;
    CloudCheckReport report;
  };
  const auto shared_config = std::make_shared<const Config>(config);
  std::vector<std::shared_ptr<Slot>> slots;
  std::vector<FanOutJob> jobs;
  for (const DriverInfo& info : drivers) {
    auto slot = std::make_shared<Slot>();
    slots.push_back(slot);
    CloudCheckReport& r = slot->report;
    if (!info.problem.empty()) {
      r.cloud = info.name;
      r.driver_file = info.path;
      r.credentials = "unknown";
      r.result = "the driver file is broken: " + info.problem;
      r.fix = "reinstall the driver (`gpuprov drivers` shows every file found)";
      r.test_cloud = info.name == kTestCloud;
      continue;
    }
    try {
      slot->driver.emplace(host.Load(info.name));
    } catch (const Error& e) {
      r = CheckReportOf(info.name, [&e]() -> CloudCheck { throw e; });
      r.driver_file = info.path;
      continue;
    }
    jobs.push_back([slot, shared_config, path = info.path](const std::atomic<bool>& stop) {
      slot->report = CheckReportOf(slot->driver->info().name, [&] {
        return Cloud::Open(*slot->driver, *shared_config, [&stop] { return stop.load(); })
            ->Check();
      });
      slot->report.driver_file = path;
    });
  }
  RunAllWithin(std::move(jobs), std::nullopt);
  std::vector<CloudCheckReport> reports;
  for (const auto& slot : slots) reports.push_back(slot->report);
  return reports;
}

std::string ChooseDefaultCloud(const std::vector<CloudCheckReport>& reports) {
  std::vector<std::string> usable;
  for (const auto& r : reports) {
    if (r.usable && !r.test_cloud) usable.push_back(r.cloud);
  }
  if (usable.size() == 1) return usable[0];
  if (usable.empty()) {
    throw UsageError("no cloud given, and no cloud's credentials work here",
                     "`gpuprov check` shows each cloud's credentials and what to fix; or name "
                     "one with --cloud CLOUD (the Docker test cloud: --cloud docker)");
  }
  std::string list;
  for (const auto& c : usable) list += (list.empty() ? "" : ", ") + c;
  throw UsageError(
      "no cloud given, and " + std::to_string(usable.size()) + " clouds are usable: " + list,
      "pick one with --cloud CLOUD, or set cloud = \"" + usable[0] +
          "\" in [defaults] of config.toml");
}

namespace {

void PrintText(const std::vector<CloudCheckReport>& reports) {
  std::ostringstream out;
  for (const auto& r : reports) {
    out << r.cloud << (r.test_cloud ? " (local test cloud)" : "") << ": "
        << (r.usable ? "usable" : "not usable") << "\n";
    out << "  credentials: " << r.credentials;
    if (!r.credentials_from.empty()) out << " (from " << r.credentials_from << ")";
    out << "\n";
    if (!r.account.empty()) out << "  account:     " << r.account << "\n";
    out << "  check call:  " << r.result << "\n";
    if (!r.fix.empty()) out << "  fix:         " << r.fix << "\n";
  }
  if (reports.empty()) out << "no cloud drivers found (`gpuprov drivers` shows where it looked)\n";
  Console::Get().Result(out.str());
}

void PrintStructured(const AppContext& app, const std::vector<CloudCheckReport>& reports) {
  Poco::JSON::Array::Ptr arr = new Poco::JSON::Array;
  for (const auto& r : reports) {
    Poco::JSON::Object::Ptr o = new Poco::JSON::Object(Poco::JSON_PRESERVE_KEY_ORDER);
    o->set("cloud", r.cloud);
    o->set("usable", r.usable);
    o->set("credentials", r.credentials);
    o->set("credentials_from", r.credentials_from);
    o->set("account", r.account);
    o->set("result", r.result);
    o->set("fix", r.fix);
    o->set("test_cloud", r.test_cloud);
    o->set("driver_file", r.driver_file);
    arr->add(o);
  }
  app.Print(arr);
}

}  // namespace

int RunCheck(const AppContext& app, const std::optional<std::string>& cloud) {
  if (cloud && !IsValidCloudName(*cloud)) {
    throw UsageError("--cloud: '" + *cloud + "' is not a cloud name ([a-z0-9_-])",
                     "`gpuprov drivers` lists the clouds");
  }
  const DriverHost host = app.MakeDriverHost();
  const std::vector<CloudCheckReport> reports = CheckClouds(host, app.LoadUserConfig(), cloud);
  app.json_output ? PrintStructured(app, reports) : PrintText(reports);
  // With --cloud that cloud decides; without, a check passes when any real cloud is usable.
  bool usable = false;
  for (const auto& r : reports) usable = usable || (r.usable && (cloud || !r.test_cloud));
  return usable ? kExitOk : kExitFailure;
}

}  // namespace gpuprov
