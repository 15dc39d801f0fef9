#include "cluster_provision.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <future>
#include <sstream>
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
  bool running = false;  // the VM runs with its addresses known (Provision::WaitForRunning)

  /// The VM runs and no step has failed: a peer of the others.
  bool peer() const { return running && outcome.error.empty(); }
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

/// How often validation asks the server's API again (one SSH round trip on an open session,
/// one local request there): the nodes' Ready state, the overlay check's echo server and probe.
constexpr std::chrono::milliseconds kClusterPollInterval{250};

/// The Error of an installer run on node \a name that failed (\a with: what it ran with, e.g.
/// " with the cluster's addresses", or ""); nothing when it exited 0.
void ThrowIfInstallerFailed(const SshRunResult& r, const std::string& name,
                            const std::string& with) {
  if (r.exit_status == 0) return;
  throw Error("the installer failed on " + name + with + " (exit " +
                  std::to_string(r.exit_status) + "): " + TrimSpace(r.stderr_text),
              "look at " + std::string(kNodeInstallLog) + " with `gpuprov ssh " + name +
                  "`, then re-run the same `gpuprov provision`");
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
  BringUpServerAndJoinAgents();
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
        n->running = true;
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
  std::vector<Node*> members;
  for (auto& node : nodes_) {
    if (node->peer()) members.push_back(node.get());
  }
  for (Node* node : members) {
    node->provision->peers_.clear();
    for (Node* other : members) {
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

std::string K3sNodeAddressesCommand() {
  return std::string("grep -E '^node-(external-)?ip:' ") + kK3sConfigPath + " 2>/dev/null || true";
}

K3sNodeAddresses ParseK3sNodeAddresses(const std::string& config_lines) {
  K3sNodeAddresses out;
  std::istringstream in(config_lines);
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, colon);
    std::string value = TrimSpace(line.substr(colon + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    if (key == "node-ip") out.node_ip = value;
    if (key == "node-external-ip") out.node_external_ip = value;
  }
  return out;
}

ServerRerunDecision DecideServerRerun(const ClusterPlan& plan, bool pushed,
                                      const InstallerArgs& now, const K3sNodeAddresses& in_force) {
  if (pushed) return {ServerRerun::kNone, "the installer ran over SSH with them"};
  // The node firewall is compared apart: the boot script names it, the later runs keep it.
  const auto k3s_words = [](InstallerArgs args) {
    args.peers.clear();
    args.node_firewall.clear();
    return InstallerArgWords(args);
  };
  InstallerArgs ran = plan.boot_args;
  ran.node_ip = in_force.node_ip;
  ran.node_external_ip = in_force.node_external_ip;
  const std::vector<std::string> at_boot = k3s_words(ran);
  const std::vector<std::string> wanted = k3s_words(now);
  if (plan.boot_route && at_boot != wanted) {
    std::string missing;
    for (std::size_t i = 0; i + 1 < wanted.size(); i += 2) {
      bool found = false;
      for (std::size_t j = 0; j + 1 < at_boot.size() && !found; j += 2) {
        found = at_boot[j] == wanted[i] && at_boot[j + 1] == wanted[i + 1];
      }
      if (!found) missing += (missing.empty() ? "" : " ") + wanted[i] + " " + wanted[i + 1];
    }
    return {ServerRerun::kInstaller,
            "the boot install ran without " +
                (missing.empty() ? std::string("the cluster's settings") : missing)};
  }
  if (NodeFirewallFor(plan) == "ssh-only" && !now.peers.empty()) {
    return {ServerRerun::kPeersOnly, "the node firewall admits the cluster's nodes as they are now"};
  }
  return {ServerRerun::kNone, "the install found ran with every setting the cluster needs"};
}

InstallerArgs ServerRerunArgs(const ClusterPlan& plan, InstallerArgs now) {
  now.node_firewall = NodeFirewallFor(plan);
  return now;
}

std::string AgentBootInstallWaitCommand() {
  return std::string("cloud-init status --wait >/dev/null 2>&1 || true; test -s ") +
         kNodeInstallerPath;
}

std::string ClusterProvision::OnServerInstalled(NodeShell& shell) {
  Provision& s = server_;
  const InstallerArgs args = s.K3sArgs();
  // ClusterBringUp records a push of its own in the probe map (pushed_over_ssh).
  const bool pushed = s.rec_.probe.count("pushed_over_ssh") > 0;
  K3sNodeAddresses in_force;
  if (!pushed && s.plan_.boot_route) {
    in_force = ParseK3sNodeAddresses(
        shell.RunAsRoot("k3s node addresses", K3sNodeAddressesCommand(), "", std::chrono::seconds(30))
            .stdout_text);
  }
  const ServerRerunDecision d = DecideServerRerun(s.plan_, pushed, args, in_force);
  s.console_.Debug("server rerun: " +
                   std::string(d.action == ServerRerun::kInstaller   ? "installer"
                               : d.action == ServerRerun::kPeersOnly ? "peers only"
                                                                     : "none") +
                   ": " + d.reason);
  if (d.action == ServerRerun::kPeersOnly) {
    SetNodeFirewallPeers(shell, s.name_, args.peers, "gpuprov provision");
  } else if (d.action == ServerRerun::kInstaller) {
    ThrowIfInstallerFailed(
        shell.RunAsRoot("installer with the cluster's addresses",
                        InstallerPushCommand(ServerRerunArgs(s.plan_, args)), InstallerScript(),
                        std::chrono::minutes(30)),
        s.name_, " with the cluster's addresses");
  }
  if (s.plan_.private_peers) {
    SetPrivatePeersFirewall(shell, s.name_, args.node_ip, args.peers, "gpuprov provision");
  }
  return ReadJoinToken(shell, s.name_);
}

void ClusterProvision::BringUpServer(const std::function<void(const std::string&)>& on_token) {
  Node& server = *nodes_.front();
  if (!server.usable()) return;
  Provision& s = server_;
  Guarded(s, server.outcome, true, [&] {
    s.ChooseTunnelPortIfTunnel();
    s.BringUpClusterIfOn(*server.session, [&](NodeShell& shell) {
      const std::string token = OnServerInstalled(shell);
      s.console_.Step("join", "joining the agents to " + s.name_ + " while it is validated");
      on_token(token);
    });
    s.MergeKubeconfigIfAsked();
  });
}

void ClusterProvision::ReachOverSsh(Node& n) {
  Provision& p = *n.provision;
  n.session.emplace(p.WaitForSsh());
  p.InstallTtlIfAsked(*n.session);
  n.shell = std::make_unique<SshNodeShell>(&*n.session);
}

InstallerArgs ClusterProvision::AgentArgs(const Provision& agent) {
  InstallerArgs args = agent.K3sArgs();
  args.node_firewall = NodeFirewallFor(agent.plan_);
  return args;
}

void ClusterProvision::PrepareAgent(Node& n) {
  Provision& a = *n.provision;
  a.rec_.phase = "installing";
  a.Save();
  if (a.plan_.boot_route && !a.plan_.startup_script &&
      n.shell->RunAsRoot("wait for the boot install", AgentBootInstallWaitCommand(), "",
                         std::chrono::seconds(a.opt_.boot_install_wait_seconds.value))
              .exit_status == 0) {
    return;  // the boot run prepared it; the join's run adds what it lacks (addresses, peers)
  }
  ThrowIfInstallerFailed(
      n.shell->RunAsRoot("push installer (agent)", InstallerPushCommand(AgentArgs(a)),
                         InstallerScript(), std::chrono::minutes(30)),
      a.name_, "");
}

void ClusterProvision::JoinAgent(Node& n, const std::string& token, const std::string& url) {
  Provision& a = *n.provision;
  const InstallerArgs args = AgentArgs(a);
  // Before the join, so the kubelet never listens to the whole private network.
  if (a.plan_.private_peers) {
    SetPrivatePeersFirewall(*n.shell, a.name_, args.node_ip, args.peers, "gpuprov provision");
  }
  const SshRunResult joined = n.shell->RunAsRoot(
      "join the cluster", AgentJoinCommand(args, url), token + "\n", std::chrono::minutes(10));
  if (joined.exit_status != 0) {
    throw Error("agent " + a.name_ + " could not join " + url + " (exit " +
                    std::to_string(joined.exit_status) + "): " + TrimSpace(joined.stderr_text),
                "look with `gpuprov ssh " + a.name_ +
                    " -- sudo journalctl -u k3s-agent`, then re-run the same `gpuprov provision`");
  }
}

void ClusterProvision::BringUpServerAndJoinAgents() {
  Node& server = *nodes_.front();
  // The token reaches the agents' threads once: from the server's bring-up as soon as its k3s
  // runs, or "" when the bring-up ended without it (the server's outcome says why).
  std::promise<std::string> token_promise;
  std::shared_future<std::string> token = token_promise.get_future().share();
  bool token_given = false;
  const auto give_token = [&](const std::string& t) {
    if (token_given) return;
    token_given = true;
    token_promise.set_value(t);
  };
  const std::string url = AgentServerUrl(PeerAddress(server_.rec_));
  std::vector<std::thread> threads;
  for (std::size_t i = 1; i < nodes_.size(); ++i) {
    Node* n = nodes_[i].get();
    if (!n->peer()) continue;
    threads.emplace_back([this, n, &server, token, &url] {
      Provision& a = *n->provision;
      Guarded(a, n->outcome, true, [&] {
        ReachOverSsh(*n);
        PrepareAgent(*n);
        CrashPoint("agent-prepared");
      });
      const std::string t = token.get();
      if (!n->usable()) return;
      if (t.empty()) {
        n->Fail("the server " + server.outcome.name + " is not up: " + server.outcome.error,
                "re-run the same `gpuprov provision` once the server's problem is fixed");
        return;
      }
      Guarded(a, n->outcome, true, [&] {
        JoinAgent(*n, t, url);
        CrashPoint("agent-joined");
      });
    });
  }
  if (server.peer()) Guarded(server_, server.outcome, true, [&] { ReachOverSsh(server); });
  BringUpServer(give_token);
  give_token("");
  for (auto& t : threads) t.join();
  if (server.usable()) return;
  // Agents that joined before the server's validation failed are not in a working cluster.
  for (std::size_t i = 1; i < nodes_.size(); ++i) {
    nodes_[i]->Fail("the server " + server.outcome.name + " is not up: " + server.outcome.error,
                    "re-run the same `gpuprov provision` once the server's problem is fixed");
  }
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
    std::this_thread::sleep_for(kClusterPollInterval);
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
      RunOverlayCheck(*server.shell, status[0].node_name, agent_node, std::chrono::seconds(120),
                      kClusterPollInterval);
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
