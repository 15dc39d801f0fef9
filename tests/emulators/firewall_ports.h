// SPDX-License-Identifier: Apache-2.0
//
// Which tcp ports of an instance a cloud's firewall rules let the test host
// (127.0.0.1, where tests connect from) reach. One function per cloud; the
// cloud API hands the result to the backend (InstanceBackend::SetReachablePorts).
// Ranges of at most kMaxExpandedRange ports count port by port; a wider range
// (or "all") counts only the ports gpuprov uses (22, 80, 443, 6443) inside it,
// so a backend never has to open thousands of ports.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "emulator_http.h"
#include "instance_backend.h"

namespace gpuprov::emulator {

constexpr int kMaxExpandedRange = 16;

/// The address tests reach instances from.
constexpr const char* kTestClientAddress = "127.0.0.1";

/// True when the IPv4 CIDR ("0.0.0.0/0", "127.0.0.0/8", "1.2.3.4/32", or a bare
/// address) contains address. False for anything unparsable.
bool CidrContains(const std::string& cidr, const std::string& address);

/// The same ports as the backend's PortSet.
PortSet ToPortSet(const std::set<int>& ports);

/// Adds [lo, hi] to ports as described above.
void AddPortRange(std::set<int>& ports, int lo, int hi);

/// Lambda: the account-wide inbound rules plus the rules of each firewall ruleset
/// attached to the instance. In us-south-1 the account-wide rules do not apply (Lambda's
/// OpenAPI spec v1.8.3, firewallRulesList/firewallRulesSet); what that leaves is
/// unconfirmed, so both readings exist: only the rulesets' rules (default), or nothing
/// filtered at all (`us_south_1_unfiltered`). A rule:
/// {"protocol": "tcp"|"udp"|"icmp"|"all", "port_range": [lo, hi] (absent: every
/// port), "source_network": CIDR, "description"}.
std::set<int> LambdaAllowedPorts(const std::string& region, const JsonArray& account_rules,
                                 const std::vector<JsonArray>& ruleset_rules,
                                 bool us_south_1_unfiltered = false);

/// Hyperstack: a VM's security rules; only direction "ingress", ethertype IPv4,
/// protocol "tcp" (or "any"), remote_ip_prefix containing the test host count;
/// port_range_min/max absent = every port. No rule: nothing is reachable.
std::set<int> HyperstackAllowedPorts(const JsonArray& security_rules);

}  // namespace gpuprov::emulator
