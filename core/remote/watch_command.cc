#include "watch_command.h"

#include <Poco/JSON/Object.h>

#include <cmath>
#include <thread>

#include "cloud.h"
#include "elapsed.h"
#include "interrupt.h"
#include "output.h"
#include "provision.h"
#include "spot.h"
#include "ttl.h"
#include "vm_records.h"

namespace gpuprov {
namespace {

using Clock = std::chrono::steady_clock;

/// One watch event: an ndjson line on stdout with --output ndjson, else nothing (the text
/// line goes to stderr beside it).
void Event(const AppContext& app, const std::string& event, const VmRecord& record,
           const std::string& detail_key, const std::string& detail, double seconds = -1) {
  if (app.output != OutputFormat::kNdjson) return;
  Poco::JSON::Object::Ptr o = new Poco::JSON::Object(Poco::JSON_PRESERVE_KEY_ORDER);
  o->set("event", event);
  o->set("name", record.name);
  o->set("cloud", record.cloud);
  if (!detail_key.empty()) o->set(detail_key, detail);
  if (seconds >= 0) o->set("seconds", std::round(seconds * 10) / 10);
  Console::Get().Result(RenderJsonLine(o));
}

/// The cloud's word for the VM now; "" when the cloud could not be asked (said as a warning).
std::string StateNow(Cloud& cloud, const VmRecord& record, std::string* reason) {
  try {
    std::optional<CloudVm> vm = cloud.Get(record.vm_id, record.name);
    if (!vm) return "missing";
    *reason = vm->message;
    return vm->state;
  } catch (const Error& e) {
    if (e.exit_code() == kExitInterrupted) throw;
    Console::Get().Warning("cannot ask " + record.cloud + " about " + record.name + ": " +
                           e.what() + "; asking again in a while");
    return "";
  }
}

std::string OneDecimal(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", seconds);
  return text;
}

}  // namespace

ProvisionFlags RecoveryFlags(const VmRecord& record, const WatchOptions& options, int attempt) {
  ProvisionFlags flags;
  flags.name = record.name;
  flags.cloud = record.cloud;
  if (!record.region.empty()) flags.region = record.region;
  if (!record.instance_type.empty()) flags.instance_type = record.instance_type;
  if (!record.gpus.empty()) flags.gpus = ParseGpuRequest(record.gpus, "the record's gpus");
  flags.kubernetes = record.kubernetes;
  flags.spot = record.spot;
  flags.yes = true;
  if (attempt <= 1) return flags;
  switch (options.fallback) {
    case WatchFallback::kNone:
      break;
    case WatchFallback::kOnDemand:
      flags.spot = false;
      break;
    case WatchFallback::kCandidates:
      flags.cloud = options.cloud.value_or("any");
      flags.region = options.region;
      flags.instance_type.reset();  // each candidate cloud names its own
      break;
  }
  return flags;
}

int RunWatch(const AppContext& app, const std::string& name, const WatchOptions& options) {
  InstallInterruptHandler();
  Console& console = Console::Get();
  VmRecord record = LoadVmRecord(StateStore(app.paths), name);
  console.Step("watching " + name + " on " + record.cloud + " every " +
               std::to_string(options.interval.count()) + " s" +
               (record.spot ? " (spot)" : "") + "; Ctrl-C to stop");
  DriverHost host = app.MakeDriverHost();
  const Config config = app.LoadUserConfig();
  std::unique_ptr<Cloud> cloud = Cloud::Open(host, record.cloud, config);
  while (!Interrupted()) {
    std::string reason;
    const std::string state =
        StateWithTtl(record, StateNow(*cloud, record, &reason), std::chrono::system_clock::now());
    if (state == kPreemptedState) {
      const std::string why = reason.empty() ? std::string("no reason given") : reason;
      console.Note(name + " was preempted by " + record.cloud + " (" + why + "); bringing it back");
      Event(app, "preempted", record, "reason", why);
      const auto start = Clock::now();
      std::string last_error;
      bool recovered = false;
      for (int attempt = 1; attempt <= options.max_attempts && !recovered; ++attempt) {
        const ProvisionFlags flags = RecoveryFlags(record, options, attempt);
        const std::optional<std::string> no_spec;  // Provision keeps a reference to it
        try {
          Provision(app, flags, no_spec).Run();
          recovered = true;
        } catch (const Error& e) {
          if (e.exit_code() == kExitInterrupted || Interrupted()) throw;
          last_error = e.what();
          console.Warning("attempt " + std::to_string(attempt) + " of " +
                          std::to_string(options.max_attempts) + " to bring " + name +
                          " back failed: " + last_error);
          Event(app, "recovery_failed", record, "error", last_error);
        }
      }
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      if (!recovered) {
        throw Error("could not bring " + name + " back after " +
                        std::to_string(options.max_attempts) + " attempts in " +
                        OneDecimal(seconds) + " s: " + last_error,
                    "`gpuprov provision --name " + name + "` tries again; --fallback on-demand "
                    "or --fallback candidates lets watch take another offer");
      }
      record = LoadVmRecord(StateStore(app.paths), name);
      if (record.cloud != cloud->name()) cloud = Cloud::Open(host, record.cloud, config);
      console.Step("recovered " + name + " in " + OneDecimal(seconds) + " s: a new VM on " +
                   record.cloud + (record.spot ? " (spot)" : " (on demand)") + " at " +
                   record.public_ip + (record.kubeconfig.empty() ? "" : "; kubeconfig " +
                                                                           record.kubeconfig));
      Event(app, "recovered", record, "address", record.public_ip, seconds);
      continue;
    }
    if (!state.empty() && state != "running") console.Debug(name + " is " + state);
    const auto until = Clock::now() + options.interval;
    while (!Interrupted() && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  console.Info("watch of " + name + " stopped");
  return 0;
}

}  // namespace gpuprov
