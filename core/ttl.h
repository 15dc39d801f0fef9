// TTL on the node (docs/ttl.md): `provision --ttl`/`--idle-ttl` and `gpuprov ttl` put
// installer/gpuprov-ttl.sh and a systemd timer on the VM, which powers it off when its deadline
// passes or when it has been idle that long. The deadline is an absolute time kept in a file on
// the node and in the VM's record, so `list` shows time left without asking anything.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "state_store.h"

namespace gpuprov {

/// A duration as typed: one or more NUMBER UNIT pairs, unit s, m, h or d ("30s", "90m", "8h",
/// "1h30m", "2d"); at least 1 s, at most 365 days; "off" is 0 (no TTL, e.g. to override
/// config.toml's). Throws UsageError naming \a flag (e.g. "--ttl") otherwise, a bare number
/// included (it names the units).
long ParseDurationSeconds(const std::string& text, const std::string& flag);

/// \a seconds as the largest two units: "45s", "5m", "1h30m", "2d3h" ("0s" for 0 or less).
std::string FormatDuration(long seconds);

/// The record's deadline (ttl_deadline, RFC 3339) as a time; nullopt when there is none or
/// it cannot be read.
std::optional<std::chrono::system_clock::time_point> TtlDeadline(const VmRecord& record);

/// Seconds from \a now to the record's deadline (negative once passed); nullopt without one.
std::optional<long> TtlSecondsLeft(const VmRecord& record,
                                   std::chrono::system_clock::time_point now);

/// True when the record has a deadline and \a now is at or past it.
bool TtlExpired(const VmRecord& record, std::chrono::system_clock::time_point now);

/// \a state (the cloud's word for the VM now) as the commands act on it: "preempted" past the
/// record's TTL deadline is "stopped". The VM powered itself off at its TTL, and a cloud that
/// cannot tell the two apart (Nebius stops a preempted VM the same way) must not make provision or
/// watch bring back what the TTL ended. Any other state is returned as it is.
std::string StateWithTtl(const VmRecord& record, const std::string& state,
                         std::chrono::system_clock::time_point now);

/// Why `down --expired` deletes a VM: "TTL passed at DEADLINE" when its deadline is at or before
/// \a now; "powered off by its idle TTL (STATE)" when it has an idle TTL and \a live_state (its
/// cloud's state now; nullopt: not asked) is stopped, terminated or missing; "" otherwise.
std::string ExpiryReason(const VmRecord& record, std::chrono::system_clock::time_point now,
                         const std::optional<std::string>& live_state);

/// The TTL column of `gpuprov list`: "-" (no TTL), "7h59m" (time left), "EXPIRED", with
/// " idle 1h" appended when an idle TTL is set ("idle 1h" alone without a deadline).
std::string TtlCell(const VmRecord& record, std::chrono::system_clock::time_point now);

/// What provision says when a TTL is set, from the driver's powered_off_cost ("none", "disk",
/// "full"; anything else: unknown) for \a cloud and VM \a name.
std::string PoweredOffNote(const std::string& cloud, const std::string& powered_off_cost,
                           const std::string& name);

/// What the node timer is told: the deadline (epoch seconds) and the idle TTL (seconds);
/// nullopt: none. check_seconds: how often the timer checks.
struct NodeTtl {
  std::optional<long long> deadline_epoch;
  std::optional<long> idle_seconds;
  int check_seconds = 60;
};

/// Where the node script lives on the node.
inline constexpr const char* kNodeTtlPath = "/usr/local/sbin/gpuprov-ttl";

/// installer/gpuprov-ttl.sh, byte for byte as at build time.
const std::string& TtlScript();

/// The commands that write the settings and install and start the timer, with the script
/// already at kNodeTtlPath: "gpuprov-ttl set ... && gpuprov-ttl install --check-seconds N".
std::string TtlSetupCommand(const NodeTtl& ttl);

/// The shell words that save what \a source_command prints as the script at kNodeTtlPath: to a
/// copy named for this shell ($$), made executable, then renamed into place, joined by &&. The
/// boot script and gpuprov over SSH may write the file at the same moment: each has its own copy.
std::string TtlScriptSaveCommand(const std::string& source_command);

/// The root shell command that saves the script it reads on stdin to kNodeTtlPath, writes the
/// settings and installs and starts the timer. Run again it replaces the settings.
std::string TtlInstallCommand(const NodeTtl& ttl);

/// The root shell command that stops and removes the timer and the settings (no stdin); it
/// succeeds on a node that has none.
std::string TtlOffCommand();

/// The record keys gpuprov writes: deadline as RFC 3339 UTC ("" none), idle TTL seconds (0 none).
void SetRecordTtl(VmRecord& record, const NodeTtl& ttl);

/// What `gpuprov ttl NAME` was asked to change (remote/ttl_command.h runs it).
struct TtlCommandOptions {
  std::optional<long> ttl_seconds;       // DURATION: the new deadline is now + this; 0: none
  std::optional<long> idle_ttl_seconds;  // --idle-ttl; 0: none
  bool off = false;                      // --off: remove the timer and both TTLs
};

}  // namespace gpuprov
