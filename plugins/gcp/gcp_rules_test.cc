// SPDX-License-Identifier: Apache-2.0
#include "gcp_rules.h"

#include <Poco/JSON/Parser.h>
#include <gtest/gtest.h>

#include <regex>

#include "api_client.h"
#include "driver_test_util.h"
#include "gcp_auth.h"
#include "gpuprov/sdk.hpp"
#include "loopback_server.h"

namespace gpuprov::gcp {
namespace {

using drivers::testing::RecordingHost;
using drivers::testing::Reply;
using drivers::testing::TestServer;
using gpuprov::sdk::DriverError;

Poco::JSON::Object::Ptr Parse(const std::string& text) {
  Poco::JSON::Parser parser;
  return parser.parse(text).extract<Poco::JSON::Object::Ptr>();
}

TEST(GcpRules, VmNamesFollowGceNamingAndLeaveRoomForThePrefix) {
  EXPECT_NO_THROW(drivers::ValidateVmName("gpu-k8s", kVmNameRules));
  EXPECT_NO_THROW(drivers::ValidateVmName(std::string(55, 'a'), kVmNameRules));
  for (const std::string& bad : std::vector<std::string>{"", "Gpu", "1gpu", "gpu-", "gpu_k8s",
                                                         "gpu.k8s", std::string(56, 'a')}) {
    try {
      drivers::ValidateVmName(bad, kVmNameRules);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const DriverError& e) {
      EXPECT_EQ(e.status(), GPUPROV_STATUS_INVALID_INPUT);
    }
  }
  EXPECT_EQ(FirewallName("gpu-k8s"), "gpuprov-gpu-k8s");
}

TEST(GcpRules, LabelsKeepGcesCharset) {
  EXPECT_EQ(LabelKey("Team"), "team");
  EXPECT_EQ(LabelKey("9lives"), "k-9lives");
  EXPECT_EQ(LabelKey(""), "");
  EXPECT_EQ(LabelValue("ML Team/A"), "ml_team_a");
  EXPECT_EQ(LabelValue(std::string(80, 'x')).size(), 63u);
}

TEST(GcpRules, TerminatedIsStoppedNotGone) {
  EXPECT_EQ(StateOf("PROVISIONING"), "pending");
  EXPECT_EQ(StateOf("STAGING"), "pending");
  EXPECT_EQ(StateOf("RUNNING"), "running");
  EXPECT_EQ(StateOf("STOPPING"), "stopped");
  EXPECT_EQ(StateOf("SUSPENDED"), "stopped");
  EXPECT_EQ(StateOf("TERMINATED"), "stopped");
  EXPECT_EQ(StateOf("SOMETHING_NEW"), "error");
}

TEST(GcpRules, ZonesAndRegions) {
  EXPECT_TRUE(IsZone("us-central1-a"));
  EXPECT_TRUE(IsZone("europe-west4-b"));
  EXPECT_FALSE(IsZone("us-central1"));
  for (const char* bad : {"", "us-central-a", "us-central1-", "us-central1-ab", "Us-central1-a",
                          "-us-central1-a", "uscentral1-a", "us-central1-1"}) {
    EXPECT_FALSE(IsZone(bad)) << bad;
  }
  // std::regex overflowed the stack on a long input (found by fuzzing); now a plain no.
  EXPECT_FALSE(IsZone("us-" + std::string(200000, 'a') + "1-"));
  EXPECT_EQ(RegionOf("us-central1-f"), "us-central1");
  EXPECT_EQ(RegionOf("us-central1"), "us-central1");
  EXPECT_EQ(LastSegment("https://www.googleapis.com/compute/v1/projects/p/zones/us-east1-b"),
            "us-east1-b");
  EXPECT_EQ(LastSegment("g2-standard-4"), "g2-standard-4");
}

TEST(GcpRules, UserDataUpToTheMetadataValueLimit) {
  EXPECT_NO_THROW(drivers::CheckUserData(std::string(262144, 'x'), kMaxMetadataValueBytes, "Compute Engine"));
  try {
    drivers::CheckUserData(std::string(262145, 'x'), kMaxMetadataValueBytes, "Compute Engine");
    FAIL() << "accepted 262145 bytes";
  } catch (const DriverError& e) {
    EXPECT_EQ(e.status(), GPUPROV_STATUS_INVALID_INPUT);
    EXPECT_NE(std::string(e.what()).find("262144"), std::string::npos);
  }
}

TEST(GcpRules, SshKeysMetadataEntry) {
  EXPECT_EQ(SshKeysEntry("ubuntu", "ssh-ed25519 AAAAC3Nza me@host\n"),
            "ubuntu:ssh-ed25519 AAAAC3Nza me@host");
  EXPECT_EQ(SshUserOf("ubuntu:ssh-ed25519 AAAA x\nroot:ssh-rsa BBBB y"), "ubuntu");
  EXPECT_EQ(SshUserOf(""), "");
  EXPECT_THROW(SshKeysEntry("ubuntu", "not a key"), DriverError);
  EXPECT_THROW(SshKeysEntry("ubuntu", "ssh-ed25519"), DriverError);
}

TEST(GcpRules, ApiErrorsMapToStatuses) {
  auto err = [](int status, const std::string& reason) {
    return ParseApiError(
        status, R"({"error":{"code":)" + std::to_string(status) +
                    R"(,"message":"m","errors":[{"message":"m","domain":"global","reason":")" +
                    reason + R"("}]}})");
  };
  EXPECT_EQ(err(403, "quotaExceeded").reason, "quotaExceeded");
  EXPECT_EQ(ClassifyApiError(err(403, "quotaExceeded")), GPUPROV_STATUS_QUOTA);
  EXPECT_EQ(ClassifyApiError(err(403, "rateLimitExceeded")), GPUPROV_STATUS_TRANSIENT);
  EXPECT_TRUE(IsRateLimit(err(403, "userRateLimitExceeded")));
  EXPECT_FALSE(IsRateLimit(err(403, "forbidden")));
  EXPECT_EQ(ClassifyApiError(err(403, "forbidden")), GPUPROV_STATUS_AUTH);
  EXPECT_EQ(ClassifyApiError(err(403, "accessNotConfigured")), GPUPROV_STATUS_AUTH);
  EXPECT_EQ(ClassifyApiError(err(401, "authError")), GPUPROV_STATUS_AUTH);
  EXPECT_EQ(ClassifyApiError(err(400, "invalid")), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(ClassifyApiError(err(404, "notFound")), GPUPROV_STATUS_NOT_FOUND);
  EXPECT_EQ(ClassifyApiError(err(409, "alreadyExists")), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_EQ(ClassifyApiError(err(429, "rateLimitExceeded")), GPUPROV_STATUS_TRANSIENT);
  EXPECT_EQ(ClassifyApiError(err(503, "backendError")), GPUPROV_STATUS_TRANSIENT);
  ApiError raw = ParseApiError(502, "<html>bad gateway</html>");
  EXPECT_EQ(raw.message, "<html>bad gateway</html>");
  EXPECT_EQ(raw.reason, "");
}

TEST(GcpRules, CapacityArrivesInTheFinishedOperation) {
  auto op = Parse(R"({"status":"DONE","error":{"errors":[{
      "code":"ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
      "message":"The zone 'projects/p/zones/us-central1-a' does not have enough resources available to fulfill the request.",
      "errorDetails":[{"errorInfo":{"reason":"resource_availability","domain":"compute.googleapis.com",
        "metadatas":{"zone":"us-central1-a","vmType":"g2-standard-4","zonesAvailable":"us-central1-b,us-central1-c"}}}]}]},
      "httpErrorStatusCode":503})");
  OperationError e = ParseOperationError(op);
  EXPECT_EQ(e.code, "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS");
  EXPECT_NE(e.message.find("does not have enough resources"), std::string::npos);
  EXPECT_EQ(e.zones_available, (std::vector<std::string>{"us-central1-b", "us-central1-c"}));
  EXPECT_EQ(ClassifyOperationError(e.code), GPUPROV_STATUS_CAPACITY);
  EXPECT_EQ(ClassifyOperationError("ZONE_RESOURCE_POOL_EXHAUSTED"), GPUPROV_STATUS_CAPACITY);
  EXPECT_EQ(ClassifyOperationError("QUOTA_EXCEEDED"), GPUPROV_STATUS_QUOTA);
  EXPECT_EQ(ClassifyOperationError("INTERNAL_ERROR"), GPUPROV_STATUS_TRANSIENT);
  EXPECT_EQ(ClassifyOperationError("RESOURCE_NOT_FOUND"), GPUPROV_STATUS_FAILED);
  EXPECT_TRUE(ParseOperationError(Parse(R"({"status":"DONE"})")).code.empty());
}

// F5 (REFERENCE.md §F5): which failed inserts move on to the next zone, one row each.
TEST(GcpRules, ZoneFailoverDecisionTable) {
  struct Row {
    const char* code;
    bool next_zone;
    gpuprov_type_status status;
  };
  for (const Row& r : {
           Row{"ZONE_RESOURCE_POOL_EXHAUSTED", true, GPUPROV_STATUS_CAPACITY},
           Row{"ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", true, GPUPROV_STATUS_CAPACITY},
           Row{"UNSUPPORTED_OPERATION", true, GPUPROV_STATUS_CAPACITY},
           Row{"insufficientCapacity", true, GPUPROV_STATUS_CAPACITY},
           Row{"RESOURCE_NOT_FOUND", true, GPUPROV_STATUS_CAPACITY},
           Row{kGoneAfterCreate, true, GPUPROV_STATUS_CAPACITY},
           Row{"RESOURCE_OPERATION_RATE_EXCEEDED", true, GPUPROV_STATUS_TRANSIENT},
           Row{"QUOTA_EXCEEDED", false, GPUPROV_STATUS_QUOTA},
           Row{"INTERNAL_ERROR", false, GPUPROV_STATUS_TRANSIENT},
           Row{"INVALID_FIELD_VALUE", false, GPUPROV_STATUS_FAILED},
       }) {
    const ZoneFailure f = ClassifyZoneFailure(r.code);
    EXPECT_EQ(f.next_zone, r.next_zone) << r.code;
    EXPECT_EQ(f.status, r.status) << r.code;
    if (r.next_zone) {
      EXPECT_FALSE(f.reason.empty()) << r.code;
    }
  }
  EXPECT_EQ(ClassifyOperationError("insufficientCapacity"), GPUPROV_STATUS_CAPACITY);
  EXPECT_EQ(ClassifyOperationError("RESOURCE_OPERATION_RATE_EXCEEDED"), GPUPROV_STATUS_TRANSIENT);
}

// F1 (REFERENCE.md §F1): A3 Ultra (H200) and A4 (B200) boot from Hyperdisk only.
TEST(GcpRules, HyperdiskOnlySeriesBootFromHyperdiskBalanced) {
  EXPECT_EQ(BootDiskType("a3-ultragpu-8g"), "hyperdisk-balanced");
  EXPECT_EQ(BootDiskType("a4-highgpu-8g"), "hyperdisk-balanced");
  EXPECT_EQ(BootDiskType("n4-standard-8"), "hyperdisk-balanced");
  for (const char* pd : {"a3-highgpu-8g", "a3-megagpu-8g", "a2-ultragpu-1g", "g2-standard-4",
                         "n1-standard-8", "e2-standard-4"}) {
    EXPECT_EQ(BootDiskType(pd), "pd-balanced") << pd;
  }
}

// F8 (REFERENCE.md §F8): OS Login enforced by organization policy is named, with what to do.
TEST(GcpRules, OsLoginPolicyIsRecognisedAndExplained) {
  EXPECT_TRUE(IsOsLoginPolicyError(
      "Constraint constraints/compute.requireOsLogin violated for project 470000000001."));
  EXPECT_FALSE(IsOsLoginPolicyError("Constraint constraints/compute.vmExternalIpAccess violated"));
  const std::string hint = OsLoginPolicyHint("p1");
  EXPECT_NE(hint.find("constraints/compute.requireOsLogin"), std::string::npos) << hint;
  EXPECT_NE(hint.find("ssh-keys"), std::string::npos) << hint;
  EXPECT_NE(hint.find("p1"), std::string::npos) << hint;
}

TEST(GcpRules, SourcesFirewallNameIsFixedPerVmAndAValidGceName) {
  const std::string longest(kMaxVmNameLength, 'a');
  EXPECT_EQ(SourcesFirewallName("demo"), SourcesFirewallName("demo"));
  EXPECT_NE(SourcesFirewallName("demo"), SourcesFirewallName("demo2"));
  for (const std::string& vm : {std::string("demo"), longest}) {
    const std::string name = SourcesFirewallName(vm);
    EXPECT_TRUE(std::regex_match(name, std::regex("gpuprov-src-[0-9a-f]{16}"))) << name;
    EXPECT_NE(name, FirewallName(vm));
  }
}

// A cluster's rule and tag are valid GCE names for every cluster whose agents' VM names fit
// (NAME-agent-K within kMaxVmNameLength), and differ from every VM's own rule and tag.
TEST(GcpRules, ClusterTagAndRuleNamesAreValidGceNames) {
  EXPECT_EQ(ClusterNetworkTag("train"), "gpuprov-cluster-train");
  EXPECT_EQ(ClusterFirewallName("train"), "gpuprov-train-peers");
  EXPECT_NE(ClusterNetworkTag("train"), FirewallName("train"));
  const std::string longest(kMaxVmNameLength - std::string("-agent-1").size(), 'c');
  for (const std::string& name : {ClusterNetworkTag(longest), ClusterFirewallName(longest)}) {
    EXPECT_TRUE(std::regex_match(name, std::regex("[a-z]([-a-z0-9]{0,61}[a-z0-9])?"))) << name;
  }
  try {
    ClusterNetworkTag(longest + "c");
    ADD_FAILURE() << "a 64-character tag was accepted";
  } catch (const DriverError& e) {
    EXPECT_EQ(e.status(), GPUPROV_STATUS_INVALID_INPUT);
    EXPECT_NE(std::string(e.what()).find("cluster.name"), std::string::npos) << e.what();
  }
}

std::string ComputeError(int code, const std::string& reason, const std::string& message) {
  return R"({"error": {"code": )" + std::to_string(code) + R"(, "message": ")" + message +
         R"(", "errors": [{"reason": ")" + reason + R"("}]}})";
}

// The Compute API dialect: each refusal's status, wording and hint, and the 403 rate limits
// that are retried (ComputeApi).
TEST(GcpRules, ComputeApiRefusalsCarryTheirHints) {
  Reply reply;
  TestServer server(
      [&](int, const std::string&, const std::string&, const std::string&) { return reply; });
  RecordingHost host;
  drivers::ApiDialect d = ComputeApi();
  d.base_path = [] { return std::string("/compute/v1/projects/p1"); };
  d.hint_fields = {{"project", [] { return std::string("p1"); }},
                   {"account", [] { return std::string("sa@p1.iam"); }},
                   {"origin", [] { return std::string("/k.json"); }}};
  drivers::ApiAuth auth;
  auth.token = [](bool) { return std::string("ya29.t"); };
  drivers::RetryPolicy policy = drivers::RetryPolicy::Fast();
  policy.base_delay = std::chrono::milliseconds(1);
  policy.max_delay = std::chrono::milliseconds(2);
  drivers::ApiClient api(server.Url(), policy, host.Host(), d, auth);
  auto refusal = [&](Reply r) {
    reply = std::move(r);
    try {
      api.Call("GET", "zones", "list zones");
    } catch (const DriverError& e) {
      return std::make_pair(e.status(), std::string(e.what()));
    }
    return std::make_pair(GPUPROV_STATUS_OK, std::string());
  };
  EXPECT_EQ(refusal({403, ComputeError(403, "accessNotConfigured", "API not used. "), {}}),
            std::make_pair(GPUPROV_STATUS_AUTH,
                           std::string("list zones: Compute Engine answered HTTP 403 "
                                       "accessNotConfigured: API not used. Enable the Compute "
                                       "Engine API: gcloud services enable "
                                       "compute.googleapis.com --project p1")));
  EXPECT_EQ(refusal({403, ComputeError(403, "forbidden", "Required permission."), {}}),
            std::make_pair(GPUPROV_STATUS_AUTH,
                           std::string("list zones: Compute Engine answered HTTP 403 forbidden: "
                                       "Required permission. sa@p1.iam lacks permission in "
                                       "project p1 (roles/compute.instanceAdmin.v1 and "
                                       "roles/compute.securityAdmin cover gpuprov)")));
  EXPECT_EQ(refusal({401, ComputeError(401, "authError", "Invalid Credentials"), {}}),
            std::make_pair(GPUPROV_STATUS_AUTH,
                           "list zones: Compute Engine answered HTTP 401 authError: Invalid "
                           "Credentials. Credentials from /k.json were refused; " +
                               CredentialsHint()));
  EXPECT_EQ(refusal({403, ComputeError(403, "quotaExceeded", "Quota 'CPUS' exceeded."), {}}),
            std::make_pair(GPUPROV_STATUS_QUOTA,
                           std::string("list zones: Compute Engine answered HTTP 403 "
                                       "quotaExceeded: Quota 'CPUS' exceeded. Request more quota "
                                       "(IAM & Admin > Quotas) or choose another region")));
  EXPECT_EQ(refusal({404, "", {}}),
            std::make_pair(GPUPROV_STATUS_NOT_FOUND,
                           std::string("list zones: Compute Engine answered HTTP 404")));
  const int before = server.count();
  EXPECT_EQ(refusal({403, ComputeError(403, "rateLimitExceeded", "Rate Limit Exceeded"), {}}),
            std::make_pair(GPUPROV_STATUS_TRANSIENT,
                           std::string("list zones: Compute Engine answered HTTP 403 "
                                       "rateLimitExceeded: Rate Limit Exceeded")));
  EXPECT_EQ(server.count() - before, policy.max_attempts) << "rate limits are retried";
  EXPECT_EQ(server.LastHeader("Authorization"), "Bearer ya29.t");
}

}  // namespace
}  // namespace gpuprov::gcp
