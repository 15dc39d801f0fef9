#include "vm_commands.h"

#include <Poco/DateTimeParser.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "cloud.h"
#include "console.h"
#include "crash_point.h"
#include "error.h"
#include "kubeconfig.h"
#include "kubeconfig_merge.h"
#include "openssh.h"
#include "prompt.h"
#include "remote.h"
#include "spec.h"
#include "ttl.h"

namespace gpuprov {
namespace {

using Poco::JSON::Object;

long AgeSeconds(const std::string& rfc3339) {
  if (rfc3339.empty()) return 0;
  try {
    int tz = 0;
    Poco::DateTime created = Poco::DateTimeParser::parse(rfc3339, tz);
    auto created_tp = std::chrono::system_clock::from_time_t(created.timestamp().epochTime());
    return static_cast<long>(std::chrono::duration_cast<std::chrono::seconds>(
                                 std::chrono::system_clock::now() - created_tp)
                                 .count());
  } catch (const Poco::Exception&) {
    return 0;
  }
}

std::string HumanAge(long seconds) {
  if (seconds < 120) return std::to_string(seconds) + "s";
  if (seconds < 7200) return std::to_string(seconds / 60) + "m";
  if (seconds < 172800) return std::to_string(seconds / 3600) + "h";
  return std::to_string(seconds / 86400) + "d";
}

/// Dollars spent so far: hours since the record's created_at times the offer's $/h; nullopt
/// when the price is unknown.
std::optional<double> CostSoFar(const VmRecord& r, long age_seconds) {
  if (r.price_per_hour <= 0) return std::nullopt;
  return r.price_per_hour * static_cast<double>(std::max(0L, age_seconds)) / 3600.0;
}

/// "$1.23"; "$0.0042" below a cent.
std::string DollarsText(double dollars) {
  std::string text = FormatPricePerHour(dollars);
  return text.substr(0, text.size() - 2);
}

/// What the user sees as the VM's state: the cloud's word when we asked, else the record's phase.
struct ListedVm {
  VmRecord record;
  std::string state;
};

Object::Ptr ToJsonObject(const VmRecord& r, const std::string& state) {
  Object::Ptr o = new Object;
  o->set("name", r.name);
  o->set("cloud", r.cloud);
  o->set("region", r.region);
  o->set("state", state);
  o->set("phase", r.phase);
  o->set("address", r.public_ip);
  o->set("ssh_port", r.ssh_port);
  o->set("ssh_user", r.ssh_user);
  o->set("kubernetes", r.kubernetes);
  o->set("route", r.route);
  if (!r.route_reason.empty()) o->set("route_reason", r.route_reason);
  o->set("access", r.access_mode);
  if (r.disk_gb > 0) o->set("disk_gb", r.disk_gb);
  if (r.price_per_hour > 0) {
    o->set("price_per_hour", r.price_per_hour);
  } else {
    o->set("price_per_hour", Poco::Dynamic::Var());
  }
  Object::Ptr tags = new Object;
  for (const auto& [key, value] : r.tags) tags->set(key, value);
  o->set("tags", tags);
  Poco::JSON::Array::Ptr open_ports = new Poco::JSON::Array;
  for (int port : r.open_ports) open_ports->add(port);
  o->set("open_ports", open_ports);
  Poco::JSON::Array::Ptr allow_from = new Poco::JSON::Array, allow_from_ports = new Poco::JSON::Array;
  for (const auto& cidr : r.allow_from) allow_from->add(cidr);
  for (int port : r.allow_from_ports) allow_from_ports->add(port);
  o->set("allow_from", allow_from);
  o->set("allow_from_ports", allow_from_ports);
  if (!r.kubeconfig.empty()) o->set("kubeconfig", r.kubeconfig);
  for (const char* key : {kTunnelPortKey, kKubeconfigMergedKey}) {
    auto it = r.extra.find(key);
    if (it == r.extra.end()) continue;
    if (std::string(key) == kTunnelPortKey) {
      o->set(key, std::atoi(it->second.c_str()));
    } else {
      o->set(key, it->second);
    }
  }
  Object::Ptr probe = new Object;
  for (const auto& [key, value] : r.probe) probe->set(key, value);
  o->set("probe", probe);
  Object::Ptr phase_seconds = new Object;
  for (const auto& [key, value] : r.phase_seconds) phase_seconds->set(key, value);
  o->set("phase_seconds", phase_seconds);
  o->set("instance_type", r.instance_type);
  o->set("gpus", r.gpus);
  o->set("vm_id", r.vm_id);
  o->set("created_at", r.created_at);
  o->set("age_seconds", static_cast<Poco::Int64>(AgeSeconds(r.created_at)));
  if (std::optional<double> cost = CostSoFar(r, AgeSeconds(r.created_at))) {
    o->set("cost_so_far", std::round(*cost * 10000) / 10000);  // USD, to 1/100 cent
  } else {
    o->set("cost_so_far", Poco::Dynamic::Var());
  }
  if (!r.last_error.empty()) o->set("last_error", r.last_error);
  const auto now = std::chrono::system_clock::now();
  if (const auto left = TtlSecondsLeft(r, now)) {
    o->set("ttl_deadline", r.ttl_deadline);
    o->set("ttl_seconds_left", static_cast<Poco::Int64>(std::max(0L, *left)));
  }
  o->set("expired", TtlExpired(r, now));
  if (r.idle_ttl_seconds > 0) o->set("idle_ttl_seconds", static_cast<Poco::Int64>(r.idle_ttl_seconds));
  if (!r.powered_off_cost.empty()) o->set("powered_off_cost", r.powered_off_cost);
  return o;
}

}  // namespace

Poco::JSON::Object::Ptr VmRecordObject(const VmRecord& record, const std::string& state) {
  return ToJsonObject(record, state);
}

std::string ListTable(const std::vector<VmRecord>& records, const std::vector<std::string>& states,
                      const std::vector<long>& age_seconds,
                      std::chrono::system_clock::time_point now) {
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "CLOUD", "REGION", "STATE", "ADDRESS", "GPUS", "$/H", "COST", "K8S", "AGE", "TTL"}};
  for (size_t i = 0; i < records.size(); ++i) {
    const VmRecord& r = records[i];
    std::string address = r.public_ip.empty() ? "-" : r.public_ip;
    if (!r.public_ip.empty() && r.ssh_port != 22) address += ":" + std::to_string(r.ssh_port);
    std::string price = "-";
    if (r.price_per_hour > 0) price = DollarsText(r.price_per_hour);  // the header says per hour
    const std::optional<double> cost_so_far = CostSoFar(r, age_seconds[i]);
    const std::string cost = cost_so_far ? DollarsText(*cost_so_far) : "-";
    rows.push_back({r.name, r.cloud, r.region.empty() ? "-" : r.region, states[i], address,
                    r.gpus.empty() ? "-" : r.gpus, price, cost,
                    !r.kubernetes ? "off" : r.access_mode == "none" ? "on" : r.access_mode,
                    HumanAge(age_seconds[i]), TtlCell(r, now)});
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      std::string cell = row[c];
      if (c + 1 < row.size()) cell.resize(width[c] + 2, ' ');
      line += cell;
    }
    out += line + "\n";
  }
  return out;
}

VmRecord LoadVmRecord(const StateStore& store, const std::string& name) {
  std::optional<VmRecord> rec = store.Load(name);
  if (!rec) {
    throw UsageError("no VM named '" + name + "'", "`gpuprov list` shows the VMs gpuprov knows");
  }
  return *rec;
}

SshTarget SshTargetOf(const AppContext& app, const VmRecord& rec) {
  if (rec.public_ip.empty()) {
    throw Error("VM " + rec.name + " has no address yet (phase " + rec.phase + ")",
                "re-run `gpuprov provision --name " + rec.name + "` to finish it");
  }
  auto key = rec.extra.find("ssh_key");
  return SshTarget{rec.public_ip, rec.ssh_port, rec.ssh_user.empty() ? "root" : rec.ssh_user,
                   key != rec.extra.end() ? key->second
                                          : (app.paths.keys_dir() / "id_ed25519").string(),
                   app.paths.known_hosts().string()};
}

std::string VmRecordJson(const VmRecord& record) {
  std::ostringstream out;
  ToJsonObject(record, record.phase)->stringify(out, 2);
  return out.str();
}

std::optional<std::string> LiveStates::StateOf(const VmRecord& record) const {
  const auto cloud_it = by_cloud.find(record.cloud);
  if (cloud_it == by_cloud.end()) return std::nullopt;  // not asked, or it did not answer
  const auto vm_it = cloud_it->second.find(record.name);
  return vm_it != cloud_it->second.end() ? vm_it->second : "missing";
}

LiveStates AskLiveStates(const AppContext& app, const std::vector<VmRecord>& records) {
  LiveStates live;
  std::map<std::string, bool> clouds;
  for (const auto& r : records) clouds[r.cloud] = true;
  if (clouds.empty()) return live;
  // One driver per cloud that has VMs, one list call each.
  DriverHost host = app.MakeDriverHost();
  Config config = app.LoadUserConfig();
  for (const auto& [cloud_name, unused] : clouds) {
    try {
      std::unique_ptr<Cloud> cloud = Cloud::Open(host, cloud_name, config);
      auto& states = live.by_cloud[cloud_name];
      for (const CloudVm& vm : cloud->List()) states[vm.name] = vm.state;
    } catch (const Error& e) {
      Console::Get().Warning("cannot ask " + cloud_name + " for live state (" + e.what() +
                             "); using the recorded state");
    }
  }
  return live;
}

int RunList(const AppContext& app, bool refresh) {
  Console& console = Console::Get();
  StateStore store(app.paths);
  std::vector<std::string> problems;
  std::vector<VmRecord> records = store.List(&problems);
  for (const auto& p : problems) console.Warning(p);

  const LiveStates live = refresh ? AskLiveStates(app, records) : LiveStates{};
  std::vector<ListedVm> rows;
  for (const auto& r : records) rows.push_back({r, live.StateOf(r).value_or(r.phase)});
  if (app.json_output) {
    Poco::JSON::Array::Ptr arr = new Poco::JSON::Array;
    for (const auto& row : rows) arr->add(ToJsonObject(row.record, row.state));
    app.Print(arr);
    return 0;
  }
  if (rows.empty()) {
    console.Result("no VMs; create one with `gpuprov provision --name NAME`\n");
    return 0;
  }
  std::vector<VmRecord> shown;
  std::vector<std::string> states;
  std::vector<long> ages;
  for (const auto& row : rows) {
    shown.push_back(row.record);
    states.push_back(row.state);
    ages.push_back(AgeSeconds(row.record.created_at));
  }
  console.Result(ListTable(shown, states, ages));
  return 0;
}

int RunSshConfig(const AppContext& app, const std::string& name) {
  ValidateVmName(name, "VM name");
  const VmRecord rec = LoadVmRecord(StateStore(app.paths), name);
  const SshTarget target = SshTargetOf(app, rec);
  Console::Get().Result(SshConfigBlock(SshHostAlias(name), target));
  return 0;
}

void RemoveMergedKubeconfigEntries(const AppContext& app, const VmRecord& rec) {
  auto merged = rec.extra.find(kKubeconfigMergedKey);
  if (merged == rec.extra.end()) return;
  const std::string context = KubeContextName(rec.name);
  Console& console = Console::Get();
  try {
    const KubeconfigEdit edit = RemoveFromKubeconfigFile(merged->second, context,
                                                         app.paths.lock_dir() / "kubeconfig.lock");
    if (edit.changed) {
      console.Info("removed cluster, user and context " + context + " from " + edit.file.string() +
                   " (previous contents in " + edit.backup.string() + ")");
    }
  } catch (const Error& e) {
    console.Warning(std::string(e.what()) + "; remove them yourself: kubectl config delete-context " +
                    context + "; kubectl config delete-cluster " + context +
                    "; kubectl config delete-user " + context);
  }
}

DownOutcome DeleteVmAndFiles(const AppContext& app, StateStore& store,
                             std::optional<VmRecord>& rec, const std::string& name,
                             const std::string& cloud_name) {
  Console& console = Console::Get();
  DriverHost host = app.MakeDriverHost();
  std::unique_ptr<Cloud> cloud = Cloud::Open(host, cloud_name, app.LoadUserConfig());
  if (rec) {
    rec->phase = "deleting";
    store.Save(*rec);
    CrashPoint("down-deleting-recorded");
  }
  console.Step("delete", "deleting VM " + name + " on " + cloud_name);
  bool deleted = cloud->Delete(rec ? rec->vm_id : "", name);
  CrashPoint("down-vm-deleted");
  if (rec && !rec->public_ip.empty()) {
    Remote().forget_host_key(app.paths.known_hosts().string(), rec->public_ip, rec->ssh_port);
    CrashPoint("down-host-key-forgotten");
  }
  std::error_code ec;
  std::filesystem::remove(app.paths.kubeconfig(name), ec);
  if (rec) RemoveMergedKubeconfigEntries(app, *rec);
  CrashPoint("down-kubeconfig-removed");
  if (rec) store.Remove(name);
  if (deleted) {
    return {"removed", "removed VM " + name + " from " + cloud_name + " and its local files\n"};
  }
  if (rec) {
    return {"already_gone",
            "VM " + name + " was already gone from " + cloud_name + "; removed its local files\n"};
  }
  return {"nothing", "nothing to remove: " + cloud_name + " has no VM named '" + name + "'\n"};
}

int RunDown(const AppContext& app, const std::string& name,
            const std::optional<std::string>& cloud_flag, bool yes) {
  ValidateVmName(name, "VM name");
  Console& console = Console::Get();
  StateStore store(app.paths);
  FileLock lock = store.LockVm(name, 60 * 1000);
  std::optional<VmRecord> rec = store.Load(name);
  // The result: the VM as `list -o json` shows it, state "deleted", and what happened.
  auto result = [&](const std::string& what, const std::string& text) {
    if (!app.json_output) {
      console.Result(text);
      return;
    }
    VmRecord shown = rec.value_or(VmRecord{});
    if (!rec) {
      shown.name = name;
      shown.cloud = cloud_flag.value_or("");
    }
    Poco::JSON::Object::Ptr o = ToJsonObject(shown, "deleted");
    o->set("result", what);
    app.Print(o);
  };
  if (!rec && !cloud_flag) {
    result("nothing", "nothing to remove: gpuprov has no VM named '" + name + "'\n");
    return 0;
  }
  const std::string cloud_name = rec ? rec->cloud : *cloud_flag;
  if (rec && cloud_flag && *cloud_flag != rec->cloud) {
    throw UsageError("VM '" + name + "' is on " + rec->cloud + ", not " + *cloud_flag,
                     "drop --cloud, or name the right cloud");
  }
  const ConsentDecision consent = DecideDownConsent(yes, app.prompter && app.prompter->CanAsk());
  if (consent.consent == Consent::kAsk) {
    std::string what = "VM " + name + " on " + cloud_name;
    if (rec) {
      std::string details = rec->instance_type;
      if (rec->price_per_hour > 0) {
        details += (details.empty() ? "" : ", ") + FormatPricePerHour(rec->price_per_hour);
      }
      if (!rec->public_ip.empty()) details += (details.empty() ? "" : ", ") + rec->public_ip;
      if (!details.empty()) what += " (" + details + ")";
    }
    if (!app.prompter->Confirm("delete " + what + " and its local files?")) {
      console.Note("nothing deleted: VM " + name + " is kept");
      return kExitFailure;
    }
  }
  const DownOutcome outcome = DeleteVmAndFiles(app, store, rec, name, cloud_name);
  result(outcome.result, outcome.text);
  return 0;
}

std::vector<VmRecord> ExpiredRecords(const std::vector<VmRecord>& records,
                                     std::chrono::system_clock::time_point now,
                                     const std::optional<std::string>& cloud,
                                     const LiveStates* live) {
  std::vector<VmRecord> out;
  for (const VmRecord& r : records) {
    if (cloud && r.cloud != *cloud) continue;
    if (!ExpiryReason(r, now, live ? live->StateOf(r) : std::nullopt).empty()) out.push_back(r);
  }
  return out;
}

int RunDownExpired(const AppContext& app, bool yes) {
  Console& console = Console::Get();
  StateStore store(app.paths);
  std::vector<std::string> problems;
  const std::vector<VmRecord> records = store.List(&problems);
  for (const auto& p : problems) console.Warning(p);
  // A VM with an idle TTL has no deadline that passes: its cloud is asked whether the node
  // powered itself off. Nothing is asked when no record has an idle TTL.
  std::vector<VmRecord> with_idle_ttl;
  std::copy_if(records.begin(), records.end(), std::back_inserter(with_idle_ttl),
               [](const VmRecord& r) { return r.idle_ttl_seconds > 0; });
  const LiveStates live = AskLiveStates(app, with_idle_ttl);
  const std::vector<VmRecord> expired =
      ExpiredRecords(records, std::chrono::system_clock::now(), std::nullopt, &live);
  Poco::JSON::Array::Ptr results = new Poco::JSON::Array;
  if (expired.empty()) {
    if (app.json_output) {
      app.Print(results);
    } else {
      console.Result("no expired VMs: no recorded VM's TTL has passed, and none with an idle TTL "
                     "is powered off\n");
    }
    return 0;
  }
  std::string names;
  for (const VmRecord& r : expired) {
    names += (names.empty() ? "" : ", ") + r.name + " (" + r.cloud + ", " +
             ExpiryReason(r, std::chrono::system_clock::now(), live.StateOf(r)) + ")";
  }
  if (!yes) {
    if (!(app.prompter && app.prompter->CanAsk())) {
      throw UsageError("`gpuprov down --expired` needs --yes when stdin is not a terminal",
                       "it would delete " + names + "; `gpuprov list` shows them");
    }
    if (!app.prompter->Confirm("delete " + std::to_string(expired.size()) +
                               " expired VM(s) and their local files: " + names + "?")) {
      console.Note("nothing deleted");
      return kExitFailure;
    }
  }
  bool failed = false;
  for (const VmRecord& listed : expired) {
    try {
      FileLock lock = store.LockVm(listed.name, 60 * 1000);
      std::optional<VmRecord> rec = store.Load(listed.name);
      // `gpuprov ttl` may have extended it, or a `down` removed it, since the listing.
      if (!rec || ExpiryReason(*rec, std::chrono::system_clock::now(), live.StateOf(*rec)).empty()) {
        console.Note("VM " + listed.name + " is no longer expired; kept");
        continue;
      }
      const VmRecord shown = *rec;
      const DownOutcome outcome = DeleteVmAndFiles(app, store, rec, listed.name, shown.cloud);
      if (app.json_output) {
        Poco::JSON::Object::Ptr o = ToJsonObject(shown, "deleted");
        o->set("result", outcome.result);
        results->add(o);
      } else {
        console.Result(outcome.text);
      }
    } catch (const Error& e) {
      if (e.exit_code() == kExitInterrupted) throw;
      failed = true;
      console.ErrorLine("VM " + listed.name + ": " + e.what(), e.hint());
    }
  }
  if (app.json_output) app.Print(results);
  return failed ? kExitFailure : kExitOk;
}

}  // namespace gpuprov
