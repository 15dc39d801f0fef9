// One JSON record per VM in <home>/state/<name>.json (docs/design.md §3): written
// atomically with mode 0600 after every state transition, versioned, and guarded by a
// per-VM lock so two gpuprov runs on one name cannot race. Records hold no secrets.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "file_util.h"
#include "paths.h"

namespace gpuprov {

/// The key of VmRecord::extra that holds a tunnel-mode VM's local port (remote/tunnel_command.h).
inline constexpr const char* kTunnelPortKey = "tunnel_local_port";

/// The record version this gpuprov writes and the newest it reads.
inline constexpr int kStateRecordVersion = 1;

struct VmRecord {
  int version = kStateRecordVersion;
  std::string name;
  std::string cloud;
  std::string region;
  std::string phase = "intent";  // intent|creating|running|installing|ready|failed|deleting
  std::string vm_id;
  std::string public_ip;
  std::string ssh_user;
  std::string image;
  std::string instance_type;
  std::string gpus;         // TYPE:COUNT, or empty for none.
  std::string driver_file;  // The driver library that created the VM.
  int ssh_port = 22;
  bool kubernetes = false;
  std::string access_mode = "none";  // none|direct|tunnel
  std::string route = "none";        // none|boot|ssh: how the k3s installer reached the node
  std::string route_reason;          // why the installer went over SSH ("" for boot and none)
  int disk_gb = 0;                   // the disk asked for; 0: the driver's default
  double price_per_hour = 0;         // the offer's price in dollars when made; 0: unknown
  /// A spot (preemptible) VM (--spot): price_per_hour is then the spot price.
  bool spot = false;
  std::map<std::string, std::string> tags;  // the user's tags (gpuprov's own are not listed)
  /// The ports gpuprov has had opened to 0.0.0.0/0 for this VM (by create or open_ports),
  /// ascending; empty when unknown (a record from before gpuprov kept it).
  std::vector<int> open_ports;
  /// The sources (canonical CIDRs) the ports in allow_from_ports are narrowed to; empty: every
  /// open port is open to 0.0.0.0/0. Kept so re-runs and open_ports keep the narrowing.
  std::vector<std::string> allow_from;
  std::vector<int> allow_from_ports;  // ascending
  std::string kubeconfig;            // path of the kubeconfig gpuprov wrote, "" when none
  /// What the last cluster probe found ("cloud_init", "k3s_unit", "marker", "gpu", "decision").
  std::map<std::string, std::string> probe;
  /// Seconds each phase of the last provision took ("create", "ssh", "install", "api", ...).
  std::map<std::string, double> phase_seconds;
  std::string created_at;            // RFC 3339, UTC.
  std::string updated_at;            // RFC 3339, UTC; set by StateStore::Save.
  std::string last_error;
  std::map<std::string, std::string> extra;  // Driver-specific, non-secret.
  /// TTL on the node (ttl.h): the deadline at which the node powers itself off, RFC 3339 UTC
  /// ("" none); the idle TTL in seconds (0 none); what the driver says a powered-off VM still
  /// costs ("none", "disk", "full"; "" unknown).
  std::string ttl_deadline;
  long idle_ttl_seconds = 0;
  std::string powered_off_cost;
  /// A node of a multi-node cluster (cluster_nodes.h): the cluster's name ("" for a plain VM
  /// and a single-node cluster), its role ("server" | "agent" | ""), its index (0 the server,
  /// k for NAME-agent-k), its address on the cloud's private network ("" none or unknown), and
  /// on the server's record the cluster's node count (0 or 1: a single node). The cluster's join
  /// token is never kept here: it stays on the server and reaches agents over SSH.
  std::string cluster;
  std::string role;
  int node_index = 0;
  std::string private_ip;
  int cluster_nodes = 0;
};

/// "2024-05-01T12:34:56Z".
std::string FormatRfc3339Utc(std::chrono::system_clock::time_point time);

class StateStore {
 public:
  explicit StateStore(Paths paths);

  /// The record of \a name, or nullopt when there is none. Throws Error naming the file when
  /// it is corrupt or was written by a newer gpuprov (record version above
  /// kStateRecordVersion), and UsageError when \a name is not a valid VM name.
  std::optional<VmRecord> Load(const std::string& name) const;

  /// Writes \a record (atomically, mode 0600; home and state dir 0700) with updated_at set to
  /// now, created_at kept from the existing file or set to now when both are empty, and
  /// version set to kStateRecordVersion. Returns what was written. Refuses (Error, file left
  /// as is) to replace a corrupt file or one written by a newer gpuprov. Throws Error when
  /// phase or access_mode is not one of the documented values.
  VmRecord Save(const VmRecord& record);

  /// Deletes the record of \a name; no error when there is none.
  void Remove(const std::string& name);

  /// Every readable record, sorted by name. Files that cannot be read as records (corrupt,
  /// newer version, unexpected names) are skipped and, when \a problems is given, described
  /// there, one message naming the file each.
  std::vector<VmRecord> List(std::vector<std::string>* problems = nullptr) const;

  /// Takes the lock of \a name (<home>/locks/<name>.lock), waiting up to \a timeout_ms
  /// (see FileLock). Hold it across Load, the work and Save.
  FileLock LockVm(const std::string& name, int timeout_ms);

  /// One attempt at the lock of \a name: the lock, or nullopt when another holder has it.
  std::optional<FileLock> TryLockVm(const std::string& name);

  std::filesystem::path RecordPath(const std::string& name) const;

 private:
  Paths paths_;
};

}  // namespace gpuprov
