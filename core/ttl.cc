#include "ttl.h"

#include <Poco/DateTimeParser.h>
#include <Poco/Exception.h>

#include <cctype>

#include "error.h"

namespace gpuprov {
namespace {

constexpr long kMaxDurationSeconds = 365L * 86400;

long UnitSeconds(char unit) {
  switch (unit) {
    case 's':
      return 1;
    case 'm':
      return 60;
    case 'h':
      return 3600;
    case 'd':
      return 86400;
    default:
      return 0;
  }
}

std::string Quote(const std::string& word) {
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace

long ParseDurationSeconds(const std::string& text, const std::string& flag) {
  const std::string hint = "e.g. " + flag + " 8h, " + flag + " 90m, " + flag + " 1h30m (units s, m, h, d)";
  if (text.empty()) throw UsageError(flag + " needs a duration", hint);
  if (text == "off") return 0;
  long total = 0;
  size_t i = 0;
  while (i < text.size()) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) {
      throw UsageError(flag + ": '" + text + "' is not a duration", hint);
    }
    long number = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      number = number * 10 + (text[i] - '0');
      if (number > kMaxDurationSeconds) {
        throw UsageError(flag + ": '" + text + "' is longer than 365 days", hint);
      }
      ++i;
    }
    if (i == text.size()) {
      throw UsageError(flag + ": '" + text + "' has a number without a unit", hint);
    }
    const long unit = UnitSeconds(text[i]);
    if (unit == 0) {
      throw UsageError(flag + ": unknown unit '" + std::string(1, text[i]) + "' in '" + text + "'",
                       hint);
    }
    total += number * unit;
    if (total > kMaxDurationSeconds) {
      throw UsageError(flag + ": '" + text + "' is longer than 365 days", hint);
    }
    ++i;
  }
  if (total < 1) throw UsageError(flag + ": '" + text + "' is no time at all", hint);
  return total;
}

std::string FormatDuration(long seconds) {
  if (seconds <= 0) return "0s";
  struct Unit {
    long size;
    const char* name;
  };
  static const Unit kUnits[] = {{86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}};
  for (size_t u = 0; u < 4; ++u) {
    if (seconds < kUnits[u].size) continue;
    std::string out = std::to_string(seconds / kUnits[u].size) + kUnits[u].name;
    const long rest = seconds % kUnits[u].size;
    if (u + 1 < 4 && rest / kUnits[u + 1].size > 0) {
      out += std::to_string(rest / kUnits[u + 1].size) + kUnits[u + 1].name;
    }
    return out;
  }
  return "0s";
}

std::optional<std::chrono::system_clock::time_point> TtlDeadline(const VmRecord& record) {
  if (record.ttl_deadline.empty()) return std::nullopt;
  try {
    int tz = 0;
    const Poco::DateTime t = Poco::DateTimeParser::parse(record.ttl_deadline, tz);
    return std::chrono::system_clock::from_time_t(t.timestamp().epochTime() - tz);
  } catch (const Poco::Exception&) {
    return std::nullopt;
  }
}

std::optional<long> TtlSecondsLeft(const VmRecord& record,
                                   std::chrono::system_clock::time_point now) {
  const auto deadline = TtlDeadline(record);
  if (!deadline) return std::nullopt;
  return static_cast<long>(
      std::chrono::duration_cast<std::chrono::seconds>(*deadline - now).count());
}

bool TtlExpired(const VmRecord& record, std::chrono::system_clock::time_point now) {
  const auto left = TtlSecondsLeft(record, now);
  return left && *left <= 0;
}

std::string StateWithTtl(const VmRecord& record, const std::string& state,
                         std::chrono::system_clock::time_point now) {
  return state == "preempted" && TtlExpired(record, now) ? "stopped" : state;
}

std::string ExpiryReason(const VmRecord& record, std::chrono::system_clock::time_point now,
                         const std::optional<std::string>& live_state) {
  if (TtlExpired(record, now)) return "TTL passed at " + record.ttl_deadline;
  if (record.idle_ttl_seconds > 0 && live_state &&
      (*live_state == "stopped" || *live_state == "terminated" || *live_state == "missing")) {
    return "powered off by its idle TTL (" + *live_state + ")";
  }
  return "";
}

std::string TtlCell(const VmRecord& record, std::chrono::system_clock::time_point now) {
  std::string cell;
  if (const auto left = TtlSecondsLeft(record, now)) {
    cell = *left <= 0 ? "EXPIRED" : FormatDuration(*left);
  }
  if (record.idle_ttl_seconds > 0) {
    cell += (cell.empty() ? "" : " ") + std::string("idle ") + FormatDuration(record.idle_ttl_seconds);
  }
  return cell.empty() ? "-" : cell;
}

std::string PoweredOffNote(const std::string& cloud, const std::string& powered_off_cost,
                           const std::string& name) {
  const std::string start = "at the TTL the VM powers off; on " + cloud + " ";
  if (powered_off_cost == "none") {
    return start + "a powered-off VM is no longer billed; `gpuprov down " + name +
           "` (or `gpuprov down --expired`) removes what is left of it";
  }
  if (powered_off_cost == "disk") {
    return start + "a powered-off VM still bills its disk: use `gpuprov down " + name +
           "` (or `gpuprov down --expired`) to stop that";
  }
  if (powered_off_cost == "full") {
    return start + "a powered-off VM is still billed in full: use `gpuprov down " + name +
           "` (or `gpuprov down --expired`)";
  }
  return "at the TTL the VM powers off; the " + cloud +
         " driver does not say what a powered-off VM costs there: use `gpuprov down " + name +
         "` (or `gpuprov down --expired`)";
}

std::string TtlSetupCommand(const NodeTtl& ttl) {
  const std::string path = kNodeTtlPath;
  return path + " set --deadline " +
         (ttl.deadline_epoch ? std::to_string(*ttl.deadline_epoch) : "none") + " --idle-seconds " +
         (ttl.idle_seconds ? std::to_string(*ttl.idle_seconds) : "none") + " && " + path +
         " install --check-seconds " + std::to_string(ttl.check_seconds);
}

std::string TtlScriptSaveCommand(const std::string& source_command) {
  const std::string path = kNodeTtlPath;
  const std::string tmp = Quote(path) + ".tmp.$$";
  return source_command + " >" + tmp + " && chmod 0755 " + tmp + " && mv -f " + tmp + " " +
         Quote(path);
}

std::string TtlInstallCommand(const NodeTtl& ttl) {
  return "set -e; mkdir -p /usr/local/sbin; " + TtlScriptSaveCommand("cat") + " && " +
         TtlSetupCommand(ttl);
}

std::string TtlOffCommand() {
  const std::string path = kNodeTtlPath;
  return "if [ -x " + path + " ]; then " + path + " off; fi; rm -f " + path;
}

void SetRecordTtl(VmRecord& record, const NodeTtl& ttl) {
  record.ttl_deadline =
      ttl.deadline_epoch
          ? FormatRfc3339Utc(std::chrono::system_clock::from_time_t(
                static_cast<std::time_t>(*ttl.deadline_epoch)))
          : std::string();
  record.idle_ttl_seconds = ttl.idle_seconds.value_or(0);
}

}  // namespace gpuprov
