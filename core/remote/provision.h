// `gpuprov provision`: the VM launch state machine of docs/design.md §3. Every input is
// validated and the driver chosen before anything is created; the intent is recorded before
// the create call; each transition is persisted; a failure keeps the VM and says how to look.
// One cloud here; several clouds or regions (the candidate loop) in failover.h; what it says at
// the end in provision_report.h.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app_context.h"
#include "candidates.h"
#include "cloud.h"
#include "cluster_bringup.h"
#include "config.h"
#include "console.h"
#include "driver_host.h"
#include "error.h"
#include "file_util.h"
#include "installer_bundle.h"
#include "k8s_policy.h"
#include "provision_options.h"
#include "ssh_client.h"
#include "ssh_target.h"
#include "state_store.h"
#include "ttl.h"

namespace gpuprov {

/// Which node of a multi-node cluster a Provision makes (cluster_nodes.h); nodes 0: a single VM
/// (or the server before the cluster flow takes over).
struct ClusterMember {
  std::string cluster;
  std::string role;  // "server" | "agent"
  int index = 0;
  int nodes = 0;
};

/// One `gpuprov provision`: the steps, each a method, sharing the options, the driver (loaded
/// once) and the record they keep up to date. Nothing is created before CreateOrFind; every
/// transition after it is saved. Run takes the steps in order; they are public so a test can
/// take them one by one and look at the record between them.
class Provision {
 public:
  /// Keeps references to \a app, \a flags and \a spec_file: they outlive the Provision.
  Provision(const AppContext& app, const ProvisionFlags& flags,
            const std::optional<std::string>& spec_file, ClusterMember member = {});

  /// The whole provision: the steps below in order (the candidate loop of failover.h in place
  /// of LoadDriver to CreateOrFind when several clouds or regions are given), then Report.
  int Run();

  /// Flags, spec, environment and config.toml merged; nothing is created.
  void ResolveInputs();

  /// The driver file, loaded once: its capabilities decide Kubernetes and the plan, and the
  /// same load is initialised by CheckAccountAndPlan.
  void LoadDriver();

  /// The per-VM lock (another gpuprov on the same name waits), and the record of an earlier run.
  void LockAndReadRecord();

  /// Initialises the driver (config.toml keys checked first), checks the credentials and
  /// plans the cluster route and access.
  void CheckAccountAndPlan();

  /// A spot VM of the record that the cloud took back (state "preempted") is deleted, so this
  /// run makes a new one of the same name and spec (same kubeconfig file and context, same
  /// tunnel port), saying so; nothing happens for any other VM. A run that does not say spot
  /// takes the record's.
  void ReplacePreemptedVm();

  /// The offer (the named instance type, else the cheapest), said with its price and
  /// consented to; the TTL planned; the SSH key (made when it is gpuprov's own and missing).
  void ChooseOfferAndKey();

  /// The record says what is about to be made before any call that creates something.
  void RecordIntent();

  /// create: idempotent by name, so a re-run finds the VM of the first. When create fails and
  /// the cloud has no VM of that name, the intent is forgotten: nothing is left behind.
  void CreateOrFind();

  /// The VM running, with a public address; bounded by boot_wait_seconds.
  void WaitForRunning();

  /// A VM that existed keeps the ports it had: when this run needs more (Kubernetes turned on
  /// with direct access), the driver's open_ports opens them (vm_ports.h).
  void OpenNeededPorts();

  /// SSH answering, bounded by ssh_wait_seconds; the host key is pinned on first contact.
  SshSession WaitForSsh();

  /// TTL on the node (ttl.h), right after the host key is pinned, for every route and for
  /// --no-k8s VMs too: the script, its settings and its timer, over SSH. This run's --ttl (or
  /// the spec's or config's for a VM made now) sets a new deadline; a VM that exists keeps its
  /// recorded one otherwise. Nothing runs when neither this run nor the record has a TTL.
  void InstallTtlIfAsked(SshSession& session);

  /// Tunnel access: the VM's own local port, kept from an earlier run, else the first one from
  /// tunnel_first_port that no other VM holds and nothing listens on (under a lock, so two
  /// provisions never take the same).
  void ChooseTunnelPortIfTunnel();

  /// --merge-kubeconfig (or [defaults] merge_kubeconfig): the VM's cluster, user and context
  /// in the user's kubeconfig, recorded so `gpuprov down` takes exactly them out again.
  void MergeKubeconfigIfAsked();

  /// The cluster state machine (cluster_bringup.h) when Kubernetes is on; \a after_install
  /// runs once the install is done, before validation (ClusterInputs::after_install).
  void BringUpClusterIfOn(SshSession& session,
                          std::function<void(NodeShell&)> after_install = {});

  /// A failure after create keeps the VM, records why, and says how to look.
  [[noreturn]] void KeepVmAndRethrow(const Error& e);

  /// How to get in (provision_report.h): the record as JSON, or the summary and its notes.
  void Report();

  /// The record as this run last saved it.
  const VmRecord& record() const { return rec_; }
  /// Several clouds or regions (or any) were given: Run takes the candidate loop (failover.h).
  bool failover() const { return failover_; }

 private:
  friend class Failover;  // the candidate loop takes the steps in its own order
  friend class ClusterProvision;  // the multi-node flow runs one Provision per node

  using Clock = std::chrono::steady_clock;

  /// The private key: --ssh-key (which must exist), else gpuprov's own.
  void ChooseKeyPath();

  /// --nodes N (or nodes: N) against what is known so far of the cloud (cluster_nodes.h):
  /// refused with exit 2 before anything is made. \a driver_max_nodes: check's limit, once
  /// known.
  void RefuseNodesIfCannot(std::optional<int> driver_max_nodes);

  /// The per-VM lock (held to the end) and the record of an earlier run, if any.
  void LockVmAndLoadRecord();

  /// The k3s release choice, for the boot script and SSH runs alike.
  InstallerArgs K3sArgs() const;

  /// Who may reach the ports (--allow-from): this run's choice, else what the record of an
  /// earlier run says, else everyone. Refused before anything is made when the driver has not
  /// said it narrows sources (check's "allow_from": true).
  void DecideSources(const CloudCheck& account);

  /// The chosen offer and its price, said before anything is made; then the price consent.
  void AnnounceOfferAndConfirm();

  /// With a TTL: says what the powered-off VM still costs on this cloud, and fixes the
  /// deadline, counted from now, before anything is made.
  void PlanTtl();

  /// Keeps the GPU types offered for shell completion (offer_cache.h); a cache that cannot be
  /// written costs only the completion, so it is a debug line, not a failure.
  void RememberOffers(const std::vector<CloudOffer>& offers);
  void RememberOffers(const std::string& cloud, const std::vector<CloudOffer>& offers);

  /// Before a new VM is made: --max-price refuses a dearer offer; above
  /// confirm_above_per_hour the user is asked on a terminal (prompt.h).
  void ConfirmPrice();

  /// This run's TTL for a VM made now: --ttl's deadline and the idle TTL (flag, spec or config).
  NodeTtl PlannedTtl() const;

  /// A new VM on the boot route gets the TTL timer in its boot script too (before the
  /// installer), so it is in place even if this run never reaches SSH; when it does not fit the
  /// cloud's limit, the SSH set-up alone does it.
  void AddTtlToUserData(std::string& user_data);

  void Save();

  const AppContext& app_;
  const ProvisionFlags& flags_;
  const std::optional<std::string>& spec_file_;
  Console& console_;

  Config config_;
  ProvisionOptions opt_;
  std::string name_, cloud_name_;
  std::optional<DriverHost> host_;
  std::optional<LoadedDriver> driver_;
  K8sDecision k8s_;
  PortSources wanted_sources_;  // who may reach the ports this run opens (DecideSources)
  std::string key_path_;
  std::optional<StateStore> store_;
  std::optional<FileLock> lock_;
  std::optional<VmRecord> existing_;
  std::unique_ptr<Cloud> cloud_;
  ClusterPlan plan_;
  CloudOffer offer_;
  std::string region_;
  std::string public_key_;
  VmRecord rec_;
  Clock::time_point create_start_;
  CloudVm vm_;
  bool vm_existed_ = false;
  SshTarget target_;
  ClusterResult cluster_;
  int tunnel_port_ = kTunnelLocalPort;
  std::string merged_into_;            // the user's kubeconfig this run merged into ("" when none)
  std::string replaced_preempted_;     // why the VM this run replaced was preempted ("" when none)
  bool failover_ = false;              // several clouds or regions, or any: Failover
  std::vector<Candidate> candidates_;  // in the order tried, with why each failed
  UserDataLimit user_data_limit_{0};   // the cloud's boot script limit (check)
  std::optional<long long> planned_deadline_;  // --ttl's deadline, epoch seconds
  ClusterMember member_;
  /// A cluster node's peers' addresses (private, else public) for the node firewall's --peer.
  std::vector<std::string> peers_;
};

/// Installs the Ctrl-C handler and runs one Provision.
int RunProvision(const AppContext& app, const ProvisionFlags& flags,
                 const std::optional<std::string>& spec_file);

}  // namespace gpuprov
