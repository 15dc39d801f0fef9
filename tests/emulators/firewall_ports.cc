// SPDX-License-Identifier: Apache-2.0
#include "firewall_ports.h"

#include <Poco/Net/IPAddress.h>

namespace gpuprov::emulator {
namespace {

constexpr int kWellKnownPorts[] = {22, 80, 443, 6443};

std::optional<int> IntAt(const JsonArray& a, unsigned i) {
  if (!a || i >= a->size() || !a->get(i).isInteger()) return std::nullopt;
  return a->get(i).convert<int>();
}

}  // namespace

PortSet ToPortSet(const std::set<int>& ports) {
  PortSet set;
  for (int p : ports) set.Add(p);
  return set;
}

bool CidrContains(const std::string& cidr, const std::string& address) {
  const size_t slash = cidr.find('/');
  const std::string net = cidr.substr(0, slash);
  int bits = 32;
  if (slash != std::string::npos) {
    try {
      size_t used = 0;
      bits = std::stoi(cidr.substr(slash + 1), &used);
      if (used != cidr.size() - slash - 1) return false;
    } catch (const std::exception&) {
      return false;
    }
  }
  if (bits < 0 || bits > 32) return false;
  Poco::Net::IPAddress a, n;
  if (!Poco::Net::IPAddress::tryParse(net, n) || !Poco::Net::IPAddress::tryParse(address, a) ||
      n.family() != Poco::Net::IPAddress::IPv4 || a.family() != Poco::Net::IPAddress::IPv4) {
    return false;
  }
  if (bits == 0) return true;
  Poco::Net::IPAddress mask(static_cast<unsigned>(bits), Poco::Net::IPAddress::IPv4);
  return (a & mask) == (n & mask);
}

void AddPortRange(std::set<int>& ports, int lo, int hi) {
  lo = std::max(lo, 1);
  hi = std::min(hi, 65535);
  if (lo > hi) return;
  if (hi - lo + 1 <= kMaxExpandedRange) {
    for (int p = lo; p <= hi; ++p) ports.insert(p);
    return;
  }
  for (int p : kWellKnownPorts) {
    if (p >= lo && p <= hi) ports.insert(p);
  }
}

std::set<int> LambdaAllowedPorts(const std::string& region, const JsonArray& account_rules,
                                 const std::vector<JsonArray>& ruleset_rules,
                                 bool us_south_1_unfiltered) {
  std::set<int> ports;
  auto apply = [&](const JsonArray& rules) {
    if (!rules) return;
    for (unsigned i = 0; i < rules->size(); ++i) {
      JsonObject r = rules->getObject(i);
      if (!r) continue;
      const std::string proto = GetString(r, "protocol").value_or("");
      if (proto != "tcp" && proto != "all") continue;
      if (!CidrContains(GetString(r, "source_network").value_or(""), kTestClientAddress)) continue;
      JsonArray range = GetArray(r, "port_range");
      if (!range) {
        AddPortRange(ports, 1, 65535);
        continue;
      }
      auto lo = IntAt(range, 0), hi = IntAt(range, 1);
      if (lo && hi) AddPortRange(ports, *lo, *hi);
    }
  };
  // us-south-1: "Firewall rules do not apply to the us-south-1 region" (Lambda's OpenAPI
  // spec v1.8.3, firewallRulesList). Read as "only the rulesets filter" by default, or as
  // "no filtering" (every port counts, as a wide range does): both UNCONFIRMED.
  if (region != "us-south-1") {
    apply(account_rules);
  } else if (us_south_1_unfiltered) {
    AddPortRange(ports, 1, 65535);
  }
  for (const auto& rules : ruleset_rules) apply(rules);
  return ports;
}

std::set<int> HyperstackAllowedPorts(const JsonArray& security_rules) {
  std::set<int> ports;
  if (!security_rules) return ports;
  for (unsigned i = 0; i < security_rules->size(); ++i) {
    JsonObject r = security_rules->getObject(i);
    if (!r) continue;
    if (GetString(r, "direction").value_or("") != "ingress") continue;
    if (GetString(r, "ethertype").value_or("IPv4") != "IPv4") continue;
    const std::string proto = Lower(GetString(r, "protocol").value_or(""));
    if (proto != "tcp" && proto != "any") continue;
    if (!CidrContains(GetString(r, "remote_ip_prefix").value_or("0.0.0.0/0"),
                      kTestClientAddress)) {
      continue;
    }
    auto lo = GetInt(r, "port_range_min"), hi = GetInt(r, "port_range_max");
    if (!lo && !hi) {
      AddPortRange(ports, 1, 65535);
    } else {
      AddPortRange(ports, static_cast<int>(lo.value_or(*hi)), static_cast<int>(hi.value_or(*lo)));
    }
  }
  return ports;
}

}  // namespace gpuprov::emulator
