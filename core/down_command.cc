#include "down_command.h"

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <memory>

#include "cloud.h"
#include "cluster_nodes.h"
#include "console.h"
#include "crash_point.h"
#include "error.h"
#include "kubeconfig.h"
#include "kubeconfig_merge.h"
#include "prompt.h"
#include "remote.h"
#include "spec.h"
#include "ttl.h"

namespace gpuprov {

void RemoveMergedKubeconfigEntries(const AppContext& app, const VmRecord& rec) {
  auto merged = rec.extra.find(kKubeconfigMergedKey);
  if (merged == rec.extra.end()) return;
  const std::string context = KubeContextName(rec.name);
  Console& console = Console::Get();
  try {
    const KubeconfigEdit edit =
        RemoveFromKubeconfigFile(merged->second, context, app.paths.lock_dir() / "kubeconfig.lock");
    if (edit.changed) {
      console.Info("removed cluster, user and context " + context + " from " + edit.file.string() +
                   " (previous contents in " + edit.backup.string() + ")");
    }
  } catch (const Error& e) {
    console.Warning(
        std::string(e.what()) + "; remove them yourself: kubectl config delete-context " + context +
        "; kubectl config delete-cluster " + context + "; kubectl config delete-user " + context);
  }
}

DownOutcome DeleteVmAndFiles(const AppContext& app, StateStore& store, std::optional<VmRecord>& rec,
                             const std::string& name, const std::string& cloud_name) {
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

namespace {

/// The agents of cluster \a cluster, newest first, each under its own lock (cluster_nodes.h);
/// the driver removes what it made for the cluster (network, firewall) with its last node.
void DeleteClusterAgents(const AppContext& app, StateStore& store, const std::string& cluster) {
  std::vector<VmRecord> agents = ClusterAgents(store.List(), cluster);
  std::reverse(agents.begin(), agents.end());
  for (const VmRecord& listed : agents) {
    FileLock lock = store.LockVm(listed.name, 60 * 1000);
    std::optional<VmRecord> agent = store.Load(listed.name);
    if (!agent) continue;
    const DownOutcome outcome = DeleteVmAndFiles(app, store, agent, listed.name, listed.cloud);
    if (!app.json_output) Console::Get().Result(outcome.text);
  }
}

/// `down NAME`: asks first on a terminal unless \a yes (prompt.h).
int DownOne(const AppContext& app, const std::string& name,
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
    Poco::JSON::Object::Ptr o = VmRecordObject(shown, "deleted");
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
      if (rec->role == "server") {
        const std::size_t agents = ClusterAgents(store.List(), name).size();
        if (agents > 0) what += " with its " + std::to_string(agents) + " agent VM(s)";
      }
    }
    if (!app.prompter->Confirm("delete " + what + " and its local files?")) {
      console.Note("nothing deleted: VM " + name + " is kept");
      return kExitFailure;
    }
  }
  if (rec && rec->role == "server") DeleteClusterAgents(app, store, name);
  const DownOutcome outcome = DeleteVmAndFiles(app, store, rec, name, cloud_name);
  result(outcome.result, outcome.text);
  return 0;
}

/// `down --expired`.
int DownExpired(const AppContext& app, bool yes) {
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
      console.Result(
          "no expired VMs: no recorded VM's TTL has passed, and none with an idle TTL "
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
      if (!rec ||
          ExpiryReason(*rec, std::chrono::system_clock::now(), live.StateOf(*rec)).empty()) {
        console.Note("VM " + listed.name + " is no longer expired; kept");
        continue;
      }
      const VmRecord shown = *rec;
      const DownOutcome outcome = DeleteVmAndFiles(app, store, rec, listed.name, shown.cloud);
      if (app.json_output) {
        Poco::JSON::Object::Ptr o = VmRecordObject(shown, "deleted");
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

}  // namespace

int RunDown(const AppContext& app, const DownOptions& options) {
  if (options.expired) return DownExpired(app, options.yes);
  return DownOne(app, options.name, options.cloud, options.yes);
}

}  // namespace gpuprov
