#include "cluster_provision.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <thread>

#include "cluster_join.h"
#include "cluster_nodes.h"
#include "crash_point.h"
#include "cuda_check.h"
#include "installer_bundle.h"
#include "installer_text.h"
#include "interrupt.h"
#include "node_shell.h"
#include "prompt.h"
#include "provision.h"

namespace gpuprov {

struct ClusterProvision::Node {
  Provision* provision = nullptr;  // the server's is server_, the agents' are owned
  std::unique_ptr<Provision> owned;
  std::optional<SshSession> session;
  std::unique_ptr<SshNodeShell> shell;
  NodeOutcome outcome;

  /// The VM exists and answers SSH, and no step has failed.
  bool usable() const { return session.has_value() && outcome.error.empty(); }
  /// Records why the node is out of the cluster (the first reason counts).
  void Fail(const std::string& error, const std::string& hint) {
    if (!outcome.error.empty()) return;
    outcome.error = error;
    outcome.hint = hint;
  }
};

namespace {

/// Runs \a step on \a node, turning what it throws into the node's outcome: a failure after
/// create keeps the VM and records why (Provision::KeepVmAndRethrow).
template <typename Step>
void Guarded(Provision& p, NodeOutcome& outcome, bool after_create, Step&& step) {
  try {
    try {
      step();
    } catch (const Error& e) {
      if (after_create) p.KeepVmAndRethrow(e);
      throw;
    }
  } catch (const Error& e) {
    if (outcome.error.empty()) {
      outcome.error = e.what();
      outcome.hint = e.hint();
    }
  } catch (const std::exception& e) {
    if (outcome.error.empty()) outcome.error = e.what();
  }
}

}  // namespace

std::vector<std::string> NodeReportLines(const std::vector<NodeOutcome>& nodes) {
  std::size_t width = 0;
  for (const auto& n : nodes) width = std::max(width, n.name.size());
  std::vector<std::string> lines;
  for (const auto& n : nodes) {
    std::string line = n.name + std::string(width - n.name.size() + 2, ' ') + n.role +
                       std::string(n.role == "agent" ? 3 : 2, ' ');
    line += n.ok ? "in the cluster" : "not in the cluster: " + n.error;
    if (!n.ok && !n.hint.empty()) line += " (" + n.hint + ")";
    lines.push_back(line);
  }
  return lines;
}

ClusterProvision::ClusterProvision(Provision& server) : server_(server) {}
ClusterProvision::~ClusterProvision() = default;

int ClusterProvision::Run() {
  PrepareNodes();
  RecordIntents();
  MakeVms();
  LetPeersIn();
  BringUpServerWhileAgentsPrepare();
  JoinAgents();
  ValidateCluster();
  return Report();
}

void ClusterProvision::PrepareNodes() {
  Provision& s = server_;
  const int n = s.opt_.nodes.value;
  const std::string cluster = s.name_;
  s.member_ = ClusterMember{cluster, "server", 0, n};
  s.LoadDriver();
  s.LockAndReadRecord();
  s.CheckAccountAndPlan();
  s.ChooseOfferAndKey();
  s.console_.Info("cluster " + cluster + ": " + std::to_string(n) + " nodes of " +
                  s.offer_.instance_type +
                  (s.offer_.price_per_hour > 0
                       ? " (" + FormatPricePerHour(s.offer_.price_per_hour * n) + " together)"
                       : std::string()));
  auto server = std::make_unique<Node>();
  server->provision = &s;
  server->outcome = NodeOutcome{cluster, "server", false, "", ""};
  nodes_.push_back(std::move(server));
  for (int k = 1; k < n; ++k) {
    auto flags = std::make_unique<ProvisionFlags>(s.flags_);
    flags->name = ClusterNodeName(cluster, k);
    flags->cloud = s.cloud_name_;
    flags->region = s.region_;
    flags->instance_type = s.offer_.instance_type;
    flags->nodes = 1;  // this Provision makes one node; the cluster flow makes the rest
    flags->yes = true;  // the cluster's price was consented to once, above
    flags->merge_kubeconfig = false;
    auto node = std::make_unique<Node>();
    node->owned = std::make_unique<Provision>(s.app_, *flags, s.spec_file_,
                                              ClusterMember{cluster, "agent", k, n});
    node->provision = node->owned.get();
    node->outcome = NodeOutcome{*flags->name, "agent", false, "", ""};
    Provision& a = *node->provision;
    a.ResolveInputs();
    a.LoadDriver();
    a.LockAndReadRecord();
    a.CheckAccountAndPlan();
    // The server's offer, key and TTL: one choice for the cluster.
    a.offer_ = s.offer_;
    a.region_ = s.region_;
    a.public_key_ = s.public_key_;
    a.planned_deadline_ = s.planned_deadline_;
    agent_flags_.push_back(std::move(flags));
    nodes_.push_back(std::move(node));
  }
}

void ClusterProvision::RecordIntents() {
  for (auto& node : nodes_) node->provision->RecordIntent();
}

void ClusterProvision::MakeVms() {
  server_.console_.Step("create", "making " + std::to_string(nodes_.size()) +
                                      " VMs side by side: " + server_.name_ + " and its agents");
  // The server's create call goes first, alone: the driver makes the cluster's own network or
  // group on first use, and the agents' creates then find it instead of racing to make it.
  Node& server = *nodes_.front();
  Guarded(server_, server.outcome, false, [&] { server_.CreateOrFind(); });
  std::vector<std::thread> threads;
  for (auto& node : nodes_) {
    threads.emplace_back([n = node.get(), first = node.get() == &server] {
      Provision& p = *n->provision;
      if (!first) Guarded(p, n->outcome, false, [&] { p.CreateOrFind(); });
      if (!n->outcome.error.empty()) return;
      Guarded(p, n->outcome, true, [&] {
        p.WaitForRunning();
        p.OpenNeededPorts();
        n->session.emplace(p.WaitForSsh());
        p.InstallTtlIfAsked(*n->session);
        n->shell = std::make_unique<SshNodeShell>(&*n->session);
      });
    });
  }
  for (auto& t : threads) t.join();
  CrashPoint("cluster-vms-made");
}

std::vector<ClusterProvision::Node*> ClusterProvision::Reachable() {
  std::vector<Node*> out;
  for (auto& node : nodes_) {
    if (node->usable()) out.push_back(node.get());
  }
  return out;
}

void ClusterProvision::LetPeersIn() {
  std::vector<Node*> reachable = Reachable();
  for (Node* node : reachable) {
    node->provision->peers_.clear();
    for (Node* other : reachable) {
      if (other != node) node->provision->peers_.push_back(PeerAddress(other->provision->rec_));
    }
  }
  std::vector<ClusterPeer> peers;
  for (auto& node : nodes_) {
    const VmRecord& rec = node->provision->rec_;
    if (!rec.vm_id.empty()) peers.push_back(ClusterPeer{rec.vm_id, rec.name, rec.private_ip, rec.public_ip});
  }
  try {
    server_.cloud_->OpenPeerPorts(server_.name_, ClusterPeerPorts(), peers);
  } catch (const Error& e) {
    for (auto& node : nodes_) {
      node->Fail("the cloud did not let the cluster's nodes reach each other: " +
                     std::string(e.what()),
                 e.hint());
    }
  }
  CrashPoint("peer-ports-opened");
}

void ClusterProvision::BringUpServer() {
  Node& server = *nodes_.front();
  if (!server.usable()) return;
  Provision& s = server_;
  Guarded(s, server.outcome, true, [&] {
    s.ChooseTunnelPortIfTunnel();
    s.BringUpClusterIfOn(*server.session);
    if (s.plan_.boot_route) {
      // The boot script ran before the VM had its private address and peers: once bring-up has
      // seen the boot install finish (a run of ours before it would be undone by it), the
      // installer runs again with them (k3s restarts only if its config changed), so the
      // server's node address is the one the agents reach.
      const SshRunResult r = server.shell->RunAsRoot(
          "installer with the cluster's addresses", InstallerPushCommand(s.K3sArgs()),
          InstallerScript(), std::chrono::minutes(30));
      if (r.exit_status != 0) {
        throw Error("the installer failed on " + s.name_ + " with the cluster's addresses (exit " +
                        std::to_string(r.exit_status) + "): " + TrimSpace(r.stderr_text),
                    "look at " + std::string(kNodeInstallLog) + " with `gpuprov ssh " + s.name_ +
                        "`, then re-run the same `gpuprov provision`");
      }
    } else if (!NodeFirewallFor(s.plan_).empty()) {
      // Bring-up leaves a server installed before as it is (a re-run, `scale` up): its node
      // firewall is told the cluster's nodes now (a no-op when they are the ones it admits).
      SetNodeFirewallPeers(*server.shell, s.name_, s.peers_, "gpuprov provision");
    }
    s.MergeKubeconfigIfAsked();
  });
}

void ClusterProvision::BringUpServerWhileAgentsPrepare() {
  // An agent's install (GPU runtime, k3s binary, node firewall) needs no server: it runs while
  // the server is brought up, and only the join waits for the server.
  std::vector<std::thread> threads;
  for (std::size_t i = 1; i < nodes_.size(); ++i) {
    Node* n = nodes_[i].get();
    if (!n->usable()) continue;
    threads.emplace_back([n] {
      Provision& a = *n->provision;
      Guarded(a, n->outcome, true, [&] {
        a.rec_.phase = "installing";
        a.Save();
        InstallerArgs args = a.K3sArgs();
        // Tunnel access: the agent's node firewall too admits SSH and, from the peers only,
        // k3s's ports (its kubelet would otherwise answer the internet).
        args.node_firewall = NodeFirewallFor(a.plan_);
        if (a.plan_.boot_route && !a.plan_.startup_script) {
          // The boot run first (it would otherwise run after ours and undo the join's settings).
          n->shell->RunAsRoot("wait for the boot install",
                              "cloud-init status --wait >/dev/null 2>&1 || true", "",
                              std::chrono::seconds(a.opt_.boot_install_wait_seconds.value));
        }
        // On the SSH route this prepares the node; on the boot route it finds the boot run's
        // work done and adds the peers.
        SshRunResult prepared = n->shell->RunAsRoot("push installer (agent)",
                                                    InstallerPushCommand(args), InstallerScript(),
                                                    std::chrono::minutes(30));
        if (prepared.exit_status != 0) {
          throw Error("the installer failed on " + a.name_ + " (exit " +
                          std::to_string(prepared.exit_status) + "): " +
                          TrimSpace(prepared.stderr_text),
                      "look at " + std::string(kNodeInstallLog) + " with `gpuprov ssh " + a.name_ +
                          "`, then re-run the same `gpuprov provision`");
        }
        CrashPoint("agent-prepared");
      });
    });
  }
  BringUpServer();
  for (auto& t : threads) t.join();
}

void ClusterProvision::JoinAgents() {
  Node& server = *nodes_.front();
  if (nodes_.size() < 2) return;
  if (!server.usable()) {
    for (std::size_t i = 1; i < nodes_.size(); ++i) {
      nodes_[i]->Fail("the server " + server.outcome.name + " is not up: " + server.outcome.error,
                      "re-run the same `gpuprov provision` once the server's problem is fixed");
    }
    return;
  }
  server_.console_.Step("join", "joining the agents to " + server_.name_);
  std::string token;
  Guarded(server_, server.outcome, true, [&] { token = ReadJoinToken(*server.shell, server_.name_); });
  if (token.empty()) return;
  const std::string url = AgentServerUrl(PeerAddress(server_.rec_));
  std::vector<std::thread> threads;
  for (std::size_t i = 1; i < nodes_.size(); ++i) {
    Node* n = nodes_[i].get();
    if (!n->usable()) continue;
    threads.emplace_back([n, &token, &url] {
      Provision& a = *n->provision;
      Guarded(a, n->outcome, true, [&] {
        InstallerArgs args = a.K3sArgs();
        args.node_firewall = NodeFirewallFor(a.plan_);
        SshRunResult joined = n->shell->RunAsRoot("join the cluster", AgentJoinCommand(args, url),
                                                  token + "\n", std::chrono::minutes(10));
        if (joined.exit_status != 0) {
          throw Error("agent " + a.name_ + " could not join " + url + " (exit " +
                          std::to_string(joined.exit_status) + "): " +
                          TrimSpace(joined.stderr_text),
                      "look with `gpuprov ssh " + a.name_ +
                          " -- sudo journalctl -u k3s-agent`, then re-run the same `gpuprov "
                          "provision`");
        }
        CrashPoint("agent-joined");
      });
    });
  }
  for (auto& t : threads) t.join();
}

void ClusterProvision::ValidateCluster() {
  Node& server = *nodes_.front();
  if (!server.usable()) return;
  std::vector<Node*> members;
  std::vector<ExpectedNode> expected;
  for (Node* n : Reachable()) {
    members.push_back(n);
    const VmRecord& rec = n->provision->rec_;
    expected.push_back(ExpectedNode{rec.name, {rec.private_ip, rec.public_ip}});
  }
  const int gpus = server_.opt_.gpus.value ? server_.opt_.gpus.value->count : 0;
  server_.console_.Step("validate", "every node Ready" +
                                        std::string(gpus > 0 ? " with its GPUs" : "") +
                                        ", pods reaching each other across nodes");
  const auto start = std::chrono::steady_clock::now();
  const auto limit = std::chrono::seconds(server_.opt_.api_wait_seconds.value);
  std::vector<ClusterNodeStatus> status;
  std::string shortfall;
  while (true) {
    const SshRunResult r = server.shell->RunAsRoot(
        "cluster nodes", std::string(kNodeApiFunction) + "api https://127.0.0.1:6443/api/v1/nodes\n",
        "", std::chrono::seconds(60));
    status = MatchClusterNodes(r.stdout_text, expected);
    shortfall = ClusterNodesShortfall(status, gpus);
    if (shortfall.empty() || std::chrono::steady_clock::now() - start > limit) break;
    ThrowIfInterrupted("validating the cluster");
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
  for (std::size_t i = 0; i < members.size(); ++i) {
    const std::string one = ClusterNodesShortfall({status[i]}, gpus);
    if (!one.empty()) {
      members[i]->Fail(one, "look with `kubectl --context " + std::string("gpuprov-") +
                                server_.name_ + " describe node`");
    }
  }
  // The overlay: a pod on the server reaches a pod on the first agent in the cluster.
  Node* agent = nullptr;
  std::string agent_node;
  for (std::size_t i = 1; i < members.size() && !agent; ++i) {
    if (members[i]->outcome.error.empty()) {
      agent = members[i];
      agent_node = status[i].node_name;
    }
  }
  if (agent && !status.empty() && server.outcome.error.empty()) {
    try {
      RunOverlayCheck(*server.shell, status[0].node_name, agent_node, std::chrono::seconds(120));
    } catch (const Error& e) {
      agent->Fail(e.what(), e.hint());
    }
  }
  CheckCudaOnEveryNode(members, status);
  for (auto& node : nodes_) {
    if (!node->usable()) continue;
    Provision& p = *node->provision;
    node->outcome.ok = true;
    p.rec_.phase = "ready";
    p.Save();
  }
}

void ClusterProvision::CheckCudaOnEveryNode(const std::vector<Node*>& members,
                                            const std::vector<ClusterNodeStatus>& status) {
  Node& server = *nodes_.front();
  const int gpus = server_.opt_.gpus.value ? server_.opt_.gpus.value->count : 0;
  if (gpus <= 0 || !server.usable()) return;
  std::vector<Node*> checked;
  std::vector<CudaCheckInputs> checks;
  for (std::size_t i = 0; i < members.size() && i < status.size(); ++i) {
    Provision& p = *members[i]->provision;
    if (!members[i]->outcome.error.empty()) continue;
    if (!server_.opt_.smoke_test.value) {
      p.rec_.probe["cuda_check"] = "skipped (smoke test off)";
      continue;
    }
    CudaCheckInputs in;
    in.vm_name = p.name_;
    in.node_name = status[i].node_name;
    in.api_vm = server_.name_;
    in.image = server_.opt_.smoke_test_image.value;
    in.gpus = std::max(gpus, status[i].gpus_allocatable);
    checked.push_back(members[i]);
    checks.push_back(in);
  }
  if (checks.empty()) return;
  server_.console_.Step("cuda", "running a CUDA program on each of " +
                                    std::to_string(checks.size()) +
                                    " nodes at once, in a pod bound to the node requesting its "
                                    "GPUs, under the default runtime (" + checks[0].image + ")");
  const auto start = std::chrono::steady_clock::now();
  std::vector<CudaCheckOutcome> outcomes;
  try {
    outcomes = RunCudaChecks(*server.shell, checks);
  } catch (const Error& e) {
    for (Node* n : checked) n->Fail(e.what(), e.hint());
    return;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (std::size_t i = 0; i < checked.size(); ++i) {
    Provision& p = *checked[i]->provision;
    const CudaCheckOutcome& o = outcomes[i];
    p.rec_.phase_seconds["cuda"] = seconds;
    if (o.passed) {
      server_.console_.Info("CUDA check passed on " + o.vm_name + " (node " +
                            checks[i].node_name + ")" +
                            (o.last_line.empty() ? "" : ": " + o.last_line));
      p.rec_.probe["cuda_check"] = "passed" + (o.last_line.empty() ? "" : ": " + o.last_line);
      if (checked[i] == &server) server_.cluster_.cuda_check_passed = true;
    } else {
      server_.console_.Warning(o.error);
      p.rec_.probe["cuda_check"] = "failed: " + o.error;
      checked[i]->Fail(o.error, o.hint);
    }
    p.Save();
  }
}

int ClusterProvision::Report() {
  bool all = true;
  for (auto& node : nodes_) all = all && node->outcome.ok;
  Node& server = *nodes_.front();
  if (server.outcome.ok) server_.Report();
  int in = 0;
  for (auto& node : nodes_) in += node->outcome.ok ? 1 : 0;
  std::vector<NodeOutcome> outcomes;
  for (auto& node : nodes_) outcomes.push_back(node->outcome);
  Console& console = server_.console_;
  console.Step("cluster", server_.name_ + ": " + std::to_string(in) + " of " +
                              std::to_string(nodes_.size()) + " nodes in the cluster");
  for (const auto& line : NodeReportLines(outcomes)) console.Info(line);
  if (!all) {
    console.Note("re-run the same `gpuprov provision` to make only what is missing, or "
                 "`gpuprov down " + server_.name_ + "` to remove every node");
    return 1;
  }
  return 0;
}

}  // namespace gpuprov
