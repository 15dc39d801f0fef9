#include "vm_records.h"

#include <Poco/DateTimeParser.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "cloud.h"
#include "console.h"
#include "error.h"
#include "fan_out.h"
#include "kubeconfig_merge.h"
#include "text_table.h"
#include "ttl.h"

namespace gpuprov {
namespace {

using Poco::JSON::Object;

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
  if (!r.cluster.empty()) {
    o->set("cluster", r.cluster);
    o->set("role", r.role);
    o->set("node_index", r.node_index);
    o->set("private_ip", r.private_ip);
  }
  if (r.disk_gb > 0) o->set("disk_gb", r.disk_gb);
  if (r.price_per_hour > 0) {
    o->set("price_per_hour", r.price_per_hour);
  } else {
    o->set("price_per_hour", Poco::Dynamic::Var());
  }
  o->set("spot", r.spot);
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
  o->set("age_seconds", static_cast<Poco::Int64>(RecordAgeSeconds(r.created_at)));
  if (std::optional<double> cost = CostSoFar(r, RecordAgeSeconds(r.created_at))) {
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

long RecordAgeSeconds(const std::string& rfc3339) {
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
    if (r.spot) price += " spot";
    const std::optional<double> cost_so_far = CostSoFar(r, age_seconds[i]);
    const std::string cost = cost_so_far ? DollarsText(*cost_so_far) : "-";
    rows.push_back({r.name, r.cloud, r.region.empty() ? "-" : r.region, ListedState(states[i]), address,
                    r.gpus.empty() ? "-" : r.gpus, price, cost,
                    !r.kubernetes ? "off" : r.access_mode == "none" ? "on" : r.access_mode,
                    HumanAge(age_seconds[i]), TtlCell(r, now)});
  }
  return AlignedColumns(rows);
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
  if (vm_it == cloud_it->second.end()) return "missing";
  return StateWithTtl(record, vm_it->second, std::chrono::system_clock::now());
}

std::string LiveStates::PreemptedReasonOf(const VmRecord& record) const {
  const auto cloud_it = preempted_reason.find(record.cloud);
  if (cloud_it == preempted_reason.end()) return "";
  const auto vm_it = cloud_it->second.find(record.name);
  return vm_it != cloud_it->second.end() ? vm_it->second : "";
}

std::string ListedState(const std::string& state) {
  return state == "preempted" ? "PREEMPTED" : state;
}

std::string PreemptedNotes(const std::vector<VmRecord>& records,
                           const std::vector<std::string>& states,
                           const std::vector<std::string>& reasons) {
  std::string out;
  for (size_t i = 0; i < records.size() && i < states.size(); ++i) {
    if (states[i] != "preempted") continue;
    const std::string& name = records[i].name;
    const std::string reason = i < reasons.size() && !reasons[i].empty() ? reasons[i] : "no reason given";
    out += name + ": preempted by " + records[i].cloud + " (" + reason +
           "); `gpuprov provision --name " + name + " --cloud " + records[i].cloud +
           "` makes it anew, `gpuprov watch " + name + "` does so whenever it happens\n";
  }
  return out;
}

LiveStates AskLiveStates(const AppContext& app, const std::vector<VmRecord>& records) {
  LiveStates live;
  std::map<std::string, bool> clouds;
  for (const auto& r : records) clouds[r.cloud] = true;
  if (clouds.empty()) return live;
  // One driver per cloud that has VMs, loaded here one after the other (loading reads files);
  // their list calls at once, one thread per cloud (fan_out.h).
  DriverHost host = app.MakeDriverHost();
  const auto config = std::make_shared<const Config>(app.LoadUserConfig());
  struct Asked {
    std::string cloud;
    std::optional<LoadedDriver> driver;
    std::vector<CloudVm> vms;
    std::string error;
  };
  std::vector<std::shared_ptr<Asked>> asked;
  std::vector<FanOutJob> jobs;
  for (const auto& [cloud_name, unused] : clouds) {
    auto a = std::make_shared<Asked>();
    a->cloud = cloud_name;
    try {
      a->driver.emplace(host.Load(cloud_name));
    } catch (const Error& e) {
      a->error = e.what();
    }
    asked.push_back(a);
    jobs.push_back([a, config](const std::atomic<bool>& stop) {
      if (!a->error.empty()) return;
      try {
        std::unique_ptr<Cloud> cloud =
            Cloud::Open(*a->driver, *config, [&stop] { return stop.load(); });
        a->vms = cloud->List();
      } catch (const std::exception& e) {
        a->error = e.what();
      }
    });
  }
  RunAllWithin(std::move(jobs), std::nullopt);
  for (const auto& a : asked) {
    if (a->error.empty()) {
      auto& states = live.by_cloud[a->cloud];
      for (const CloudVm& vm : a->vms) {
        states[vm.name] = vm.state;
        if (vm.state == "preempted") live.preempted_reason[a->cloud][vm.name] = vm.message;
      }
    } else {
      Console::Get().Warning("cannot ask " + a->cloud + " for live state (" + a->error +
                             "); using the recorded state");
    }
  }
  return live;
}

}  // namespace gpuprov
