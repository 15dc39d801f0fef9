#include "gc_command.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "test_support.h"

namespace gpuprov {
namespace {

using gpuprov::testing::ScopedTempDir;

// ---- a fake cloud behind a real ABI 1.2 function table ----

/// One thing on the fake cloud. Only tagged ones are listed, as a driver lists only what
/// carries gpuprov's marks.
struct FakeResource {
  std::string kind;
  std::string id;
  std::vector<std::string> vm_names;
  bool tagged = true;
  std::string cluster{};  // a cluster's resource: its cluster; a node's VM: its role too
  std::string role{};
};

struct FakeCloud {
  std::vector<FakeResource> resources;
  std::vector<std::string> delete_calls;  // "kind/id"
  std::string result;
  std::string error;
};
FakeCloud* g_cloud = nullptr;

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

gpuprov_type_status ListResources(gpuprov_type_driver*, gpuprov_type_json,
                                  gpuprov_type_json* out) {
  std::string json = R"({"resources":[)";
  bool first = true;
  for (const auto& r : g_cloud->resources) {
    if (!r.tagged) continue;
    json += first ? "" : ",";
    first = false;
    json += R"({"kind":)" + Quote(r.kind) + R"(,"id":)" + Quote(r.id) + R"(,"name":)" +
            Quote("gpuprov-" + r.id) + R"(,"created_at":"2026-01-01T00:00:00Z","vm_names":[)";
    for (size_t i = 0; i < r.vm_names.size(); ++i) {
      json += (i ? "," : "") + Quote(r.vm_names[i]);
    }
    json += "]";
    if (r.kind == "vm") json += R"(,"price_per_hour":0.5)";
    if (!r.cluster.empty()) json += R"(,"cluster":)" + Quote(r.cluster);
    if (!r.role.empty()) json += R"(,"role":)" + Quote(r.role);
    json += "}";
  }
  json += "]}";
  g_cloud->result = json;
  *out = gpuprov_type_json{g_cloud->result.data(), g_cloud->result.size()};
  return GPUPROV_STATUS_OK;
}

/// Deletes by kind and id, and refuses an untagged resource as a driver must.
gpuprov_type_status DeleteResource(gpuprov_type_driver*, gpuprov_type_json request,
                                   gpuprov_type_json* out) {
  const std::string req(request.data, request.len);
  for (auto it = g_cloud->resources.begin(); it != g_cloud->resources.end(); ++it) {
    if (req.find(R"("kind":)" + Quote(it->kind)) == std::string::npos ||
        req.find(R"("id":)" + Quote(it->id)) == std::string::npos) {
      continue;
    }
    g_cloud->delete_calls.push_back(it->kind + "/" + it->id);
    if (!it->tagged) {
      g_cloud->error = "not gpuprov's";
      return GPUPROV_STATUS_INVALID_INPUT;
    }
    g_cloud->resources.erase(it);
    g_cloud->result = R"({"deleted":true})";
    *out = gpuprov_type_json{g_cloud->result.data(), g_cloud->result.size()};
    return GPUPROV_STATUS_OK;
  }
  g_cloud->delete_calls.push_back("missing:" + req);
  g_cloud->error = "no such resource";
  return GPUPROV_STATUS_NOT_FOUND;
}

gpuprov_type_status Empty(gpuprov_type_driver*, gpuprov_type_json, gpuprov_type_json* out) {
  *out = gpuprov_type_json{"{}", 2};
  return GPUPROV_STATUS_OK;
}
gpuprov_type_driver* Init(const gpuprov_type_init_input*, gpuprov_type_status* st) {
  static char handle;
  *st = GPUPROV_STATUS_OK;
  return reinterpret_cast<gpuprov_type_driver*>(&handle);
}
void Destroy(gpuprov_type_driver*) {}
const char* LastError(gpuprov_type_driver*) { return g_cloud->error.c_str(); }

const gpuprov_drv_vtable kVtable = {sizeof(gpuprov_drv_vtable), Init, Destroy, LastError,
                                    Empty, Empty, Empty, Empty, Empty, Empty, nullptr,
                                    ListResources, DeleteResource, nullptr};
const gpuprov_type_driver_descriptor kDescriptor = {
    sizeof(gpuprov_type_driver_descriptor), GPUPROV_DRIVER_MAGIC, 1, 2, "fakecloud", "1.0",
    "fake", GPUPROV_CAP_VM_LIFECYCLE, &kVtable, nullptr, 0, nullptr};

class GcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_cloud = &cloud_;
    cloud_ = FakeCloud{};
  }
  void TearDown() override { g_cloud = nullptr; }

  Cloud OpenCloud() { return Cloud(DriverHost::OpenDescriptor(&kDescriptor, "{}", {})); }
  void Record(const std::string& name, const std::string& cloud = "fakecloud",
              const std::string& cluster = "", const std::string& role = "") {
    VmRecord r;
    r.name = name;
    r.cloud = cloud;
    r.phase = "ready";
    r.cluster = cluster;
    r.role = role;
    store_.Save(r);
  }
  std::vector<std::string> Left() const {
    std::vector<std::string> out;
    for (const auto& r : cloud_.resources) out.push_back(r.kind + "/" + r.id);
    return out;
  }
  static std::vector<std::string> Ids(const GcCloudReport& report) {
    std::vector<std::string> out;
    for (const auto& o : report.orphans) out.push_back(o.resource.kind + "/" + o.resource.id);
    return out;
  }

  FakeCloud cloud_;
  ScopedTempDir home_{"gpuprov-gc-test"};
  StateStore store_{Paths::ForHome(home_.path())};
};

TEST_F(GcTest, AnOrphanIsTaggedAndClaimedByNoRecordOfThisCloud) {
  cloud_.resources = {
      {"vm", "1", {"recorded"}},
      {"firewall", "2", {"recorded"}},
      {"vm", "3", {"lost"}},
      {"firewall", "4", {"lost"}},
      {"vm", "5", {"elsewhere"}},     // its record is of another cloud
      {"ssh_key", "6", {"recorded", "lost"}},  // shared: one user still recorded
      {"ssh_key", "7", {}},           // shared, used by none
      {"vm", "8", {"lost"}, false},   // untagged: never listed
  };
  Record("recorded");
  Record("elsewhere", "othercloud");
  Cloud cloud = OpenCloud();
  GcCloudReport report = ListOrphans(cloud, store_);
  EXPECT_EQ(Ids(report),
            (std::vector<std::string>{"vm/3", "firewall/4", "vm/5", "ssh_key/7"}));
  EXPECT_EQ(report.kept, 3u);
  ASSERT_TRUE(report.orphans[0].resource.price_per_hour.has_value());
  EXPECT_DOUBLE_EQ(*report.orphans[0].resource.price_per_hour, 0.5);
  EXPECT_FALSE(report.orphans[1].resource.price_per_hour.has_value());
  EXPECT_EQ(report.orphans[0].resource.created_at, "2026-01-01T00:00:00Z");
  EXPECT_TRUE(cloud_.delete_calls.empty()) << "listing deletes nothing";
}

TEST_F(GcTest, DeleteRemovesExactlyTheOrphansAndNeverARecordedOrUntaggedOne) {
  cloud_.resources = {
      {"vm", "1", {"recorded"}},
      {"vm", "3", {"lost"}},
      {"firewall", "4", {"lost"}},
      {"vm", "8", {"lost"}, false},
  };
  Record("recorded");
  Cloud cloud = OpenCloud();
  GcCloudReport report = ListOrphans(cloud, store_);
  DeleteOrphans(cloud, store_, report);
  EXPECT_EQ(cloud_.delete_calls, (std::vector<std::string>{"vm/3", "firewall/4"}));
  EXPECT_EQ(Left(), (std::vector<std::string>{"vm/1", "vm/8"}));
  for (const auto& o : report.orphans) {
    EXPECT_TRUE(o.deleted) << o.resource.id;
    EXPECT_TRUE(o.error.empty()) << o.error;
  }
}

TEST_F(GcTest, ARecordWrittenAfterTheListingKeepsItsResources) {
  cloud_.resources = {{"vm", "3", {"racing"}}, {"vm", "4", {"lost"}}};
  Cloud cloud = OpenCloud();
  GcCloudReport report = ListOrphans(cloud, store_);
  ASSERT_EQ(report.orphans.size(), 2u);
  Record("racing");  // a provision of that name started meanwhile
  DeleteOrphans(cloud, store_, report);
  EXPECT_EQ(cloud_.delete_calls, (std::vector<std::string>{"vm/4"}));
  EXPECT_TRUE(report.orphans[0].claimed_meanwhile);
  EXPECT_FALSE(report.orphans[0].deleted);
  EXPECT_EQ(Left(), (std::vector<std::string>{"vm/3"}));
}

TEST_F(GcTest, AVmNameLockedByARunningGpuprovIsLeftAlone) {
  cloud_.resources = {{"vm", "3", {"busy"}}};
  Cloud cloud = OpenCloud();
  GcCloudReport report = ListOrphans(cloud, store_);
  FileLock held = store_.LockVm("busy", 0);
  DeleteOrphans(cloud, store_, report);
  EXPECT_TRUE(cloud_.delete_calls.empty());
  EXPECT_TRUE(report.orphans[0].claimed_meanwhile);
}

TEST_F(GcTest, AnUnreadableRecordKeepsItsResources) {
  cloud_.resources = {{"vm", "3", {"corrupt"}}, {"vm", "4", {"Not A Name!"}}};
  std::filesystem::create_directories(store_.RecordPath("corrupt").parent_path());
  std::ofstream(store_.RecordPath("corrupt")) << "{not json";
  Cloud cloud = OpenCloud();
  GcCloudReport report = ListOrphans(cloud, store_);
  // gc cannot tell whose a corrupt record is, so it keeps that VM's resources; a name no
  // record can have is an orphan.
  EXPECT_EQ(Ids(report), (std::vector<std::string>{"vm/4"}));
}

// Issue 33: gc knows agent VMs by their tags. An agent whose record is lost is an orphan like
// any VM; an agent whose cluster's server has no record is one too, its own record or not, and
// so is that cluster's network; the agents of a recorded server are kept, and so is a plain VM
// named like an agent.
TEST_F(GcTest, AnAgentVmWhoseRecordOrWhoseServerIsGoneIsAnOrphan) {
  cloud_.resources = {
      {"vm", "1", {"train"}, true, "train", "server"},
      {"vm", "2", {"train-agent-1"}, true, "train", "agent"},
      {"vm", "3", {"train-agent-2"}, true, "train", "agent"},
      {"vm", "4", {"gone-agent-1"}, true, "gone", "agent"},
      {"vm", "5", {"gone-agent-2"}, true, "gone", "agent"},
      {"vm", "7", {"gone"}, true, "gone", "server"},
      {"vm", "6", {"plain-agent-1"}},
      // An agent's own firewall carries no cluster: its record says whose it is.
      {"firewall", "fw-gone-agent-1", {"gone-agent-1"}},
      {"firewall", "fw-train-agent-1", {"train-agent-1"}},
      {"cluster_network", "vpc-gone", {"gone", "gone-agent-1", "gone-agent-2"}, true, "gone", ""},
      {"cluster_network", "vpc-train", {"train", "train-agent-1", "train-agent-2"}, true, "train", ""},
  };
  Record("train", "fakecloud", "train", "server");
  Record("train-agent-1", "fakecloud", "train", "agent");  // train-agent-2's record is lost
  Record("gone-agent-1", "fakecloud", "gone", "agent");    // its server "gone" has no record
  Record("plain-agent-1");
  Cloud cloud = OpenCloud();
  GcCloudReport report = ListOrphans(cloud, store_);
  EXPECT_EQ(Ids(report), (std::vector<std::string>{"vm/3", "vm/4", "vm/5", "vm/7",
                                                   "firewall/fw-gone-agent-1",
                                                   "cluster_network/vpc-gone"}));
  EXPECT_EQ(report.orphans[1].resource.cluster, "gone");
  EXPECT_EQ(report.orphans[1].resource.role, "agent");
  DeleteOrphans(cloud, store_, report);
  for (const auto& o : report.orphans) EXPECT_FALSE(o.claimed_meanwhile) << o.resource.id;
  EXPECT_EQ(Left(), (std::vector<std::string>{"vm/1", "vm/2", "vm/6", "firewall/fw-train-agent-1",
                                              "cluster_network/vpc-train"}));
  for (const auto& o : report.orphans) EXPECT_TRUE(o.deleted) << o.resource.id << o.error;
}

TEST_F(GcTest, AnAgentIsKeptWhileAProvisionOfItsClusterHoldsTheServersLock) {
  cloud_.resources = {{"vm", "4", {"gone-agent-1"}, true, "gone", "agent"}};
  Record("gone-agent-1", "fakecloud", "gone", "agent");
  Cloud cloud = OpenCloud();
  GcCloudReport report = ListOrphans(cloud, store_);
  ASSERT_EQ(report.orphans.size(), 1u);
  FileLock held = store_.LockVm("gone", 1000);  // `provision --name gone --nodes 2` running
  DeleteOrphans(cloud, store_, report);
  EXPECT_TRUE(report.orphans[0].claimed_meanwhile);
  EXPECT_TRUE(cloud_.delete_calls.empty());
}

TEST_F(GcTest, AResourceGoneBeforeItsDeleteIsNoFailure) {
  cloud_.resources = {{"vm", "3", {"lost"}}};
  Cloud cloud = OpenCloud();
  GcCloudReport report = ListOrphans(cloud, store_);
  cloud_.resources.clear();
  DeleteOrphans(cloud, store_, report);
  EXPECT_FALSE(report.orphans[0].deleted);
  EXPECT_TRUE(report.orphans[0].error.empty()) << report.orphans[0].error;
}

TEST_F(GcTest, ADriverThatRefusesADeleteIsReportedNotHidden) {
  cloud_.resources = {{"vm", "3", {"lost"}}};
  Cloud cloud = OpenCloud();
  GcCloudReport report = ListOrphans(cloud, store_);
  cloud_.resources[0].tagged = false;  // its tag was removed since the listing
  DeleteOrphans(cloud, store_, report);
  EXPECT_FALSE(report.orphans[0].deleted);
  EXPECT_NE(report.orphans[0].error.find("not gpuprov's"), std::string::npos);
  EXPECT_EQ(Left(), (std::vector<std::string>{"vm/3"}));
}

TEST(GcDriverTable, OneOfTheTwoFunctionsAloneIsRefused) {
  gpuprov_drv_vtable vt = kVtable;
  vt.delete_resource = nullptr;
  gpuprov_type_driver_descriptor d = kDescriptor;
  d.vtable = &vt;
  DriverInfo info;
  gpuprov_drv_vtable copy{};
  EXPECT_EQ(ValidateDescriptor(&d, &info, &copy), nullptr);
  EXPECT_NE(info.problem.find("delete_resource"), std::string::npos) << info.problem;
}

TEST(GcDriverTable, ATableEndingBeforeTheNewFunctionsCannotListResources) {
  // A 1.1 driver's table: struct_size stops at open_ports; what lies beyond is not read.
  gpuprov_drv_vtable vt = kVtable;
  vt.struct_size = offsetof(gpuprov_drv_vtable, list_resources);
  gpuprov_type_driver_descriptor d = kDescriptor;
  d.abi_minor_required = 1;
  d.vtable = &vt;
  DriverInfo info;
  gpuprov_drv_vtable copy{};
  ASSERT_NE(ValidateDescriptor(&d, &info, &copy), nullptr) << info.problem;
  EXPECT_FALSE(info.lists_resources);
  EXPECT_EQ(copy.list_resources, nullptr);
  EXPECT_EQ(copy.delete_resource, nullptr);
}

}  // namespace
}  // namespace gpuprov
