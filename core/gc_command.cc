#include "gc_command.h"

#include <Poco/DateTimeParser.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "console.h"
#include "down_command.h"
#include "error.h"
#include "interrupt.h"
#include "ttl.h"
#include "vm_records.h"

namespace gpuprov {
namespace {

using Poco::JSON::Array;
using Poco::JSON::Object;

/// Seconds since \a rfc3339; nullopt when it is empty or unreadable.
std::optional<long> AgeOf(const std::string& rfc3339) {
  if (rfc3339.empty()) return std::nullopt;
  try {
    int tz = 0;
    Poco::DateTime created = Poco::DateTimeParser::parse(rfc3339, tz);
    created.makeUTC(tz);
    auto created_tp = std::chrono::system_clock::from_time_t(created.timestamp().epochTime());
    return static_cast<long>(std::chrono::duration_cast<std::chrono::seconds>(
                                 std::chrono::system_clock::now() - created_tp)
                                 .count());
  } catch (const Poco::Exception&) {
    return std::nullopt;
  }
}

std::string HumanAge(std::optional<long> seconds) {
  if (!seconds) return "-";
  long s = *seconds < 0 ? 0 : *seconds;
  if (s < 120) return std::to_string(s) + "s";
  if (s < 7200) return std::to_string(s / 60) + "m";
  if (s < 172800) return std::to_string(s / 3600) + "h";
  return std::to_string(s / 86400) + "d";
}

std::string Money(double value) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(value < 1 ? 3 : 2) << value;
  return out.str();
}

std::string Pad(std::string s, size_t width) {
  if (s.size() < width) s.resize(width, ' ');
  return s + "  ";
}

std::string Join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

enum class RecordState { kNone, kOnThisCloud, kUnreadable };

RecordState RecordOf(const StateStore& store, const std::string& vm_name,
                     const std::string& cloud) {
  try {
    std::optional<VmRecord> rec = store.Load(vm_name);
    if (!rec || rec->cloud != cloud) return RecordState::kNone;
    // An agent's record whose cluster's server has no record claims nothing: the cluster was
    // removed or its server's record lost, and nothing will join that agent again.
    if (rec->role == "agent" && !rec->cluster.empty() && rec->cluster != vm_name) {
      std::optional<VmRecord> server = store.Load(rec->cluster);
      if (!server || server->cloud != cloud) return RecordState::kNone;
    }
    return RecordState::kOnThisCloud;
  } catch (const Error& e) {
    // Not a valid VM name: no record can have it. Anything else (a corrupt or newer record):
    // gc cannot tell whose it is, so it is kept.
    return e.exit_code() == kExitUsage ? RecordState::kNone : RecordState::kUnreadable;
  }
}

bool Claimed(const CloudResource& resource, const StateStore& store, const std::string& cloud) {
  // What belongs to a cluster (an agent VM, the cluster's network or firewall, by the driver's
  // "cluster") is the server's as well: when the server (the VM named after the cluster) has
  // no record, the cluster was removed or its records were lost, and an agent's own record
  // does not keep it.
  if (!resource.cluster.empty() &&
      RecordOf(store, resource.cluster, cloud) == RecordState::kNone) {
    return false;
  }
  for (const std::string& vm : resource.vm_names) {
    if (RecordOf(store, vm, cloud) != RecordState::kNone) return true;
  }
  return false;
}

/// Asks on the terminal; true for "y" or "yes".
bool Confirm(const std::string& question) {
  std::cerr << question << " [y/N] " << std::flush;
  std::string answer;
  if (!std::getline(std::cin, answer)) return false;
  return answer == "y" || answer == "Y" || answer == "yes" || answer == "YES";
}

Object::Ptr OrphanJson(const GcOrphan& orphan, bool asked_to_delete) {
  const CloudResource& r = orphan.resource;
  Object::Ptr o = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  o->set("kind", r.kind);
  o->set("id", r.id);
  o->set("name", r.name);
  Array::Ptr names = new Array;
  for (const auto& n : r.vm_names) names->add(n);
  o->set("vm_names", names);
  if (!r.cluster.empty()) o->set("cluster", r.cluster);
  if (!r.role.empty()) o->set("role", r.role);
  o->set("region", r.region);
  o->set("created_at", r.created_at);
  if (auto age = AgeOf(r.created_at)) {
    o->set("age_seconds", static_cast<Poco::Int64>(*age));
  } else {
    o->set("age_seconds", Poco::Dynamic::Var());
  }
  if (r.price_per_hour) {
    o->set("price_per_hour", *r.price_per_hour);
  } else {
    o->set("price_per_hour", Poco::Dynamic::Var());
  }
  if (asked_to_delete) {
    o->set("deleted", orphan.deleted);
    if (orphan.claimed_meanwhile) o->set("kept", "a gpuprov run took its VM name meanwhile");
    if (!orphan.error.empty()) o->set("error", orphan.error);
  }
  return o;
}

/// A recorded VM whose TTL has passed, and what became of it.
struct GcExpiredVm {
  VmRecord record;
  bool deleted = false;
  std::string error;
};

void PrintExpiredText(const std::vector<GcExpiredVm>& expired, bool asked_to_delete) {
  if (expired.empty()) return;
  std::ostringstream out;
  out << "\nexpired VMs (their TTL passed; the node powered itself off"
      << (asked_to_delete ? ")" : "; `gpuprov gc --delete` or `gpuprov down --expired` deletes "
                                  "them)")
      << ":\n";
  for (const auto& e : expired) {
    out << "  " << Pad(e.record.name, 20) << Pad(e.record.cloud, 14)
        << "expired " << e.record.ttl_deadline;
    if (asked_to_delete) out << "  " << (e.deleted ? "deleted" : "failed: " + e.error);
    out << "\n";
  }
  Console::Get().Result(out.str());
}

void DeleteExpired(const AppContext& app, StateStore& store, std::vector<GcExpiredVm>& expired) {
  for (auto& e : expired) {
    try {
      FileLock lock = store.LockVm(e.record.name, 60 * 1000);
      std::optional<VmRecord> rec = store.Load(e.record.name);
      if (!rec || !TtlExpired(*rec, std::chrono::system_clock::now())) {
        e.error = "no longer expired (kept)";
        continue;
      }
      DeleteVmAndFiles(app, store, rec, e.record.name, e.record.cloud);
      e.deleted = true;
    } catch (const Error& err) {
      if (err.exit_code() == kExitInterrupted) throw;
      e.error = err.what();
    }
  }
}

void PrintJson(const AppContext& app, const std::vector<GcCloudReport>& reports,
               bool asked_to_delete, const std::vector<GcExpiredVm>& expired) {
  Array::Ptr clouds = new Array;
  for (const auto& report : reports) {
    Object::Ptr c = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
    c->set("cloud", report.cloud);
    c->set("swept", report.skipped.empty());
    if (!report.skipped.empty()) c->set("note", report.skipped);
    c->set("kept", static_cast<Poco::UInt64>(report.kept));
    Array::Ptr orphans = new Array;
    for (const auto& o : report.orphans) orphans->add(OrphanJson(o, asked_to_delete));
    c->set("orphans", orphans);
    clouds->add(c);
  }
  Object::Ptr root = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  root->set("clouds", clouds);
  Array::Ptr vms = new Array;
  for (const auto& e : expired) {
    Object::Ptr v = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
    v->set("name", e.record.name);
    v->set("cloud", e.record.cloud);
    v->set("ttl_deadline", e.record.ttl_deadline);
    if (asked_to_delete) {
      v->set("deleted", e.deleted);
      if (!e.error.empty()) v->set("error", e.error);
    }
    vms->add(v);
  }
  root->set("expired", vms);
  app.Print(root);
}

void PrintText(const std::vector<GcCloudReport>& reports, bool asked_to_delete) {
  Console& console = Console::Get();
  size_t total = 0;
  double cost = 0;
  // Ids and names differ in length by cloud (a number, a UUID, region/id): columns fit them.
  size_t id_width = 2, name_width = 4;
  for (const auto& report : reports) {
    for (const auto& o : report.orphans) {
      id_width = std::max(id_width, o.resource.id.size());
      name_width = std::max(name_width, o.resource.name.size());
    }
  }
  std::ostringstream out;
  for (const auto& report : reports) {
    for (const auto& o : report.orphans) {
      if (total++ == 0) {
        out << Pad("CLOUD", 14) << Pad("KIND", 15) << Pad("ID", id_width)
            << Pad("NAME", name_width) << Pad("VM", 20) << Pad("AGE", 5) << Pad("$/H", 6);
        out << (asked_to_delete ? "RESULT\n" : "\n");
      }
      const CloudResource& r = o.resource;
      if (r.price_per_hour) cost += *r.price_per_hour;
      out << Pad(report.cloud, 14) << Pad(r.kind, 15) << Pad(r.id, id_width)
          << Pad(r.name.empty() ? "-" : r.name, name_width)
          << Pad(r.vm_names.empty() ? "-" : Join(r.vm_names, ","), 20)
          << Pad(HumanAge(AgeOf(r.created_at)), 5)
          << Pad(r.price_per_hour ? Money(*r.price_per_hour) : "-", 6);
      if (asked_to_delete) {
        out << (o.deleted             ? "deleted"
                : o.claimed_meanwhile ? "kept: a gpuprov run took its VM name meanwhile"
                : o.error.empty()     ? "already gone"
                                      : "FAILED: " + o.error);
      }
      out << "\n";
    }
  }
  if (total == 0) {
    size_t swept = 0;
    for (const auto& report : reports) swept += report.skipped.empty() ? 1 : 0;
    out << "no orphaned resources on " << swept << (swept == 1 ? " cloud" : " clouds")
        << " swept\n";
  } else if (!asked_to_delete) {
    out << total
        << (total == 1 ? " resource carries gpuprov's marks but belongs"
                       : " resources carry gpuprov's marks but belong")
        << " to no VM record here";
    if (cost > 0) out << " (about $" << Money(cost) << "/h)";
    out << "; delete with `gpuprov gc --delete`\n";
  }
  console.Result(out.str());
}

}  // namespace

std::vector<CloudResource> SelectOrphans(const std::string& cloud,
                                         const std::vector<CloudResource>& resources,
                                         const StateStore& store, size_t* kept) {
  std::vector<CloudResource> out;
  size_t claimed = 0;
  for (const auto& r : resources) {
    if (Claimed(r, store, cloud)) {
      ++claimed;
    } else {
      out.push_back(r);
    }
  }
  if (kept != nullptr) *kept = claimed;
  return out;
}

GcCloudReport ListOrphans(Cloud& cloud, const StateStore& store) {
  GcCloudReport report;
  report.cloud = cloud.name();
  for (auto& r : SelectOrphans(cloud.name(), cloud.ListResources(), store, &report.kept)) {
    GcOrphan orphan;
    orphan.resource = std::move(r);
    report.orphans.push_back(std::move(orphan));
  }
  return report;
}

void DeleteOrphans(Cloud& cloud, StateStore& store, GcCloudReport& report) {
  Console& console = Console::Get();
  for (auto& orphan : report.orphans) {
    if (Interrupted()) throw Error("interrupted while deleting orphans", "", kExitInterrupted);
    const CloudResource& r = orphan.resource;
    // A provision of one of its VM names may have started since the listing: it holds the
    // lock while it works and writes its record first, so lock, then look again.
    std::vector<FileLock> locks;
    bool busy = false;
    std::vector<std::string> names = r.vm_names;
    // A provision of its cluster (which holds the server's lock) keeps it too.
    if (!r.cluster.empty() && std::find(names.begin(), names.end(), r.cluster) == names.end()) {
      names.push_back(r.cluster);
    }
    for (const auto& vm : names) {
      try {
        std::optional<FileLock> lock = store.TryLockVm(vm);
        if (!lock) {
          busy = true;
          break;
        }
        locks.push_back(std::move(*lock));
      } catch (const Error&) {
        // Not a valid VM name: no gpuprov run can hold it.
      }
    }
    if (busy || Claimed(r, store, cloud.name())) {
      orphan.claimed_meanwhile = true;
      continue;
    }
    console.Step("deleting " + r.kind + " " + r.id + (r.name.empty() ? "" : " (" + r.name + ")") +
                 " on " + cloud.name());
    try {
      orphan.deleted = cloud.DeleteResource(r.kind, r.id);
    } catch (const DriverCallError& e) {
      if (e.status() == GPUPROV_STATUS_CANCELLED) throw;
      orphan.error = e.what();
    }
  }
}

int RunGc(const AppContext& app, const GcOptions& options) {
  Console& console = Console::Get();
  if (options.remove && !options.yes && !isatty(STDIN_FILENO)) {
    throw UsageError("`gpuprov gc --delete` needs --yes when stdin is not a terminal",
                     "list first with `gpuprov gc`, then run `gpuprov gc --delete --yes`");
  }
  if (options.yes && !options.remove) {
    throw UsageError("--yes only confirms --delete", "drop --yes, or add --delete");
  }
  DriverHost host = app.MakeDriverHost();
  Config config = app.LoadUserConfig();
  StateStore store(app.paths);

  std::vector<std::string> names;
  if (options.cloud) {
    DriverInfo info = host.Find(*options.cloud);
    if (!info.problem.empty()) {
      throw Error("the " + *options.cloud + " driver (" + info.path + ") " + info.problem);
    }
    if (!info.lists_resources) {
      throw Error("the " + *options.cloud +
                      " driver cannot list orphans: it has no "
                      "list_resources (driver ABI 1.2); it needs ABI 1." +
                      std::to_string(info.abi_minor_required) + " only",
                  "update the driver; until then look for resources named or tagged gpuprov in "
                  "the cloud's console");
    }
    names.push_back(*options.cloud);
  } else {
    for (const DriverInfo& info : host.ListAll()) {
      if (!info.ok() || !info.has(GPUPROV_CAP_VM_LIFECYCLE)) continue;
      names.push_back(info.name);
    }
  }

  // First every listing, then (after one question) every deletion.
  std::vector<GcCloudReport> reports;
  std::vector<std::unique_ptr<Cloud>> clouds;
  for (const std::string& name : names) {
    GcCloudReport report;
    report.cloud = name;
    std::unique_ptr<Cloud> cloud;
    try {
      LoadedDriver loaded = host.Load(name);
      if (!loaded.info().lists_resources) {
        report.skipped = "its driver cannot list orphans (no list_resources, driver ABI 1.2)";
      } else {
        cloud = Cloud::Open(loaded, config);
        report = ListOrphans(*cloud, store);
        report.cloud = name;
      }
    } catch (const DriverCallError& e) {
      if (e.status() == GPUPROV_STATUS_CANCELLED) throw;
      if (options.cloud) throw;
      if (e.status() == GPUPROV_STATUS_AUTH) {
        report.skipped = std::string("no credentials (") + e.what() + ")";
      } else {
        report.skipped = std::string("not swept: ") + e.what();
        report.failed = true;
      }
      cloud.reset();
    } catch (const Error& e) {
      if (options.cloud || e.exit_code() == kExitInterrupted) throw;
      report.skipped = std::string("not swept: ") + e.what();
      report.failed = true;
      cloud.reset();
    }
    if (!report.skipped.empty()) {
      (report.failed ? console.Warning(name + ": " + report.skipped)
                     : console.Note(name + " skipped: " + report.skipped));
    }
    reports.push_back(std::move(report));
    clouds.push_back(std::move(cloud));
  }

  size_t orphan_count = 0;
  for (const auto& r : reports) orphan_count += r.orphans.size();
  // Recorded VMs whose TTL has passed (ttl.h), on the clouds swept: the node powered itself
  // off, and `down --expired` (or gc --delete) removes what is left.
  std::vector<GcExpiredVm> expired;
  {
    std::vector<VmRecord> records = store.List();
    for (const GcCloudReport& report : reports) {
      if (!report.skipped.empty()) continue;
      for (VmRecord& r : ExpiredRecords(records, std::chrono::system_clock::now(), report.cloud)) {
        expired.push_back({std::move(r), false, ""});
      }
    }
  }
  bool remove = options.remove && (orphan_count > 0 || !expired.empty());
  if (remove && !options.yes) {
    PrintText(reports, false);
    PrintExpiredText(expired, false);
    const std::string question =
        expired.empty() ? "delete these " + std::to_string(orphan_count) + " resources?"
        : orphan_count == 0
            ? "delete these " + std::to_string(expired.size()) + " expired VM(s)?"
            : "delete these " + std::to_string(orphan_count) + " resources and " +
                  std::to_string(expired.size()) + " expired VM(s)?";
    if (!Confirm(question)) {
      console.Result("nothing deleted\n");
      return 0;
    }
  }
  if (remove) {
    for (size_t i = 0; i < reports.size(); ++i) {
      if (clouds[i] == nullptr || reports[i].orphans.empty()) continue;
      DeleteOrphans(*clouds[i], store, reports[i]);
    }
    DeleteExpired(app, store, expired);
  }
  if (app.json_output) {
    PrintJson(app, reports, options.remove, expired);
  } else {
    PrintText(reports, options.remove);
    PrintExpiredText(expired, options.remove);
  }
  bool failed = false;
  for (const auto& e : expired) {
    if (!e.error.empty()) failed = true;
  }
  for (const auto& r : reports) {
    if (r.failed) failed = true;
    for (const auto& o : r.orphans) {
      if (!o.error.empty()) failed = true;
    }
  }
  return failed ? kExitFailure : kExitOk;
}

}  // namespace gpuprov
