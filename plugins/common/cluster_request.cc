// SPDX-License-Identifier: Apache-2.0
#include "cluster_request.h"

#include <Poco/JSON/Array.h>

#include "gpuprov/sdk.hpp"
#include "json_util.h"

namespace gpuprov::drivers {
namespace {

using Poco::JSON::Array;
using Poco::JSON::Object;
using sdk::DriverError;

[[noreturn]] void Invalid(const std::string& message) {
  throw DriverError(GPUPROV_STATUS_INVALID_INPUT, message);
}

// [a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?: a DNS label, which fits every cloud's tag and name rules.
bool ValidClusterName(const std::string& name) {
  if (name.empty() || name.size() > 63 || name.front() == '-' || name.back() == '-') return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

std::string ClusterName(const Object::Ptr& o, const std::string& field) {
  const std::string name = json::Str(o, "name");
  if (!ValidClusterName(name)) {
    Invalid(field + " '" + name + "' is not a cluster name: lower-case letters, digits and "
            "'-', at most 63, starting and ending with a letter or digit");
  }
  return name;
}

std::vector<PeerPort> PeerPortsOf(const Object::Ptr& o, const std::string& field) {
  Array::Ptr a = json::Arr(o, "peer_ports");
  if (!a || a->size() == 0) Invalid(field + " must be a non-empty array of {port, protocol}");
  std::vector<PeerPort> out;
  for (size_t i = 0; i < a->size(); ++i) {
    Object::Ptr p = json::ObjAt(a, i);
    const std::string where = field + "[" + std::to_string(i) + "]";
    if (!p || !p->has("port") || !p->get("port").isInteger()) {
      Invalid(where + " must be {\"port\": 1..65535, \"protocol\": \"tcp\"|\"udp\"}");
    }
    const long long port = json::Int(p, "port");
    const std::string protocol = json::Str(p, "protocol");
    if (port < 1 || port > 65535) Invalid(where + ".port " + std::to_string(port) + " is not in 1..65535");
    if (protocol != "tcp" && protocol != "udp") {
      Invalid(where + ".protocol must be \"tcp\" or \"udp\", not '" + protocol + "'");
    }
    PeerPort pp{static_cast<int>(port), protocol};
    bool seen = false;
    for (const auto& q : out) seen = seen || q == pp;
    if (!seen) out.push_back(pp);
  }
  return out;
}

}  // namespace

std::optional<ClusterRequest> ParseCluster(const Object::Ptr& request) {
  if (!request || !request->has("cluster") || request->isNull("cluster")) return std::nullopt;
  Object::Ptr c = json::Obj(request, "cluster");
  if (!c) Invalid("cluster must be an object {\"name\", \"role\", \"peer_ports\"}");
  ClusterRequest out;
  out.name = ClusterName(c, "cluster.name");
  out.role = json::Str(c, "role");
  if (out.role != "server" && out.role != "agent") {
    Invalid("cluster.role must be \"server\" or \"agent\", not '" + out.role + "'");
  }
  out.peer_ports = PeerPortsOf(c, "cluster.peer_ports");
  return out;
}

PeerPortsRequest ParsePeerPortsRequest(const std::string& request_json) {
  Object::Ptr r = json::ParseObject(request_json, "the open_peer_ports request");
  PeerPortsRequest out;
  Object::Ptr named = new Object;
  named->set("name", json::Str(r, "cluster"));
  out.cluster = ClusterName(named, "cluster");
  out.peer_ports = PeerPortsOf(r, "peer_ports");
  Array::Ptr peers = json::Arr(r, "peers");
  if (!peers) Invalid("peers must be an array of {id, name, private_ip, public_ip}");
  for (size_t i = 0; i < peers->size(); ++i) {
    Object::Ptr p = json::ObjAt(peers, i);
    if (!p) Invalid("peers[" + std::to_string(i) + "] must be an object");
    Peer peer{json::Str(p, "id"), json::Str(p, "name"), json::Str(p, "private_ip"),
              json::Str(p, "public_ip")};
    if (peer.id.empty() && peer.name.empty()) {
      Invalid("peers[" + std::to_string(i) + "] needs an id or a name");
    }
    out.peers.push_back(std::move(peer));
  }
  return out;
}

std::string PeerPortsLeftToNodeFirewall(const std::string& request_json) {
  ParsePeerPortsRequest(request_json);
  return "{}";
}

std::string ClusterResourceName(const std::string& cluster) { return "gpuprov-" + cluster; }

std::string PeerPortsText(const std::vector<PeerPort>& ports) {
  std::string out;
  for (const char* protocol : {"tcp", "udp"}) {
    std::string list;
    for (const auto& p : ports) {
      if (p.protocol == protocol) list += (list.empty() ? "" : ", ") + std::to_string(p.port);
    }
    if (!list.empty()) out += (out.empty() ? "" : "; ") + std::string(protocol) + " " + list;
  }
  return out;
}

}  // namespace gpuprov::drivers
