// SPDX-License-Identifier: Apache-2.0
#include "gcp_rules.h"

#include <Poco/DigestEngine.h>
#include <Poco/JSON/Array.h>
#include <Poco/SHA2Engine.h>

#include <cctype>
#include <sstream>

#include "cluster_request.h"
#include "credentials.h"
#include "driver_status.h"
#include "gcp_auth.h"
#include "gpuprov/sdk.hpp"
#include "json_util.h"
#include "tags.h"
#include "text.h"

namespace gpuprov::gcp {
namespace {

using gpuprov::sdk::DriverError;
using Poco::JSON::Array;
using Poco::JSON::Object;
namespace json = gpuprov::drivers::json;

}  // namespace

std::string FirewallName(const std::string& vm_name) { return kResourcePrefix + vm_name; }

std::string ClusterNetworkTag(const std::string& cluster) {
  const std::string tag = kClusterNetworkTagPrefix + cluster;
  if (tag.size() > 63) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "cluster.name: the network tag " + tag + " of cluster " + cluster +
                          " passes the 63 characters of a Compute Engine tag; choose a "
                          "cluster name of at most 47 characters");
  }
  return tag;
}

std::string ClusterFirewallName(const std::string& cluster) {
  return drivers::ClusterResourceName(cluster) + "-peers";
}

std::string SourcesFirewallName(const std::string& vm_name) {
  Poco::SHA2Engine sha(Poco::SHA2Engine::SHA_256);
  sha.update(vm_name);
  return std::string(kResourcePrefix) + "src-" +
         Poco::DigestEngine::digestToHex(sha.digest()).substr(0, 16);
}

std::string LabelKey(const std::string& s) {
  std::string out = LabelValue(s);
  if (out.empty()) return out;
  if (!(out[0] >= 'a' && out[0] <= 'z')) out = "k-" + out;
  return out.substr(0, 63);
}

std::string LabelValue(const std::string& s) { return drivers::FitTag(s, "-_", 63, true); }

std::string StateOf(const std::string& s) {
  if (s == "PROVISIONING" || s == "STAGING" || s == "REPAIRING") return "pending";
  if (s == "RUNNING") return "running";
  if (s == "STOPPING" || s == "STOPPED" || s == "SUSPENDING" || s == "SUSPENDED" ||
      s == "TERMINATED") {
    return "stopped";
  }
  return "error";
}

// [a-z]+-[a-z]+[0-9]+-[a-z], written out: libstdc++'s std::regex recurses once per character
// and a long input overflowed the stack (found by fuzzing, docs/fuzzing.md).
bool IsZone(const std::string& location) {
  const auto lower = [](char c) { return c >= 'a' && c <= 'z'; };
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  std::size_t i = 0;
  const auto run = [&](auto in_class) {
    const std::size_t start = i;
    while (i < location.size() && in_class(location[i])) ++i;
    return i > start;
  };
  const auto dash = [&] { return i < location.size() && location[i++] == '-'; };
  return run(lower) && dash() && run(lower) && run(digit) && dash() &&
         i + 1 == location.size() && lower(location[i]);
}

std::string RegionOf(const std::string& location) {
  if (!IsZone(location)) return location;
  return location.substr(0, location.rfind('-'));
}

std::string LastSegment(const std::string& url) {
  size_t slash = url.rfind('/');
  return slash == std::string::npos ? url : url.substr(slash + 1);
}

std::string SshKeysEntry(const std::string& user, const std::string& public_key) {
  const std::string key = drivers::TrimSpace(public_key);
  std::istringstream words(key);
  std::string type, blob;
  words >> type >> blob;
  if (type.rfind("ssh-", 0) != 0 && type.rfind("ecdsa-", 0) != 0 && type.rfind("sk-", 0) != 0) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "ssh_public_key is not an OpenSSH public key line (\"ssh-ed25519 AAAA... "
                      "comment\")");
  }
  if (blob.empty() || key.find('\n') != std::string::npos) {
    throw DriverError(GPUPROV_STATUS_INVALID_INPUT,
                      "ssh_public_key must be one line \"<type> <base64> [comment]\"");
  }
  return user + ":" + key;
}

std::string SshUserOf(const std::string& ssh_keys_value) {
  std::istringstream lines(ssh_keys_value);
  for (std::string line; std::getline(lines, line);) {
    line = drivers::TrimSpace(line);
    size_t colon = line.find(':');
    if (colon != std::string::npos && colon > 0) return line.substr(0, colon);
  }
  return "";
}

ApiError ParseApiError(int http_status, const std::string& body) {
  ApiError e;
  e.http_status = http_status;
  Object::Ptr doc = json::TryParseObject(body);
  Object::Ptr err;
  try {
    err = json::Obj(doc, "error");
    e.message = json::Str(err, "message");
    Array::Ptr errors = json::Arr(err, "errors");
    if (Object::Ptr first = json::ObjAt(errors, 0)) e.reason = json::Str(first, "reason");
    if (e.reason.empty()) e.reason = json::Str(err, "status");
  } catch (const DriverError&) {
    err = nullptr;
  }
  if (!err) {
    e.message = body.size() > 300 ? body.substr(0, 300) + "..." : body;
  }
  return e;
}

bool IsRateLimit(const ApiError& e) {
  return e.http_status == 403 &&
         (e.reason == "rateLimitExceeded" || e.reason == "userRateLimitExceeded");
}

// Reasons (errors[0].reason) and operation error codes that say more than the HTTP status
// (REFERENCE.md §8); the rest follows the kit's HTTP table.
constexpr drivers::CloudCode kReasons[] = {
    {"quotaExceeded", GPUPROV_STATUS_QUOTA},
    {"rateLimitExceeded", GPUPROV_STATUS_TRANSIENT},
    {"userRateLimitExceeded", GPUPROV_STATUS_TRANSIENT},
};
constexpr drivers::CloudCode kOperationCodes[] = {
    {"ZONE_RESOURCE_POOL_EXHAUSTED", GPUPROV_STATUS_CAPACITY},
    {"ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", GPUPROV_STATUS_CAPACITY},
    {"REGION_RESOURCE_POOL_EXHAUSTED", GPUPROV_STATUS_CAPACITY},
    {"RESOURCE_POOL_EXHAUSTED", GPUPROV_STATUS_CAPACITY},
    {"GPU_STOCKOUT", GPUPROV_STATUS_CAPACITY},
    {"UNSUPPORTED_OPERATION", GPUPROV_STATUS_CAPACITY},
    {"QUOTA_EXCEEDED", GPUPROV_STATUS_QUOTA},
    {"RESOURCE_NOT_READY", GPUPROV_STATUS_TRANSIENT},
    {"INTERNAL_ERROR", GPUPROV_STATUS_TRANSIENT},
    // Not documented by Google as an operation code; SkyPilot's _gcp_handler (see
    // ClassifyZoneFailure) treats it as a zone's capacity.
    {"insufficientCapacity", GPUPROV_STATUS_CAPACITY},
    // Too many operations on one resource at once: wait, or go elsewhere.
    {"RESOURCE_OPERATION_RATE_EXCEEDED", GPUPROV_STATUS_TRANSIENT},
};

drivers::ApiDialect ComputeApi() {
  drivers::ApiDialect d;
  d.cloud = "Compute Engine";
  d.driver = "gcp";
  d.read_error = [](const std::string& body) {
    const ApiError e = ParseApiError(0, body);
    return drivers::ApiError{e.reason, drivers::NoFullStop(e.message)};
  };
  d.status_of = [](int http_status, const drivers::ApiError& e, const std::string&) {
    return ClassifyApiError(ApiError{http_status, e.code, e.text});
  };
  d.rate_limited = [](int http_status, const drivers::ApiError& e) {
    return IsRateLimit(ApiError{http_status, e.code, e.text});
  };
  d.quote = drivers::QuoteForm::kCodeAndText;
  d.hints = {
      {.status = GPUPROV_STATUS_AUTH,
       .code = "accessNotConfigured",
       .text = ". Enable the Compute Engine API: gcloud services enable compute.googleapis.com "
               "--project {project}"},
      {.http_status = 403,
       .status = GPUPROV_STATUS_AUTH,
       .text = ". {account} lacks permission in project {project} "
               "(roles/compute.instanceAdmin.v1 and roles/compute.securityAdmin cover gpuprov)"},
      {.status = GPUPROV_STATUS_AUTH,
       .text = ". Credentials from {origin} were refused; " + CredentialsHint()},
      {.status = GPUPROV_STATUS_QUOTA,
       .text = ". Request more quota (IAM & Admin > Quotas) or choose another region"},
  };
  return d;
}

gpuprov_type_status ClassifyApiError(const ApiError& e) {
  // Only a 403 carries the reasons above; another status with them means what its status says.
  if (e.http_status == 403) return drivers::StatusOf(e.http_status, e.reason, kReasons);
  return drivers::StatusOf(e.http_status);
}

OperationError ParseOperationError(const Object::Ptr& operation) {
  OperationError out;
  Object::Ptr err = json::Obj(operation, "error");
  Array::Ptr errors = json::Arr(err, "errors");
  if (!errors) return out;
  for (size_t i = 0; i < errors->size(); ++i) {
    Object::Ptr e = json::ObjAt(errors, i);
    if (!e) continue;
    if (out.code.empty()) out.code = json::Str(e, "code");
    const std::string m = json::Str(e, "message");
    if (!m.empty()) out.message += (out.message.empty() ? "" : "; ") + m;
    if (Array::Ptr details = json::Arr(e, "errorDetails")) {
      for (size_t d = 0; d < details->size(); ++d) {
        Object::Ptr info = json::Obj(json::ObjAt(details, d), "errorInfo");
        Object::Ptr meta = json::Obj(info, "metadatas");
        const std::string zones = json::Str(meta, "zonesAvailable");
        std::istringstream list(zones);
        for (std::string z; std::getline(list, z, ',');) {
          z = drivers::TrimSpace(z);
          if (!z.empty()) out.zones_available.push_back(z);
        }
      }
    }
  }
  if (out.code.empty()) out.code = "UNKNOWN";
  return out;
}

gpuprov_type_status ClassifyOperationError(const std::string& code) {
  return drivers::StatusOfCode(kOperationCodes, code).value_or(GPUPROV_STATUS_FAILED);
}

ZoneFailure ClassifyZoneFailure(const std::string& code) {
  if (code == "RESOURCE_NOT_FOUND" || code == kGoneAfterCreate) {
    return {true, GPUPROV_STATUS_CAPACITY,
            "the instance was gone when its create finished, which Compute Engine does when "
            "the zone runs out of capacity during the create"};
  }
  if (code == "RESOURCE_OPERATION_RATE_EXCEEDED") {
    return {true, GPUPROV_STATUS_TRANSIENT,
            "Compute Engine refused the operation for its rate (too many operations at once)"};
  }
  const gpuprov_type_status status = ClassifyOperationError(code);
  if (status == GPUPROV_STATUS_CAPACITY) return {true, status, "no capacity"};
  return {false, status, ""};
}

bool IsOsLoginPolicyError(const std::string& message) {
  return message.find("requireOsLogin") != std::string::npos;
}

std::string OsLoginPolicyHint(const std::string& project) {
  return "the organization policy constraints/compute.requireOsLogin enforces OS Login in "
         "project " +
         project +
         ", so Compute Engine ignores the ssh-keys metadata gpuprov logs in with and SSH to "
         "the VM is refused; ask your organization's admin to exempt the project from that "
         "policy, or use a project where it is not enforced";
}

std::string BootDiskType(const std::string& machine_type) {
  // skypilot-org/skypilot sky/clouds/gcp.py `_get_disk_type`: "a3-ultragpu, n4, and a4
  // instances only support hyperdisk-balanced".
  for (const char* prefix : {"a3-ultragpu-", "a4-", "n4-"}) {
    if (machine_type.rfind(prefix, 0) == 0) return "hyperdisk-balanced";
  }
  return "pd-balanced";
}

}  // namespace gpuprov::gcp
