#include "cluster_join.h"

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>

#include <algorithm>
#include <cctype>
#include <sstream>
#include <thread>

#include "error.h"
#include "installer_bundle.h"
#include "interrupt.h"
#include "kube_api_client.h"
#include "node_shell.h"
#include "ssh_client.h"

namespace gpuprov {
namespace {

using Poco::JSON::Array;
using Poco::JSON::Object;

Object::Ptr ObjectAt(const Object::Ptr& o, const std::string& key) {
  return o && o->isObject(key) ? o->getObject(key) : nullptr;
}

std::string Str(const Object::Ptr& o, const std::string& key) {
  return o ? o->optValue<std::string>(key, "") : "";
}

int ToInt(const Poco::Dynamic::Var& v) {
  try {
    return v.isString() ? std::stoi(v.extract<std::string>()) : v.convert<int>();
  } catch (...) {
    return 0;
  }
}

/// A single-quoted shell word.
std::string Quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string Stringify(const Object& o) {
  std::ostringstream out;
  o.stringify(out);
  return out.str();
}

Object::Ptr Metadata(const std::string& name, bool namespaced) {
  Object::Ptr meta = new Object;
  meta->set("name", name);
  if (namespaced) meta->set("namespace", std::string(kOverlayNamespace));
  Object::Ptr labels = new Object;
  labels->set("app", std::string(kOverlayEcho));
  labels->set("gpuprov", "1");
  meta->set("labels", labels);
  return meta;
}

Object::Ptr Container(const std::string& name, const std::vector<std::string>& args) {
  Object::Ptr c = new Object;
  c->set("name", name);
  c->set("image", std::string(kOverlayImage));
  Array::Ptr a = new Array;
  for (const auto& arg : args) a->add(arg);
  c->set("args", a);
  return c;
}

/// Tolerates every taint, so the pod runs on a GPU node tainted nvidia.com/gpu.
Array::Ptr TolerateAll() {
  Array::Ptr tolerations = new Array;
  Object::Ptr any = new Object;
  any->set("operator", "Exists");
  tolerations->add(any);
  return tolerations;
}

const std::string kApi = "https://127.0.0.1:6443";
const std::string kNs = std::string("/api/v1/namespaces/") + kOverlayNamespace;

}  // namespace

const std::vector<PeerPort>& ClusterPeerPorts() {
  static const std::vector<PeerPort> kPorts = {{6443, "tcp"}, {10250, "tcp"}, {51820, "udp"}};
  return kPorts;
}

std::string PeerAddress(const VmRecord& rec) {
  return rec.private_ip.empty() ? rec.public_ip : rec.private_ip;
}

void SetNodeFirewallPeers(NodeShell& node, const std::string& name,
                          const std::vector<std::string>& peers, const std::string& again) {
  const SshRunResult r = node.RunAsRoot("node firewall peers", PeersOnlyCommand(peers), "",
                                        std::chrono::minutes(2));
  if (r.exit_status != 0) {
    throw Error("the node firewall of " + name + " could not be set to the cluster's nodes " +
                    "(exit " + std::to_string(r.exit_status) + "): " + TrimSpace(r.stderr_text),
                "look at " + std::string(kNodeInstallLog) + " with `gpuprov ssh " + name +
                    "`, then run the same `" + again + "` again");
  }
}

std::string PrivatePeersCommand(const std::string& node_ip, const std::vector<std::string>& peers) {
  std::string addresses;
  for (const auto& peer : peers) {
    // IPv4 peers only: the private network is IPv4 (Lambda's private_ip).
    if (peer.find_first_not_of("0123456789.") == std::string::npos && !peer.empty()) {
      addresses += (addresses.empty() ? "" : ", ") + peer;
    }
  }
  std::string ports[2];  // tcp, udp
  for (const PeerPort& p : ClusterPeerPorts()) {
    std::string& list = ports[p.protocol == "udp" ? 1 : 0];
    list += (list.empty() ? "" : ", ") + std::to_string(p.port);
  }
  std::string rules;
  if (!addresses.empty()) {
    rules = "    ip saddr { " + addresses + " } tcp dport { " + ports[0] + " } accept\n" +
            "    ip saddr { " + addresses + " } udp dport { " + ports[1] + " } accept\n";
  }
  // The network of the interface holding node_ip (a.b.c.d/len; nft takes the prefix of it).
  return "set -e\n"
         "net=$(ip -o -4 addr show to " + ShellQuote(node_ip) + " | awk '{print $4}')\n"
         "[ -n \"$net\" ] || { echo 'no interface has the address " + node_ip +
         "' >&2; exit 3; }\n"
         // An image without nft gets Debian's package (the installer's apt runs are done by now).
         "command -v nft >/dev/null || DEBIAN_FRONTEND=noninteractive timeout 600 apt-get "
         "-o DPkg::Lock::Timeout=300 install -y -q nftables >/dev/null 2>&1 || true\n"
         "command -v nft >/dev/null || { echo 'the private-peers firewall needs nft (package "
         "nftables), which could not be installed' >&2; exit 3; }\n"
         "mkdir -p /etc/gpuprov\n"
         "cat >/etc/gpuprov/private-peers.nft.new <<EOF\n"
         "table inet gpuprov_peers\n"
         "delete table inet gpuprov_peers\n"
         "table inet gpuprov_peers {\n"
         "  chain inbound {\n"
         "    type filter hook prerouting priority mangle; policy accept;\n"
         "    ip saddr != $net accept\n"
         "    iifname { \"lo\", \"cni0\", \"flannel.1\", \"flannel-wg\" } accept\n"
         "    ct state established,related accept\n"
         "    meta l4proto icmp accept\n" +
         rules +
         "    counter drop\n"
         "  }\n"
         "}\n"
         "EOF\n"
         "nft -f /etc/gpuprov/private-peers.nft.new\n"
         "mv /etc/gpuprov/private-peers.nft.new /etc/gpuprov/private-peers.nft\n"
         "unit=/etc/systemd/system/gpuprov-private-peers.service\n"
         "cat >$unit.new <<'EOF'\n"
         "[Unit]\n"
         "Description=gpuprov node firewall: the private network admits the cluster's peers only\n"
         "DefaultDependencies=no\n"
         "Wants=network-pre.target\n"
         "After=nftables.service\n"
         "Before=network-pre.target k3s.service k3s-agent.service\n"
         "[Service]\n"
         "Type=oneshot\n"
         "RemainAfterExit=yes\n"
         "ExecStart=/bin/sh -c 'nft -f /etc/gpuprov/private-peers.nft'\n"
         "[Install]\n"
         "WantedBy=sysinit.target\n"
         "EOF\n"
         "if cmp -s $unit.new $unit; then rm -f $unit.new; else mv $unit.new $unit; "
         "systemctl daemon-reload; fi\n"
         "systemctl enable gpuprov-private-peers >/dev/null 2>&1\n";
}

void SetPrivatePeersFirewall(NodeShell& node, const std::string& name, const std::string& node_ip,
                             const std::vector<std::string>& peers, const std::string& again) {
  const SshRunResult r = node.RunAsRoot("private-peers firewall",
                                        PrivatePeersCommand(node_ip, peers), "",
                                        std::chrono::minutes(2));
  if (r.exit_status != 0) {
    throw Error("the firewall of " + name + " on its private network could not be set to the "
                "cluster's nodes (exit " + std::to_string(r.exit_status) + "): " +
                    TrimSpace(r.stderr_text),
                "look with `gpuprov ssh " + name + " -- sudo nft list table inet gpuprov_peers`, "
                "then run the same `" + again + "` again");
  }
}

std::string ReadJoinToken(NodeShell& server, const std::string& cluster) {
  const SshRunResult r = server.RunAsRoot("read the join token", std::string("cat ") + kJoinTokenPath,
                                          "", std::chrono::seconds(30));
  std::string token = TrimSpace(r.stdout_text);
  const auto printable = [](unsigned char c) { return c > 0x20 && c < 0x7f; };
  if (r.exit_status != 0 || token.empty() || token.size() > 4096 ||
      !std::all_of(token.begin(), token.end(), printable)) {
    throw Error("the server of cluster " + cluster + " has no join token at " + kJoinTokenPath +
                    (r.exit_status != 0 ? " (exit " + std::to_string(r.exit_status) + ")"
                                        : " (not one line of k3s's token form)"),
                "k3s writes it when its server starts: look with `gpuprov ssh " + cluster +
                    " -- sudo systemctl status k3s`, then re-run the same `gpuprov provision`");
  }
  return token;
}

std::vector<ClusterNodeStatus> MatchClusterNodes(const std::string& nodes_json,
                                                 const std::vector<ExpectedNode>& expected) {
  std::vector<ClusterNodeStatus> out;
  for (const auto& e : expected) {
    ClusterNodeStatus s;
    s.vm = e.vm;
    s.message = "not in the cluster";
    out.push_back(s);
  }
  Object::Ptr list = ParseKubeObject(TrimSpace(nodes_json));
  if (!list || !list->isArray("items")) {
    for (auto& s : out) s.message = "no node list from the API";
    return out;
  }
  Array::Ptr items = list->getArray("items");
  for (std::size_t i = 0; i < items->size(); ++i) {
    Object::Ptr node = items->getObject(static_cast<unsigned>(i));
    const std::string name = Str(ObjectAt(node, "metadata"), "name");
    Object::Ptr status = ObjectAt(node, "status");
    std::vector<std::string> addresses;
    if (status && status->isArray("addresses")) {
      Array::Ptr a = status->getArray("addresses");
      for (std::size_t j = 0; j < a->size(); ++j) {
        addresses.push_back(Str(a->getObject(static_cast<unsigned>(j)), "address"));
      }
    }
    for (std::size_t k = 0; k < expected.size(); ++k) {
      const auto& e = expected[k];
      bool match = name == e.vm;
      for (const auto& address : e.addresses) {
        if (!address.empty() &&
            std::find(addresses.begin(), addresses.end(), address) != addresses.end()) {
          match = true;
        }
      }
      if (!match || !out[k].node_name.empty()) continue;
      ClusterNodeStatus& s = out[k];
      s.node_name = name;
      s.message = "no Ready condition yet";
      if (status && status->isArray("conditions")) {
        Array::Ptr conds = status->getArray("conditions");
        for (std::size_t j = 0; j < conds->size(); ++j) {
          Object::Ptr cond = conds->getObject(static_cast<unsigned>(j));
          if (Str(cond, "type") != "Ready") continue;
          s.ready = Str(cond, "status") == "True";
          s.message = s.ready ? "" : Str(cond, "message");
        }
      }
      Object::Ptr alloc = ObjectAt(status, "allocatable");
      if (alloc && alloc->has("nvidia.com/gpu")) s.gpus_allocatable = ToInt(alloc->get("nvidia.com/gpu"));
      break;
    }
  }
  return out;
}

std::string ClusterNodesShortfall(const std::vector<ClusterNodeStatus>& nodes, int gpus_per_node) {
  std::string out;
  const auto add = [&](const std::string& text) { out += (out.empty() ? "" : "; ") + text; };
  for (const auto& n : nodes) {
    if (n.node_name.empty()) {
      add(n.vm + ": " + n.message);
    } else if (!n.ready) {
      add(n.vm + ": node " + n.node_name + " is not Ready" +
          (n.message.empty() ? "" : " (" + n.message + ")"));
    } else if (n.gpus_allocatable < gpus_per_node) {
      add(n.vm + ": " + std::to_string(n.gpus_allocatable) + " of " +
          std::to_string(gpus_per_node) + " nvidia.com/gpu allocatable");
    }
  }
  return out;
}

std::string OverlayNamespaceJson() {
  Object o;
  o.set("apiVersion", "v1");
  o.set("kind", "Namespace");
  Object::Ptr meta = new Object;
  meta->set("name", std::string(kOverlayNamespace));
  o.set("metadata", meta);
  return Stringify(o);
}

std::string OverlayEchoDeploymentJson(const std::string& node_b) {
  Object::Ptr labels = new Object;
  labels->set("app", std::string(kOverlayEcho));
  Object::Ptr selector = new Object;
  selector->set("matchLabels", labels);
  Object::Ptr pod_spec = new Object;
  pod_spec->set("nodeName", node_b);
  pod_spec->set("tolerations", TolerateAll());
  Array::Ptr containers = new Array;
  Object::Ptr echo = Container("echo", {"netexec", "--http-port=8080"});
  Array::Ptr ports = new Array;
  Object::Ptr port = new Object;
  port->set("containerPort", 8080);
  ports->add(port);
  echo->set("ports", ports);
  containers->add(echo);
  pod_spec->set("containers", containers);
  Object::Ptr tmpl = new Object;
  tmpl->set("metadata", Metadata(kOverlayEcho, false));
  tmpl->set("spec", pod_spec);
  Object::Ptr spec = new Object;
  spec->set("replicas", 1);
  spec->set("selector", selector);
  spec->set("template", tmpl);
  Object o;
  o.set("apiVersion", "apps/v1");
  o.set("kind", "Deployment");
  o.set("metadata", Metadata(kOverlayEcho, true));
  o.set("spec", spec);
  return Stringify(o);
}

std::string OverlayEchoServiceJson() {
  Object::Ptr selector = new Object;
  selector->set("app", std::string(kOverlayEcho));
  Array::Ptr ports = new Array;
  Object::Ptr port = new Object;
  port->set("port", 80);
  port->set("targetPort", 8080);
  port->set("protocol", "TCP");
  ports->add(port);
  Object::Ptr spec = new Object;
  spec->set("selector", selector);
  spec->set("ports", ports);
  Object o;
  o.set("apiVersion", "v1");
  o.set("kind", "Service");
  o.set("metadata", Metadata(kOverlayEcho, true));
  o.set("spec", spec);
  return Stringify(o);
}

std::string OverlayProbePodJson(const std::string& node_a) {
  Object::Ptr spec = new Object;
  spec->set("nodeName", node_a);
  spec->set("restartPolicy", "Never");
  spec->set("tolerations", TolerateAll());
  Array::Ptr containers = new Array;
  containers->add(Container(
      "probe", {"connect",
                std::string(kOverlayEcho) + "." + kOverlayNamespace + ".svc.cluster.local:80",
                "--timeout=5s"}));
  spec->set("containers", containers);
  Object o;
  o.set("apiVersion", "v1");
  o.set("kind", "Pod");
  o.set("metadata", Metadata(kOverlayProbe, true));
  o.set("spec", spec);
  return Stringify(o);
}

bool EchoReady(const std::string& deployment_json) {
  Object::Ptr dep = ParseKubeObject(TrimSpace(deployment_json));
  Object::Ptr status = ObjectAt(dep, "status");
  return status && status->optValue<int>("readyReplicas", 0) >= 1;
}

std::string OverlayProbeVerdict(const std::string& pod_json) {
  Object::Ptr pod = ParseKubeObject(TrimSpace(pod_json));
  if (!pod || Str(pod, "kind") == "Status") return "";
  Object::Ptr status = ObjectAt(pod, "status");
  const std::string phase = Str(status, "phase");
  if (phase == "Succeeded") return "ok";
  if (phase != "Failed") return "";
  std::string why = Str(status, "message");
  if (why.empty() && status && status->isArray("containerStatuses")) {
    Array::Ptr css = status->getArray("containerStatuses");
    for (std::size_t i = 0; i < css->size() && why.empty(); ++i) {
      Object::Ptr t = ObjectAt(ObjectAt(css->getObject(static_cast<unsigned>(i)), "state"),
                               "terminated");
      why = Str(t, "message");
      if (why.empty() && t) why = Str(t, "reason");
    }
  }
  return why.empty() ? "the probe pod failed" : why;
}

void RunOverlayCheck(NodeShell& server, const std::string& node_a, const std::string& node_b,
                     std::chrono::seconds wait, std::chrono::milliseconds poll_interval) {
  const std::string post = "api -o /dev/null -X POST -H 'Content-Type: application/json' "
                           "--data-binary @- ";
  // Each object is created when missing (409 Conflict otherwise); the probe pod is made anew.
  std::string apply = std::string(kNodeApiFunction) + "set -e\n" +
                      "api -o /dev/null -X DELETE '" + kApi + kNs + "/pods/" + kOverlayProbe +
                      "?gracePeriodSeconds=0' 2>/dev/null || true\n" +
                      "i=0\nwhile [ \"$(api -o /dev/null -w '%{http_code}' '" + kApi + kNs +
                      "/pods/" + kOverlayProbe +
                      "' 2>/dev/null)\" = 200 ] && [ $i -lt 30 ]; do sleep 1; i=$((i+1)); done\n";
  const auto create = [&](const std::string& path, const std::string& json) {
    apply += "printf '%s' " + Quoted(json) + " | " + post + "'" + kApi + path + "' || true\n";
  };
  create("/api/v1/namespaces", OverlayNamespaceJson());
  create(std::string("/apis/apps/v1/namespaces/") + kOverlayNamespace + "/deployments",
         OverlayEchoDeploymentJson(node_b));
  create(kNs + "/services", OverlayEchoServiceJson());
  const SshRunResult applied =
      server.RunAsRoot("overlay check: apply", apply, "", std::chrono::seconds(90));
  const std::string between = "between nodes " + node_a + " and " + node_b;
  if (applied.exit_status != 0) {
    throw Error("the overlay check could not be started " + between + ": " +
                    TrimSpace(applied.stderr_text),
                "look with `kubectl -n " + std::string(kOverlayNamespace) + " get all`");
  }
  // The probe connects once: it starts when the echo server on node B is ready.
  const auto start = std::chrono::steady_clock::now();
  const auto out_of_time = [&] { return std::chrono::steady_clock::now() - start > wait; };
  const std::string echo_ready = std::string(kNodeApiFunction) + "api '" + kApi +
                                 "/apis/apps/v1/namespaces/" + kOverlayNamespace +
                                 "/deployments/" + kOverlayEcho + "' 2>/dev/null\n";
  while (!EchoReady(server.RunAsRoot("overlay check: echo ready", echo_ready, "",
                                     std::chrono::seconds(30))
                        .stdout_text)) {
    if (out_of_time()) {
      throw Error("the overlay check's echo server on node " + node_b + " is not ready after " +
                      std::to_string(wait.count()) + "s",
                  "look with `kubectl -n " + std::string(kOverlayNamespace) +
                      " describe deployment " + kOverlayEcho + "`");
    }
    ThrowIfInterrupted("the overlay check");
    std::this_thread::sleep_for(poll_interval);
  }
  const SshRunResult probed = server.RunAsRoot(
      "overlay check: probe",
      std::string(kNodeApiFunction) + "printf '%s' " + Quoted(OverlayProbePodJson(node_a)) + " | " +
          post + "'" + kApi + kNs + "/pods'\n",
      "", std::chrono::seconds(30));
  if (probed.exit_status != 0) {
    throw Error("the overlay check's probe pod could not be made on node " + node_a + ": " +
                    TrimSpace(probed.stderr_text),
                "look with `kubectl -n " + std::string(kOverlayNamespace) + " get events`");
  }
  const std::string poll = std::string(kNodeApiFunction) + "api '" + kApi + kNs + "/pods/" +
                           kOverlayProbe + "' 2>/dev/null\n";
  std::string verdict;
  while (verdict.empty()) {
    if (out_of_time()) {
      verdict = "no verdict within " + std::to_string(wait.count()) + "s";
      break;
    }
    ThrowIfInterrupted("the overlay check");
    std::this_thread::sleep_for(poll_interval);
    verdict = OverlayProbeVerdict(
        server.RunAsRoot("overlay check: poll", poll, "", std::chrono::seconds(30)).stdout_text);
  }
  server.RunAsRoot("overlay check: clean up",
                   std::string(kNodeApiFunction) + "api -o /dev/null -X DELETE '" + kApi + kNs +
                       "/pods/" + kOverlayProbe + "?gracePeriodSeconds=0' 2>/dev/null || true\n",
                   "", std::chrono::seconds(30));
  if (verdict != "ok") {
    throw Error("pods on different nodes do not reach each other through a Service " + between +
                    ": " + verdict,
                "the nodes need 51820/udp (WireGuard) between them and 10250/tcp from the "
                "server: look at the cloud's firewall for the cluster and `kubectl -n " +
                    std::string(kOverlayNamespace) + " describe pod " + kOverlayProbe + "`");
  }
}

}  // namespace gpuprov
