// SPDX-License-Identifier: Apache-2.0
//
// The Lambda-specific rules of the driver that need no network, kept apart so they are
// unit-tested directly: where the API key comes from, the error-code table, instance states,
// names of what gpuprov makes, tags, and the firewall rules it adds to (and removes from) a
// list the user shares with it. Facts from REFERENCE.md (section numbers in
// the comments).
#pragma once

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api_client.h"
#include "cluster_request.h"
#include "credentials.h"
#include "driver_request.h"
#include "gpuprov/driver_abi.h"
#include "tags.h"
#include "vm_rules.h"

namespace gpuprov::lambda {

inline constexpr const char* kDefaultEndpoint = "https://cloud.lambda.ai/api/v1";  // section 2
inline constexpr const char* kSshUser = "ubuntu";                                  // section 9
/// user_data is plain text that "cannot exceed 1MB" (L-SPEC InstanceLaunchRequest.user_data).
/// Whether Lambda means 10^6 or 2^20 bytes is unconfirmed: the driver takes the smaller, which
/// both readings accept (a larger installer goes gzip'd, or over SSH).
inline constexpr size_t kMaxUserDataBytes = 1000 * 1000;
/// Names of what gpuprov makes (the kit's kResourcePrefix): SSH key "gpuprov-<sha256 of the
/// key, 16 hex>", firewall ruleset "gpuprov-<vm name>"; account-wide rules carry the
/// description "gpuprov:<vm>,<vm>".
using drivers::kResourcePrefix;
inline constexpr const char* kRuleDescriptionPrefix = "gpuprov:";
/// Documented pacing (L-SPEC info.description: "generally limited to one request per second",
/// launch "one request per 12 seconds"); the limits count per API key.
inline constexpr int kRequestIntervalMs = 1000;
inline constexpr int kLaunchIntervalMs = 12000;

/// The pacer's key for one API key at one endpoint: "lambda <endpoint> <16 hex of
/// sha256(api key)>" (the key itself never leaves the credential).
std::string PaceKey(const std::string& endpoint, const std::string& api_key);

/// Instance names are at most 64 characters (section 3.1); gpuprov's are host-name-like and
/// at most 56, so "gpuprov-<name>" fits a ruleset name (64).
inline const drivers::VmNameRules kVmNameRules{
    .what = "a Lambda instance name",
    .max_length = 56,
    .punctuation = "-",
    .note = "gpuprov names the VM's firewall ruleset gpuprov-<name>, and Lambda allows 64"};

/// The API key: the variable named by config.token_env, then $LAMBDA_API_KEY, then the
/// file SkyPilot and Lambda's tooling use (config.api_key_file, else
/// ~/.lambda_cloud/lambda_keys, a line "api_key = <KEY>") (section 1).
std::optional<drivers::Credential> ResolveApiKey(const Poco::JSON::Object::Ptr& config);

/// $HOME/.lambda_cloud/lambda_keys ("" without HOME).
std::string DefaultKeysFile();

/// The api_key of a lambda_keys text ("api_key = K" lines, '#' comments), or nullopt.
std::optional<std::string> ApiKeyFromKeysText(const std::string& text);

/// What to tell a user whose key is missing or refused.
std::string ApiKeyHint();

/// Lambda's error object {"error": {"code", "message", "suggestion"?}} (section 2, 8).
struct ApiError {
  std::string code;
  std::string message;
  std::string suggestion;
  /// "code: message (suggestion)", or the body cut short when it is not an error object.
  std::string Text() const;
};
ApiError ParseApiError(const std::string& body);

/// The driver status of an answer: the code table of section 8 (provider/... and
/// global/rate-limited TRANSIENT), else the HTTP status.
gpuprov_type_status StatusOf(int http_status, const std::string& code);

inline constexpr const char* kCapacityCode = "instance-operations/launch/insufficient-capacity";
/// L-SPEC deleteFirewallRuleset: 400 with this code while an instance still uses the ruleset.
inline constexpr const char* kRulesetInUseCode = "firewall-rulesets/firewall-ruleset-in-use";
/// L-SPEC launchInstance: 403 with this code when the account's billing address is invalid.
inline constexpr const char* kInvalidAddressCode = "global/invalid-address";

/// Lambda's API as the kit's client reads it (api_client.h): the error envelope (ApiError),
/// the code table (StatusOf) and the hints a refused call ends with.
drivers::ApiDialect LambdaApi();
/// "Authorization: Bearer <key>", the key from ResolveApiKey(config).
drivers::ApiAuth LambdaAuth(const Poco::JSON::Object::Ptr& config);

/// L-SPEC firewallRulesList / firewallRulesSet: "Firewall rules do not apply to the
/// us-south-1 region." Whether ports there are then all open or only what a ruleset opens is
/// unconfirmed: the driver never counts the account-wide rules as opening a port there.
inline constexpr const char* kNoAccountRulesRegion = "us-south-1";
/// False for the region where Lambda's account-wide firewall rules do not apply.
bool AccountRulesApply(const std::string& region);

/// An instance status (section 3.2) -> the protocol's state word and a message:
/// booting -> pending; active -> running once it has an IP (pending before, "active, waiting
/// for its IP"); unhealthy -> error; terminating, terminated, preempted -> terminated; anything
/// else -> error naming it.
struct VmState {
  std::string state;
  std::string message;
};
VmState StateOf(const std::string& lambda_status, bool has_ip);

/// True for statuses of an instance that is gone or going (section 3.3).
bool IsGoneStatus(const std::string& lambda_status);

std::string RulesetName(const std::string& vm_name);

/// "gpuprov-<first 16 hex of sha256(type blob)>" for an OpenSSH public key line; throws
/// DriverError(INVALID_INPUT) when the line is not "<type> <base64> [comment]".
std::string KeyName(const std::string& public_key_line);

/// True when two OpenSSH public key lines hold the same key (type and blob; comments ignored).
bool SameKey(const std::string& a, const std::string& b);

/// The launch "tags" (section 3.1, L-SPEC RequestedTagEntry [{"key","value"}]): gpuprov=1,
/// gpuprov-name=<name>, a cluster node's gpuprov-cluster=<cluster> and gpuprov-role=<role>
/// (`cluster` nullopt for a plain VM), then the user's tags with keys fitted to
/// ^[a-z][a-z0-9-:]+$ (at most 55, never lambda-ai-...) and values cut to 128.
Poco::JSON::Array::Ptr LaunchTags(const std::string& vm_name,
                                  const std::map<std::string, std::string>& user_tags,
                                  const std::optional<drivers::ClusterRequest>& cluster = {});

/// The value of tag `key` in an instance's "tags", or "".
std::string TagValue(const Poco::JSON::Object::Ptr& instance, const std::string& key);

/// A rule list holds at most 20 rules (section 5).
inline constexpr size_t kMaxRules = 20;
/// L-SPEC FirewallRule.description: maxLength 128.
inline constexpr size_t kMaxRuleDescription = 128;

/// One inbound rule (section 5): tcp [port, port] from `source` (an IPv4 CIDR) with a
/// description.
Poco::JSON::Object::Ptr TcpRule(int port, const std::string& description,
                                const std::string& source = "0.0.0.0/0");

/// The rules of a VM's own ruleset: one per port and source (sources.Of(port): the
/// allow_from CIDRs for a narrowed port, 0.0.0.0/0 for the others), described
/// "gpuprov <vm>: tcp <port>".
Poco::JSON::Array::Ptr RulesetRules(const std::string& vm_name, const std::vector<int>& ports,
                                    const drivers::PortSources& sources = {});

/// A VM's ruleset rules after opening `ports` with `sources`; the rules of other ports are kept
/// in order. `exact` (open_ports): a narrowed port ends with one rule per allow_from source
/// (its single-port tcp rules from other sources go), any other port gets a 0.0.0.0/0 rule
/// unless a rule opens it to everyone already. Not `exact` (a create that finds the VM): only
/// a port no tcp rule opens at all gets rules, from sources.Of(port). *changed says whether the
/// list differs.
Poco::JSON::Array::Ptr OpenInRuleset(const Poco::JSON::Array::Ptr& rules,
                                     const std::string& vm_name, const std::vector<int>& ports,
                                     const drivers::PortSources& sources, bool exact,
                                     bool* changed);

/// The ports `sources` narrows that a rule of `rules` (tcp or all) opens to a source that is
/// not one of allow_from, sorted.
std::vector<int> PortsWiderThan(const Poco::JSON::Array::Ptr& rules,
                                const drivers::PortSources& sources);

/// Throws DriverError(INVALID_INPUT) naming allow_from when `rules` holds more than kMaxRules.
void CheckRuleCount(const Poco::JSON::Array::Ptr& rules, const drivers::PortSources& sources);

/// The tcp ports a rule list opens to 0.0.0.0/0 (single ports and ranges; "all" counts as
/// every port: reported as 0).
std::set<int> OpenTcpPorts(const Poco::JSON::Array::Ptr& rules);

/// The account-wide list with `vm_name` added to gpuprov's rule for each port (one rule per
/// port, its description naming the VMs that need it; a rule is added for a port that has
/// none, or whose rules' descriptions would pass kMaxRuleDescription). Every other rule is kept as it is, in order. *changed says whether it differs.
Poco::JSON::Array::Ptr AddToAccountRules(const Poco::JSON::Array::Ptr& rules,
                                         const std::string& vm_name, const std::vector<int>& ports,
                                         bool* changed);

/// The account-wide list without `vm_name` in gpuprov's rules, and without names not in
/// `live_vms` (VMs that no longer exist); a gpuprov rule that names no VM is dropped. Rules
/// gpuprov did not make are kept as they are. *changed says whether it differs.
Poco::JSON::Array::Ptr RemoveFromAccountRules(const Poco::JSON::Array::Ptr& rules,
                                              const std::string& vm_name,
                                              const std::set<std::string>& live_vms,
                                              bool* changed);

/// The VM names gpuprov's rules in an account-wide list name (its rules' descriptions), in
/// order of first appearance; rules gpuprov did not make are not read.
std::vector<std::string> AccountRuleVms(const Poco::JSON::Array::Ptr& rules);

}  // namespace gpuprov::lambda
