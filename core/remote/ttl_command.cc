#include "ttl_command.h"

#include <chrono>

#include "address_follow.h"
#include "config.h"
#include "console.h"
#include "error.h"
#include "node_shell.h"
#include "provision_options.h"
#include "spec.h"
#include "ssh_client.h"
#include "state_store.h"
#include "ttl.h"
#include "vm_records.h"

namespace gpuprov {
namespace {

std::string Describe(const VmRecord& rec) {
  const auto now = std::chrono::system_clock::now();
  std::string out;
  if (const auto left = TtlSecondsLeft(rec, now)) {
    out = *left <= 0 ? "VM " + rec.name + " is EXPIRED: its TTL passed at " + rec.ttl_deadline +
                           " (the node powered itself off then)"
                     : "VM " + rec.name + " powers itself off at " + rec.ttl_deadline + " (in " +
                           FormatDuration(*left) + ")";
  } else {
    out = "VM " + rec.name + " has no TTL deadline";
  }
  if (rec.idle_ttl_seconds > 0) {
    out += "; idle TTL " + FormatDuration(rec.idle_ttl_seconds);
  }
  return out + "\n";
}

}  // namespace

int RunTtl(const AppContext& app, const std::string& name, const TtlCommandOptions& options) {
  ValidateVmName(name, "VM name");
  Console& console = Console::Get();
  const bool change = options.off || options.ttl_seconds || options.idle_ttl_seconds;
  if (change) FollowVmAddress(app, name);  // before the lock: it takes it to follow
  StateStore store(app.paths);
  FileLock lock = store.LockVm(name, 60 * 1000);
  VmRecord rec = LoadVmRecord(store, name);
  if (!change) {
    if (app.json_output) {
      app.Print(VmRecordObject(rec, rec.phase));
    } else {
      console.Result(Describe(rec));
    }
    return 0;
  }
  NodeTtl ttl;
  const Config config = app.LoadUserConfig();
  ttl.check_seconds =
      config.defaults.timeouts.ttl_check_seconds.value_or(kDefaultTtlCheckSeconds);
  if (!options.off) {
    if (options.ttl_seconds) {
      if (*options.ttl_seconds > 0) {
        ttl.deadline_epoch = static_cast<long long>(std::chrono::system_clock::to_time_t(
                                 std::chrono::system_clock::now())) +
                             *options.ttl_seconds;
      }
    } else if (const auto deadline = TtlDeadline(rec)) {
      ttl.deadline_epoch = static_cast<long long>(std::chrono::system_clock::to_time_t(*deadline));
    }
    if (options.idle_ttl_seconds) {
      if (*options.idle_ttl_seconds > 0) ttl.idle_seconds = *options.idle_ttl_seconds;
    } else if (rec.idle_ttl_seconds > 0) {
      ttl.idle_seconds = rec.idle_ttl_seconds;
    }
  }
  const bool remove = !ttl.deadline_epoch && !ttl.idle_seconds;
  const SshTarget target = SshTargetOf(app, rec);
  console.Step("ttl", std::string(remove ? "removing the TTL timer on " : "setting the TTL on ") +
                          name + " over SSH");
  SshSession session = SshSession::Connect(target, std::chrono::seconds(30));
  SshNodeShell shell(&session);
  const SshRunResult r =
      remove ? shell.RunAsRoot("ttl off", TtlOffCommand(), "", std::chrono::seconds(60))
             : shell.RunAsRoot("ttl install", TtlInstallCommand(ttl), TtlScript(),
                               std::chrono::seconds(60));
  if (r.exit_status != 0) {
    throw Error("the TTL on " + name + " was not changed: the node's command exited " +
                    std::to_string(r.exit_status) + ": " + TrimSpace(r.stderr_text),
                "look with `gpuprov ssh " + name + " -- systemctl status gpuprov-ttl.timer`");
  }
  SetRecordTtl(rec, ttl);
  rec = store.Save(rec);
  if (app.json_output) {
    app.Print(VmRecordObject(rec, rec.phase));
  } else {
    console.Result(remove ? "removed the TTL timer from VM " + name + "\n" : Describe(rec));
  }
  return 0;
}

}  // namespace gpuprov
