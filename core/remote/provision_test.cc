// Provision's steps against an in-memory cloud: a driver class built with the SDK, whose
// descriptor the driver host loads and opens as it would a driver file's
// (AppContext::in_memory_drivers, DriverHost::AddInMemory). The VM's SSH port is a closed
// loopback port, so a run stops at WaitForSsh: what these tests look at is what comes before
// (order, re-run, resume after a crash point) and what a failure after create leaves.
#include "provision.h"
#include "ttl.h"

#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cluster_nodes.h"
#include "crash_point.h"
#include "gpuprov/sdk.hpp"
#include "provision_report.h"
#include "test_support.h"

namespace gpuprov {
namespace {

using gpuprov::testing::ScopedTempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

/// The in-memory cloud: its VMs by name and every call made to it, in order.
struct MemoryWorld {
  struct Vm {
    std::string id;
    std::string state;
    std::string message{};  // with "preempted": the cloud's reason
  };
  std::map<std::string, Vm> vms;
  std::vector<std::string> calls;             // "check", "offers", "create NAME", "get NAME", ...
  std::vector<std::string> phase_at_create;   // the record's phase on disk when create was called
  std::function<std::string()> record_phase;  // reads it
  int next_id = 1;
  std::string boot_state = "running";  // what the VM turns to at its first get
  bool no_capacity = false;            // create fails with GPUPROV_STATUS_CAPACITY
  int ssh_port = 0;                    // a closed loopback port
  std::string public_ip = "127.0.0.1";  // what get and create report
  std::string offers = R"([{"instance_type":"mem-1","region":"r1","gpu_count":0,)"
                       R"("price_per_hour":0.1,"spot_price_per_hour":0.03}])";  // offers' list
};
MemoryWorld* g_world = nullptr;

std::string Field(const std::string& json, const std::string& key) {
  Poco::JSON::Object::Ptr o = Poco::JSON::Parser().parse(json).extract<Poco::JSON::Object::Ptr>();
  return o->has(key) && !o->isNull(key) ? o->getValue<std::string>(key) : "";
}

std::string VmJson(const std::string& name, const MemoryWorld::Vm& vm) {
  return R"({"id":")" + vm.id + R"(","name":")" + name + R"(","state":")" + vm.state +
         R"(","message":")" + vm.message + R"(","public_ip":")" + g_world->public_ip +
         R"(","ssh_port":)" +
         std::to_string(g_world->ssh_port) +
         R"(,"ssh_user":"root"})";
}

class MemoryDriver {
 public:
  static constexpr const char* kName = "memory";
  static constexpr const char* kVersion = "1.0.0";
  static constexpr const char* kDescription = "provision_test's in-memory cloud";
  static constexpr uint64_t kCapabilities = GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_SPOT;

  explicit MemoryDriver(const gpuprov::sdk::InitContext&) {}
  std::string Check(const std::string&) {
    g_world->calls.push_back("check");
    return R"({"account":"memory","user_data_limit":16384})";
  }
  std::string Offers(const std::string&) {
    g_world->calls.push_back("offers");
    return R"({"offers":)" + g_world->offers + "}";
  }
  std::string Create(const std::string& request) {
    const std::string name = Field(request, "name");
    g_world->calls.push_back("create " + name + (request.find(R"("spot":true)") != std::string::npos ? " spot" : ""));
    g_world->phase_at_create.push_back(g_world->record_phase());
    if (g_world->no_capacity) {
      throw gpuprov::sdk::DriverError(GPUPROV_STATUS_CAPACITY, "no capacity (memory)");
    }
    auto it = g_world->vms.find(name);
    const bool existing = it != g_world->vms.end();
    if (!existing) {
      it =
          g_world->vms.emplace(name, MemoryWorld::Vm{std::to_string(g_world->next_id++), "pending"})
              .first;
    }
    return R"({"vm":)" + VmJson(name, it->second) + R"(,"existing":)" +
           (existing ? "true" : "false") + "}";
  }
  std::string Get(const std::string& request) {
    const std::string name = Field(request, "name");
    g_world->calls.push_back("get " + name);
    auto it = g_world->vms.find(name);
    if (it == g_world->vms.end()) return R"({"vm":null})";
    if (it->second.state == "pending") it->second.state = g_world->boot_state;
    return R"({"vm":)" + VmJson(name, it->second) + "}";
  }
  std::string List(const std::string&) {
    g_world->calls.push_back("list");
    std::string out;
    for (const auto& [name, vm] : g_world->vms) out += (out.empty() ? "" : ",") + VmJson(name, vm);
    return R"({"vms":[)" + out + "]}";
  }
  std::string Delete(const std::string& request) {
    const std::string name = Field(request, "name");
    g_world->calls.push_back("delete " + name);
    const bool deleted = g_world->vms.erase(name) > 0;
    return std::string(R"({"deleted":)") + (deleted ? "true" : "false") + "}";
  }
};

/// A second cloud, cheaper, that never has capacity: the candidate loop tries it first.
class FullDriver {
 public:
  static constexpr const char* kName = "full";
  static constexpr const char* kVersion = "1.0.0";
  static constexpr const char* kDescription = "provision_test's cloud without capacity";
  static constexpr uint64_t kCapabilities = GPUPROV_CAP_VM_LIFECYCLE;

  explicit FullDriver(const gpuprov::sdk::InitContext&) {}
  std::string Check(const std::string&) { return R"({"account":"full"})"; }
  std::string Offers(const std::string&) {
    g_world->calls.push_back("full offers");
    return R"({"offers":[{"instance_type":"full-1","region":"f1","gpu_count":0,)"
           R"("price_per_hour":0.05}]})";
  }
  std::string Create(const std::string& request) {
    g_world->calls.push_back("full create " + Field(request, "name"));
    throw gpuprov::sdk::DriverError(GPUPROV_STATUS_CAPACITY, "no capacity (full)");
  }
  std::string Get(const std::string&) { return R"({"vm":null})"; }
  std::string List(const std::string&) { return R"({"vms":[]})"; }
  std::string Delete(const std::string& request) {
    g_world->calls.push_back("full delete " + Field(request, "name"));
    return R"({"deleted":false})";
  }
};

/// A cloud that makes clusters (GPUPROV_CAP_CLUSTER) of at most two nodes: --nodes is checked
/// against its capability and its check's max_cluster_nodes before anything is made.
class PairDriver {
 public:
  static constexpr const char* kName = "pair";
  static constexpr const char* kVersion = "1.0.0";
  static constexpr const char* kDescription = "provision_test's cloud of two-node clusters";
  static constexpr uint64_t kCapabilities =
      GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_HOSTS_KUBERNETES | GPUPROV_CAP_CLUSTER;

  explicit PairDriver(const gpuprov::sdk::InitContext&) {}
  std::string Check(const std::string&) {
    g_world->calls.push_back("pair check");
    return R"({"account":"pair","max_cluster_nodes":2})";
  }
  std::string Offers(const std::string&) {
    g_world->calls.push_back("pair offers");
    return R"({"offers":[]})";
  }
  std::string Create(const std::string& request) {
    g_world->calls.push_back("pair create " + Field(request, "name"));
    throw gpuprov::sdk::DriverError(GPUPROV_STATUS_CAPACITY, "no capacity (pair)");
  }
  std::string Get(const std::string&) { return R"({"vm":null})"; }
  std::string List(const std::string&) { return R"({"vms":[]})"; }
  std::string Delete(const std::string&) { return R"({"deleted":false})"; }
  std::string OpenPeerPorts(const std::string&) { return "{}"; }
};

/// The in-memory cloud with clusters (GPUPROV_CAP_CLUSTER, at most 4 nodes): its calls come from
/// one thread per node, so each takes the world's lock. capacity_fault_at makes the k-th create
/// of the run fail for lack of capacity.
std::mutex g_mesh_mutex;
class MeshDriver : public MemoryDriver {
 public:
  static constexpr const char* kName = "mesh";
  static constexpr const char* kDescription = "provision_test's in-memory cloud with clusters";
  static constexpr uint64_t kCapabilities =
      GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_HOSTS_KUBERNETES | GPUPROV_CAP_CLUSTER;
  static inline int creates = 0;
  static inline int capacity_fault_at = 0;

  explicit MeshDriver(const gpuprov::sdk::InitContext& c) : MemoryDriver(c) {}
  std::string Check(const std::string& r) {
    std::lock_guard<std::mutex> hold(g_mesh_mutex);
    MemoryDriver::Check(r);
    return R"({"account":"mesh","max_cluster_nodes":4})";
  }
  std::string Offers(const std::string& r) {
    std::lock_guard<std::mutex> hold(g_mesh_mutex);
    return MemoryDriver::Offers(r);
  }
  std::string Create(const std::string& r) {
    std::lock_guard<std::mutex> hold(g_mesh_mutex);
    if (++creates == capacity_fault_at) {
      g_world->calls.push_back("create " + Field(r, "name") + " (no capacity)");
      throw gpuprov::sdk::DriverError(GPUPROV_STATUS_CAPACITY, "no capacity (mesh)");
    }
    return MemoryDriver::Create(r);
  }
  std::string Get(const std::string& r) {
    std::lock_guard<std::mutex> hold(g_mesh_mutex);
    return MemoryDriver::Get(r);
  }
  std::string List(const std::string& r) {
    std::lock_guard<std::mutex> hold(g_mesh_mutex);
    return MemoryDriver::List(r);
  }
  std::string Delete(const std::string& r) {
    std::lock_guard<std::mutex> hold(g_mesh_mutex);
    return MemoryDriver::Delete(r);
  }
  std::string OpenPeerPorts(const std::string&) {
    std::lock_guard<std::mutex> hold(g_mesh_mutex);
    g_world->calls.push_back("open_peer_ports");
    return "{}";
  }
};

const gpuprov_type_driver_descriptor* MeshDescriptor() {
  return gpuprov::sdk::internal::Descriptor<MeshDriver, gpuprov::sdk::kNoConfigKeys, 0>();
}

const gpuprov_type_driver_descriptor* PairDescriptor() {
  return gpuprov::sdk::internal::Descriptor<PairDriver, gpuprov::sdk::kNoConfigKeys, 0>();
}

const gpuprov_type_driver_descriptor* MemoryDescriptor() {
  return gpuprov::sdk::internal::Descriptor<MemoryDriver, gpuprov::sdk::kNoConfigKeys, 0>();
}
const gpuprov_type_driver_descriptor* FullDescriptor() {
  return gpuprov::sdk::internal::Descriptor<FullDriver, gpuprov::sdk::kNoConfigKeys, 0>();
}

/// A port on 127.0.0.1 that nothing listens on: bound once to learn a free one, then closed.
int ClosedLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return 1;
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

class NoTerminal : public Prompter {
 public:
  bool CanAsk() const override { return false; }
  bool Confirm(const std::string&) override { return false; }
};

/// What a crash point throws in these tests: nothing catches it, so the run stops where the
/// SIGKILL of a real crash point would, with the files as the kill leaves them.
struct SimulatedKill {};
[[noreturn]] void ThrowSimulatedKill(const char*) { throw SimulatedKill{}; }

class ProvisionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_world = &world_;
    world_.ssh_port = ClosedLoopbackPort();
    world_.record_phase = [this] {
      std::optional<VmRecord> rec = StateStore(app_.paths).Load("demo");
      return rec ? rec->phase : std::string("none");
    };
    // SSH is given one second: the port is closed, so WaitForSsh fails fast.
    std::ofstream(home_.path() / "config.toml")
        << "[defaults.timeouts]\nssh_wait_seconds = 1\nboot_wait_seconds = 30\n";
    app_.prompter = std::make_shared<NoTerminal>();
    app_.in_memory_drivers = {MemoryDescriptor(), FullDescriptor(), PairDescriptor(),
                              MeshDescriptor()};
    MeshDriver::creates = 0;
    MeshDriver::capacity_fault_at = 0;
    flags_.name = "demo";
    flags_.cloud = "memory";
    flags_.kubernetes = false;
    flags_.yes = true;
  }
  void TearDown() override {
    DisarmCrashPoint();
    SetCrashAction(nullptr);
    g_world = nullptr;
  }

  std::optional<VmRecord> Record() const { return StateStore(app_.paths).Load("demo"); }
  /// One whole `gpuprov provision`; the Error it ends with (these VMs never answer SSH).
  std::string RunUntilError() {
    try {
      Provision(app_, flags_, no_spec_).Run();
    } catch (const Error& e) {
      return std::string(e.what()) + " | hint: " + e.hint();
    }
    ADD_FAILURE() << "the run ended without an error, yet nothing answers SSH";
    return "";
  }

  ScopedTempDir home_;
  AppContext app_{Paths::ForHome(home_.path()), "", false, OutputFormat::kText, nullptr};
  ProvisionFlags flags_;
  const std::optional<std::string> no_spec_;  // Provision keeps a reference to it
  MemoryWorld world_;
};

TEST_F(ProvisionTest, StepsRecordTheIntentBeforeCreateAndEachTransitionAfter) {
  Provision p(app_, flags_, no_spec_);
  p.ResolveInputs();
  EXPECT_FALSE(p.failover());
  p.LoadDriver();
  p.LockAndReadRecord();
  p.CheckAccountAndPlan();
  p.ChooseOfferAndKey();
  EXPECT_THAT(world_.calls, ElementsAre("check", "offers"));
  EXPECT_FALSE(Record()) << "nothing is recorded before the intent";

  p.RecordIntent();
  ASSERT_TRUE(Record());
  EXPECT_EQ(Record()->phase, "intent");
  EXPECT_EQ(Record()->instance_type, "mem-1");
  EXPECT_EQ(Record()->driver_file, "(in memory)");
  EXPECT_TRUE(Record()->vm_id.empty());
  EXPECT_TRUE(world_.vms.empty()) << "the intent comes before anything is made";

  p.CreateOrFind();
  EXPECT_THAT(world_.phase_at_create, ElementsAre("creating"));
  EXPECT_EQ(Record()->vm_id, "1");

  p.WaitForRunning();
  EXPECT_EQ(Record()->phase, "running");
  EXPECT_EQ(Record()->public_ip, "127.0.0.1");
  EXPECT_EQ(Record()->ssh_port, world_.ssh_port);
  EXPECT_THAT(world_.calls, ElementsAre("check", "offers", "create demo", "get demo"));
}

TEST_F(ProvisionTest, NodesOnACloudThatMakesNoClustersIsRefusedBeforeAnyCall) {
  flags_.nodes = 3;
  const std::string error = RunUntilError();
  EXPECT_THAT(error, HasSubstr("the memory driver cannot make multi-node clusters (--nodes 3 "
                               "from the command line)"));
  EXPECT_THAT(error, HasSubstr("nothing was created"));
  EXPECT_TRUE(world_.calls.empty());
  EXPECT_FALSE(Record().has_value());
}

TEST_F(ProvisionTest, NodesWithSeveralCandidatesIsRefusedBeforeAnyCall) {
  flags_.nodes = 2;
  flags_.cloud = "memory,pair";
  EXPECT_THAT(RunUntilError(), HasSubstr("share one cloud and region"));
  EXPECT_TRUE(world_.calls.empty());
  EXPECT_FALSE(Record().has_value());
}

TEST_F(ProvisionTest, NodesAboveTheDriversLimitIsRefusedAfterCheckBeforeAnythingIsMade) {
  flags_.nodes = 3;
  flags_.cloud = "pair";
  flags_.kubernetes = true;
  const std::string error = RunUntilError();
  EXPECT_THAT(error, HasSubstr("the pair driver makes at most 2 nodes per cluster"));
  EXPECT_THAT(world_.calls, ElementsAre("pair check"));
  EXPECT_FALSE(Record().has_value());
}

TEST_F(ProvisionTest, NodesZeroIsRefusedBeforeAnyCall) {
  flags_.nodes = 0;
  flags_.cloud = "pair";
  flags_.kubernetes = true;
  EXPECT_THAT(RunUntilError(), HasSubstr("a cluster has at least one node"));
  EXPECT_TRUE(world_.calls.empty());
}

/// Calls of \a world that create, sorted (the nodes' threads make them in any order).
std::vector<std::string> Creates(const MemoryWorld& world) {
  std::vector<std::string> out;
  for (const auto& c : world.calls) {
    if (c.rfind("create ", 0) == 0) out.push_back(c);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST_F(ProvisionTest, NodesMakesTheServerAndItsAgentsEachWithItsOwnRecord) {
  flags_.nodes = 3;
  flags_.cloud = "mesh";
  flags_.kubernetes = true;
  const int status = Provision(app_, flags_, no_spec_).Run();
  EXPECT_EQ(status, 1);  // nothing answers SSH here: no node gets into the cluster
  EXPECT_THAT(Creates(world_),
              ElementsAre("create demo", "create demo-agent-1", "create demo-agent-2"));
  // The peers are let in once every node's create is done, with one call for the cluster.
  EXPECT_EQ(std::count(world_.calls.begin(), world_.calls.end(), "open_peer_ports"), 1);
  const StateStore store(app_.paths);
  const std::optional<VmRecord> server = store.Load("demo");
  ASSERT_TRUE(server.has_value());
  EXPECT_EQ(server->cluster, "demo");
  EXPECT_EQ(server->role, "server");
  EXPECT_EQ(server->cluster_nodes, 3);
  for (int k : {1, 2}) {
    const std::optional<VmRecord> agent = store.Load("demo-agent-" + std::to_string(k));
    ASSERT_TRUE(agent.has_value());
    EXPECT_EQ(agent->cluster, "demo");
    EXPECT_EQ(agent->role, "agent");
    EXPECT_EQ(agent->node_index, k);
    EXPECT_FALSE(agent->vm_id.empty());
  }
}

TEST_F(ProvisionTest, NodesCapacityOnTheThirdNodeKeepsTheOthersAndARerunMakesOnlyWhatIsMissing) {
  flags_.nodes = 3;
  flags_.cloud = "mesh";
  flags_.kubernetes = true;
  MeshDriver::capacity_fault_at = 3;
  EXPECT_EQ(Provision(app_, flags_, no_spec_).Run(), 1);
  const StateStore store(app_.paths);
  int records = 0;
  for (const char* name : {"demo", "demo-agent-1", "demo-agent-2"}) records += store.Load(name) ? 1 : 0;
  EXPECT_EQ(records, 2);  // the node without capacity leaves no record
  EXPECT_EQ(world_.vms.size(), 2u);
  world_.calls.clear();
  MeshDriver::capacity_fault_at = 0;
  EXPECT_EQ(Provision(app_, flags_, no_spec_).Run(), 1);
  EXPECT_EQ(world_.vms.size(), 3u);  // only the missing one was made
  EXPECT_EQ(Creates(world_).size(), 3u);  // create finds the two of the first run by name
}

TEST_F(ProvisionTest, ARerunFindsTheVmOfTheFirstAndMakesNoSecond) {
  RunUntilError();
  ASSERT_TRUE(Record());
  const std::string first_id = Record()->vm_id;
  RunUntilError();
  EXPECT_EQ(world_.vms.size(), 1u);
  EXPECT_EQ(Record()->vm_id, first_id);
  // The second create was asked with the same name and answered with the VM of the first.
  EXPECT_EQ(std::count(world_.calls.begin(), world_.calls.end(), "create demo"), 2);
  EXPECT_THAT(world_.phase_at_create, ElementsAre("creating", "creating"));
  EXPECT_EQ(std::count(world_.calls.begin(), world_.calls.end(), "delete demo"), 0);
}

TEST_F(ProvisionTest, ARerunAfterAnAddressChangeRecordsTheNewAddressAndSaysSo) {
  RunUntilError();
  ASSERT_TRUE(Record());
  EXPECT_EQ(Record()->public_ip, "127.0.0.1");
  // Stopped and started on a cloud without a static address: the driver's get says where now.
  world_.public_ip = "127.0.0.2";
  ::testing::internal::CaptureStderr();
  const std::string error = RunUntilError();
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(Record()->public_ip, "127.0.0.2");
  EXPECT_THAT(said, HasSubstr("the address of demo changed from 127.0.0.1 to 127.0.0.2 "
                              "(stopped and started on a cloud without a static address): "
                              "the record and SSH follow"));
  EXPECT_THAT(error, HasSubstr("127.0.0.2"));
  ::testing::internal::CaptureStderr();
  RunUntilError();
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), ::testing::Not(HasSubstr("changed from")));
}

/// One row per provision crash point before SSH: the phase the kill leaves on disk, and
/// whether the VM exists by then.
struct CrashCase {
  const char* point;
  const char* phase_left;
  bool vm_made;
};

void PrintTo(const CrashCase& c, std::ostream* os) { *os << c.point; }

class ProvisionCrashTest : public ProvisionTest, public ::testing::WithParamInterface<CrashCase> {};

TEST_P(ProvisionCrashTest, ARerunAfterTheKillContinuesWithOneVm) {
  const CrashCase c = GetParam();
  ArmCrashPoint(c.point);
  SetCrashAction(&ThrowSimulatedKill);
  EXPECT_THROW(Provision(app_, flags_, no_spec_).Run(), SimulatedKill);
  ASSERT_TRUE(Record());
  EXPECT_EQ(Record()->phase, c.phase_left);
  EXPECT_EQ(world_.vms.size(), c.vm_made ? 1u : 0u);

  DisarmCrashPoint();
  const std::string error = RunUntilError();
  EXPECT_THAT(error, HasSubstr("SSH"));
  ASSERT_EQ(world_.vms.size(), 1u);
  EXPECT_EQ(Record()->vm_id, world_.vms.at("demo").id);
  EXPECT_EQ(Record()->phase, "failed");
  // The re-run took the record of the killed run and created (or found) the VM by its name.
  EXPECT_EQ(world_.phase_at_create.back(), "creating");
  EXPECT_EQ(std::count(world_.calls.begin(), world_.calls.end(), "delete demo"), 0);
}

INSTANTIATE_TEST_SUITE_P(Points, ProvisionCrashTest,
                         ::testing::Values(CrashCase{"intent-recorded", "intent", false},
                                           CrashCase{"vm-created", "creating", true},
                                           CrashCase{"vm-running", "running", true}),
                         [](const ::testing::TestParamInfo<CrashCase>& info) {
                           std::string name = info.param.point;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST_F(ProvisionTest, AFailureAfterCreateKeepsTheVmAndRecordsWhy) {
  const std::string error = RunUntilError();
  EXPECT_THAT(error, HasSubstr("did not become reachable"));
  EXPECT_THAT(error, HasSubstr("reuses the VM"));
  ASSERT_TRUE(Record());
  EXPECT_EQ(Record()->phase, "failed");
  EXPECT_THAT(Record()->last_error, HasSubstr("SSH"));
  EXPECT_EQ(world_.vms.count("demo"), 1u);
  EXPECT_EQ(std::count(world_.calls.begin(), world_.calls.end(), "delete demo"), 0);
}

TEST_F(ProvisionTest, AVmThatFailsToBootIsKeptWithItsState) {
  world_.boot_state = "error";
  const std::string error = RunUntilError();
  EXPECT_THAT(error, HasSubstr("went to state 'error'"));
  EXPECT_THAT(error, HasSubstr("gpuprov down demo"));
  ASSERT_TRUE(Record());
  EXPECT_EQ(Record()->phase, "failed");
  EXPECT_EQ(world_.vms.count("demo"), 1u);
  EXPECT_EQ(std::count(world_.calls.begin(), world_.calls.end(), "delete demo"), 0);
}

TEST_F(ProvisionTest, ACreateThatFailsWithNoVmOnTheCloudLeavesNoRecord) {
  world_.no_capacity = true;
  const std::string error = RunUntilError();
  EXPECT_THAT(error, HasSubstr("no capacity"));
  EXPECT_FALSE(Record());
  EXPECT_TRUE(world_.vms.empty());
}

TEST_F(ProvisionTest, TheCandidateLoopCleansUpACloudWithoutCapacityAndTakesTheNext) {
  flags_.cloud = "full,memory";
  const std::string error = RunUntilError();
  EXPECT_THAT(error, HasSubstr("did not become reachable"));
  // The cheaper cloud first: its create failed for capacity and was cleaned up; then memory.
  EXPECT_THAT(world_.calls,
              ::testing::IsSupersetOf({"full create demo", "full delete demo", "create demo"}));
  const auto at = [&](const std::string& call) {
    return std::find(world_.calls.begin(), world_.calls.end(), call) - world_.calls.begin();
  };
  EXPECT_LT(at("full create demo"), at("full delete demo"));
  EXPECT_LT(at("full delete demo"), at("create demo"));
  ASSERT_TRUE(Record());
  EXPECT_EQ(Record()->cloud, "memory");
  EXPECT_EQ(Record()->phase, "failed");
  EXPECT_EQ(world_.vms.size(), 1u);
}

TEST_F(ProvisionTest, SpotOnACloudWhoseDriverSellsNoneIsRefusedBeforeAnythingIsMade) {
  flags_.cloud = "full";
  flags_.spot = true;
  try {
    Provision(app_, flags_, no_spec_).Run();
    ADD_FAILURE() << "--spot on a driver without GPUPROV_CAP_SPOT ran";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_THAT(e.what(), HasSubstr("the full driver does not make spot VMs (--spot from the "
                                    "command line)"));
    // The in-memory spot driver among them (the build's driver files may add theirs).
    EXPECT_THAT(e.hint(),
                ::testing::ContainsRegex("clouds whose driver makes spot VMs: [a-z, ]*memory"));
    EXPECT_THAT(e.hint(), HasSubstr("nothing was created"));
  }
  EXPECT_TRUE(world_.calls.empty()) << "not even check is asked";
  EXPECT_FALSE(Record());
}

TEST_F(ProvisionTest, SpotAsksTheDriverForASpotVmAndRecordsTheSpotPrice) {
  flags_.spot = true;
  ::testing::internal::CaptureStderr();
  RunUntilError();
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(said, HasSubstr("offer: mem-1 in r1 at $0.03/h spot (on demand $0.10/h)"));
  EXPECT_THAT(world_.calls, ::testing::Contains("create demo spot"));
  ASSERT_TRUE(Record());
  EXPECT_TRUE(Record()->spot);
  EXPECT_DOUBLE_EQ(Record()->price_per_hour, 0.03);
}

// One cloud chooses by RankCandidates' rules, as `--cloud any` and `gpuprov offers --spot` do:
// an offer the cloud sells on demand only is not a spot offer at price 0.
TEST_F(ProvisionTest, SpotChoosesAmongOffersWithASpotPriceOnly) {
  world_.offers = R"([{"instance_type":"mem-0","region":"r1","price_per_hour":0.05},)"
                  R"({"instance_type":"mem-1","region":"r2","price_per_hour":0.1,)"
                  R"("spot_price_per_hour":0.03}])";
  flags_.spot = true;
  ::testing::internal::CaptureStderr();
  RunUntilError();
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(said, HasSubstr("offer: mem-1 in r2 at $0.03/h spot (on demand $0.10/h)"));
  EXPECT_THAT(world_.calls, ::testing::Contains("create demo spot"));
}

TEST_F(ProvisionTest, SpotWhereNoOfferHasASpotPriceIsRefusedBeforeCreate) {
  world_.offers = R"([{"instance_type":"mem-0","region":"r1","price_per_hour":0.05}])";
  flags_.spot = true;
  const std::string error = RunUntilError();
  EXPECT_THAT(error, HasSubstr("the memory cloud offers no GPU on demand only, not as a spot VM "
                               "(spot --spot from the command line)"));
  EXPECT_THAT(error, HasSubstr("gpuprov offers --spot"));
  EXPECT_THAT(world_.calls, ElementsAre("check", "offers"));
  EXPECT_FALSE(Record());
}

TEST_F(ProvisionTest, AnOfferWithAKnownPriceComesBeforeOneWithoutOnDemandToo) {
  world_.offers = R"([{"instance_type":"mem-0","region":"r1"},)"
                  R"({"instance_type":"mem-1","region":"r1","price_per_hour":0.1}])";
  ::testing::internal::CaptureStderr();
  RunUntilError();
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), HasSubstr("offer: mem-1 in r1 at $0.10/h"));
}

TEST_F(ProvisionTest, ARerunOnAPreemptedVmReplacesItWithOneOfTheSameNameAndSpec) {
  flags_.spot = true;
  RunUntilError();
  ASSERT_TRUE(Record());
  const std::string first_id = Record()->vm_id;
  world_.vms.at("demo").state = "preempted";
  world_.vms.at("demo").message = "Server.SpotInstanceTermination: Spot instance termination";
  world_.calls.clear();
  flags_.spot.reset();  // a plain re-run: the record says spot
  ::testing::internal::CaptureStderr();
  RunUntilError();
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(said, HasSubstr("VM demo was preempted by memory (Server.SpotInstanceTermination: "
                              "Spot instance termination): replacing it with a new one of the "
                              "same name and spec"));
  const auto at = [&](const std::string& call) {
    return std::find(world_.calls.begin(), world_.calls.end(), call) - world_.calls.begin();
  };
  EXPECT_LT(at("delete demo"), at("create demo spot"));
  EXPECT_LT(at("create demo spot"), static_cast<long>(world_.calls.size()));
  ASSERT_EQ(world_.vms.size(), 1u);
  EXPECT_NE(Record()->vm_id, first_id);
  EXPECT_EQ(Record()->vm_id, world_.vms.at("demo").id);
  EXPECT_TRUE(Record()->spot);
  EXPECT_EQ(Record()->extra.at("replaced_preempted"),
            "Server.SpotInstanceTermination: Spot instance termination");
}

TEST_F(ProvisionTest, AKillAfterThePreemptedVmWasDeletedLeavesARecordARerunCompletes) {
  flags_.spot = true;
  RunUntilError();
  world_.vms.at("demo").state = "preempted";
  ArmCrashPoint("preempted-vm-deleted");
  SetCrashAction(&ThrowSimulatedKill);
  EXPECT_THROW(Provision(app_, flags_, no_spec_).Run(), SimulatedKill);
  EXPECT_TRUE(world_.vms.empty());
  ASSERT_TRUE(Record());
  EXPECT_TRUE(Record()->vm_id.empty());
  EXPECT_EQ(Record()->phase, "intent");
  DisarmCrashPoint();
  flags_.spot.reset();
  RunUntilError();
  ASSERT_EQ(world_.vms.size(), 1u);
  EXPECT_EQ(Record()->vm_id, world_.vms.at("demo").id);
  EXPECT_TRUE(Record()->spot);
}

TEST_F(ProvisionTest, TheReplacementOfAPreemptedVmKeepsItsTtlDeadline) {
  flags_.spot = true;
  flags_.ttl_seconds = 3600;
  RunUntilError();
  const std::string deadline = Record()->ttl_deadline;
  ASSERT_FALSE(deadline.empty());
  world_.vms.at("demo").state = "preempted";
  flags_.ttl_seconds.reset();
  RunUntilError();
  EXPECT_EQ(world_.vms.size(), 1u);
  EXPECT_NE(Record()->vm_id, "1");
  EXPECT_EQ(Record()->ttl_deadline, deadline) << "the TTL covers the spot VM as any other";
}

// Past its deadline a spot VM that is off powered itself off at its TTL, whatever the cloud calls
// it (Nebius reports a TTL power-off of a preemptible VM as it reports a preemption): a re-run
// does not bring back what the TTL ended.
TEST_F(ProvisionTest, APreemptedVmPastItsTtlDeadlineIsNotReplaced) {
  flags_.spot = true;
  flags_.ttl_seconds = 3600;
  RunUntilError();
  VmRecord rec = *Record();
  rec.ttl_deadline = "2026-01-01T00:00:00Z";
  StateStore(app_.paths).Save(rec);
  world_.vms.at("demo").state = "preempted";
  flags_.ttl_seconds.reset();
  EXPECT_THAT(RunUntilError(), HasSubstr("VM demo is off: its TTL passed at 2026-01-01T00:00:00Z"));
  EXPECT_EQ(Record()->vm_id, "1");
  EXPECT_EQ(std::count(world_.calls.begin(), world_.calls.end(), "delete demo"), 0);
}

TEST(StateWithTtl, PreemptedPastTheDeadlineIsStopped) {
  VmRecord rec;
  const auto now = std::chrono::system_clock::now();
  EXPECT_EQ(StateWithTtl(rec, "preempted", now), "preempted") << "no TTL";
  rec.ttl_deadline = "2026-01-01T00:00:00Z";
  EXPECT_EQ(StateWithTtl(rec, "preempted", now), "stopped");
  EXPECT_EQ(StateWithTtl(rec, "running", now), "running");
  rec.ttl_deadline = "2099-01-01T00:00:00Z";
  EXPECT_EQ(StateWithTtl(rec, "preempted", now), "preempted") << "before the deadline";
}

TEST_F(ProvisionTest, ARerunOnARunningSpotVmReusesIt) {
  flags_.spot = true;
  RunUntilError();
  const std::string first_id = Record()->vm_id;
  RunUntilError();
  EXPECT_EQ(Record()->vm_id, first_id);
  EXPECT_EQ(std::count(world_.calls.begin(), world_.calls.end(), "delete demo"), 0);
}

TEST(ProvisionReport, ReadySummarySaysWhereTheVmIsAndHowToReachIt) {
  ProvisionOutcome o;
  o.record.name = "demo";
  o.record.cloud = "memory";
  o.record.public_ip = "203.0.113.7";
  o.record.ssh_port = 2222;
  o.record.ssh_user = "ubuntu";
  const std::string text = ReadySummary(o);
  EXPECT_THAT(text, HasSubstr("VM demo is ready on memory at 203.0.113.7 (ssh port 2222, user "
                              "ubuntu)."));
  EXPECT_THAT(text, HasSubstr("gpuprov ssh demo -- uname -a"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("kubeconfig")));
  o.k8s.enabled = true;
  o.record.kubeconfig = "/k/demo.yaml";
  o.record.access_mode = "tunnel";
  o.record.route = "boot";
  o.record.phase_seconds = {{"create", 1.0}, {"ssh", 2.3}};
  EXPECT_THAT(ReadySummary(o), HasSubstr("kubeconfig: /k/demo.yaml"));
  EXPECT_THAT(ReadySummary(o), HasSubstr("gpuprov tunnel demo"));
  EXPECT_EQ(PhaseTimes(o.record.phase_seconds), "create 1.0 s, ssh 2.3 s");
  // The CUDA check is the last phase.
  o.record.phase_seconds["cuda"] = 4.25;
  o.record.phase_seconds["access"] = 0.5;
  EXPECT_EQ(PhaseTimes(o.record.phase_seconds), "create 1.0 s, ssh 2.3 s, access 0.5 s, cuda 4.2 s");
}

}  // namespace
}  // namespace gpuprov
