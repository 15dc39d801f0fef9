#include "driver_host.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "cloud.h"

namespace fs = std::filesystem;
using gpuprov::DriverCallError;
using gpuprov::DriverHost;
using gpuprov::DriverInfo;
using gpuprov::DriverOp;

namespace {

// ---- descriptor rules, in memory (no .so) ----

gpuprov_type_status Op(gpuprov_type_driver*, gpuprov_type_json, gpuprov_type_json* out) {
  static const char kEmpty[] = "{}";
  *out = gpuprov_type_json{kEmpty, 2};
  return GPUPROV_STATUS_OK;
}
gpuprov_type_driver* Init(const gpuprov_type_init_input*, gpuprov_type_status* st) {
  static char handle;
  *st = GPUPROV_STATUS_OK;
  return reinterpret_cast<gpuprov_type_driver*>(&handle);
}
void Destroy(gpuprov_type_driver*) {}
const char* LastError(gpuprov_type_driver*) { return ""; }

gpuprov_drv_vtable FullVtable() {
  return gpuprov_drv_vtable{sizeof(gpuprov_drv_vtable), Init, Destroy, LastError, Op, Op, Op,
                            Op, Op, Op, Op, Op, Op, Op};
}

struct DescriptorCase {
  const char* test_name;
  void (*mutate)(gpuprov_type_driver_descriptor*, gpuprov_drv_vtable*);
  const char* expected_problem;  // "" = accepted
};

class ValidateDescriptorTest : public ::testing::TestWithParam<DescriptorCase> {};

TEST_P(ValidateDescriptorTest, AcceptsOrNamesTheProblem) {
  gpuprov_drv_vtable vt = FullVtable();
  gpuprov_type_driver_descriptor d{sizeof(d), GPUPROV_DRIVER_MAGIC, GPUPROV_ABI_VERSION_MAJOR,
                                   GPUPROV_ABI_VERSION_MINOR, "mem", "1.0", "in memory",
                                   GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_OPEN_PORTS, &vt,
                                   nullptr, 0, nullptr};
  GetParam().mutate(&d, &vt);
  DriverInfo info;
  gpuprov_drv_vtable copy{};
  const gpuprov_drv_vtable* result = gpuprov::ValidateDescriptor(&d, &info, &copy);
  std::string expected = GetParam().expected_problem;
  if (expected.empty()) {
    EXPECT_NE(result, nullptr) << info.problem;
    EXPECT_TRUE(info.problem.empty()) << info.problem;
  } else {
    EXPECT_EQ(result, nullptr);
    EXPECT_NE(info.problem.find(expected), std::string::npos)
        << "problem was: " << info.problem;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Rules, ValidateDescriptorTest,
    ::testing::Values(
        DescriptorCase{"Valid", [](auto*, auto*) {}, ""},
        DescriptorCase{"WrongMagic", [](auto* d, auto*) { d->magic = 1; }, "wrong magic"},
        DescriptorCase{"NewerMajor",
                       [](auto* d, auto*) {
                         d->abi_major = 2;
                         d->abi_minor_required = 0;
                       },
                       "needs driver ABI 2.0 but this gpuprov has ABI 1.5"},
        DescriptorCase{"OlderMajor", [](auto* d, auto*) { d->abi_major = 0; },
                       "major versions must be equal"},
        DescriptorCase{"NewerMinor", [](auto* d, auto*) { d->abi_minor_required = 7; },
                       "needs driver ABI 1.7 or newer but this gpuprov has ABI 1.5"},
        // A larger descriptor or function table comes from a newer minor that the driver does
        // not require: the host reads the members it knows (driver_abi.h, COMPATIBILITY).
        DescriptorCase{"LargerFromANewerMinorIsRead", [](auto* d, auto*) { d->struct_size += 16; },
                       ""},
        DescriptorCase{"AbiOneZeroSizeIsRead",
                       [](auto* d, auto*) {
                         d->abi_minor_required = 0;
                         d->struct_size = offsetof(gpuprov_type_driver_descriptor, config_keys);
                       },
                       ""},
        DescriptorCase{"RequiresOneOneWithAOneZeroSize",
                       [](auto* d, auto*) {
                         d->abi_minor_required = 1;
                         d->struct_size = offsetof(gpuprov_type_driver_descriptor, config_keys);
                       },
                       "smaller than ABI 1.1's"},
        DescriptorCase{"SmallerThanOneZero",
                       [](auto* d, auto*) {
                         d->struct_size = offsetof(gpuprov_type_driver_descriptor, vtable);
                       },
                       "smaller than ABI 1.0's"},
        DescriptorCase{"Undersized", [](auto* d, auto*) { d->struct_size = 6; }, "too small"},
        DescriptorCase{"MissingOpenPorts", [](auto*, auto* vt) { vt->open_ports = nullptr; },
                       "does not implement: open_ports"},
        DescriptorCase{"ClusterWithoutOpenPeerPorts",
                       [](auto* d, auto* vt) {
                         d->capabilities |= GPUPROV_CAP_CLUSTER;
                         vt->open_peer_ports = nullptr;
                       },
                       "does not implement: open_peer_ports"},
        // A 1.4 table ends before open_peer_ports: it cannot keep the cluster bit's promise.
        DescriptorCase{"ClusterWithATableOfOneFour",
                       [](auto* d, auto* vt) {
                         d->capabilities |= GPUPROV_CAP_CLUSTER;
                         vt->struct_size = offsetof(gpuprov_drv_vtable, open_peer_ports);
                       },
                       "does not implement: open_peer_ports"},
        DescriptorCase{"ClusterWithOpenPeerPorts",
                       [](auto* d, auto*) { d->capabilities |= GPUPROV_CAP_CLUSTER; }, ""},
        DescriptorCase{"MissingCreateAndList",
                       [](auto*, auto* vt) {
                         vt->create = nullptr;
                         vt->list = nullptr;
                       },
                       "does not implement: create, list"},
        DescriptorCase{"NoVtable", [](auto* d, auto*) { d->vtable = nullptr; },
                       "no function table"},
        DescriptorCase{"BadName", [](auto* d, auto*) { d->name = "Bad Name"; }, "driver name"},
        // A bit of a newer minor: listed and ignored (driver_abi.h, COMPATIBILITY).
        DescriptorCase{"UnknownCapabilityIsIgnored",
                       [](auto* d, auto*) { d->capabilities |= (1ull << 40); }, ""},
        DescriptorCase{"LargerVtableFromANewerMinorIsRead",
                       [](auto*, auto* vt) { vt->struct_size += 8; }, ""},
        DescriptorCase{"ConfigKeyWithABadName",
                       [](auto* d, auto*) {
                         static const gpuprov_type_config_key bad = {
                             sizeof(gpuprov_type_config_key), GPUPROV_CONFIG_STRING, "Bad-Key", "x", nullptr,
                             nullptr, 0};
                         static const gpuprov_type_config_key* const keys[] = {&bad};
                         d->config_keys = keys;
                         d->config_key_count = 1;
                       },
                       "config key #1: the name is missing or not [a-z0-9_]+"},
        DescriptorCase{"ConfigKeyOfUnknownType",
                       [](auto* d, auto*) {
                         static const gpuprov_type_config_key bad = {
                             sizeof(gpuprov_type_config_key), 9, "zone", "x", nullptr, nullptr, 0};
                         static const gpuprov_type_config_key* const keys[] = {&bad};
                         d->config_keys = keys;
                         d->config_key_count = 1;
                       },
                       "config key 'zone' has unknown type 9"},
        DescriptorCase{"ConfigKeyTwice",
                       [](auto* d, auto*) {
                         static const gpuprov_type_config_key zone = {
                             sizeof(gpuprov_type_config_key), GPUPROV_CONFIG_STRING, "zone", "x", nullptr,
                             nullptr, 0};
                         static const gpuprov_type_config_key* const keys[] = {&zone, &zone};
                         d->config_keys = keys;
                         d->config_key_count = 2;
                       },
                       "declares config key 'zone' twice"},
        DescriptorCase{"ConfigKeyEndpointIsTheHosts",
                       [](auto* d, auto*) {
                         static const gpuprov_type_config_key endpoint = {
                             sizeof(gpuprov_type_config_key), GPUPROV_CONFIG_STRING, "endpoint",
                             "x", nullptr, nullptr, 0};
                         static const gpuprov_type_config_key* const keys[] = {&endpoint};
                         d->config_keys = keys;
                         d->config_key_count = 1;
                       },
                       "'endpoint', which is the host's own"},
        DescriptorCase{"ConfigKeySmallerThanOneOne",
                       [](auto* d, auto*) {
                         static const gpuprov_type_config_key small = {
                             4, GPUPROV_CONFIG_STRING, "zone", "x", nullptr, nullptr, 0};
                         static const gpuprov_type_config_key* const keys[] = {&small};
                         d->config_keys = keys;
                         d->config_key_count = 1;
                       },
                       "config key #1 is missing or smaller"},
        // A key of ABI 1.1 or 1.2 ends at help: read, members and former name absent.
        DescriptorCase{"ConfigKeyOfTheOneTwoSizeIsRead",
                       [](auto* d, auto*) {
                         static const gpuprov_type_config_key old = {
                             offsetof(gpuprov_type_config_key, replaced_by),
                             GPUPROV_CONFIG_STRING, "zone", "x", "garbage", nullptr, 99};
                         static const gpuprov_type_config_key* const keys[] = {&old};
                         d->config_keys = keys;
                         d->config_key_count = 1;
                       },
                       ""},
        DescriptorCase{"TableKeyWithoutMembers",
                       [](auto* d, auto*) {
                         static const gpuprov_type_config_key table = {
                             sizeof(gpuprov_type_config_key), GPUPROV_CONFIG_TABLE, "retry", "x",
                             nullptr, nullptr, 0};
                         static const gpuprov_type_config_key* const keys[] = {&table};
                         d->config_keys = keys;
                         d->config_key_count = 1;
                       },
                       "config key 'retry' is a table without members"},
        DescriptorCase{"TableInsideATable",
                       [](auto* d, auto*) {
                         static const gpuprov_type_config_key* const none[] = {nullptr};
                         static const gpuprov_type_config_key inner = {
                             sizeof(gpuprov_type_config_key), GPUPROV_CONFIG_TABLE, "inner", "x",
                             nullptr, none, 1};
                         static const gpuprov_type_config_key* const members[] = {&inner};
                         static const gpuprov_type_config_key table = {
                             sizeof(gpuprov_type_config_key), GPUPROV_CONFIG_TABLE, "retry", "x",
                             nullptr, members, 1};
                         static const gpuprov_type_config_key* const keys[] = {&table};
                         d->config_keys = keys;
                         d->config_key_count = 1;
                       },
                       "config key 'retry' member #1 is a table, which a table member cannot be"},
        DescriptorCase{"FormerNameOfAnUndeclaredKey",
                       [](auto* d, auto*) {
                         static const gpuprov_type_config_key old = {
                             sizeof(gpuprov_type_config_key), 0, "old", "", "new", nullptr, 0};
                         static const gpuprov_type_config_key* const keys[] = {&old};
                         d->config_keys = keys;
                         d->config_key_count = 1;
                       },
                       "config key 'old' is replaced by 'new', which the driver does not declare"},
        DescriptorCase{"FormerNameOfAMissingMember",
                       [](auto* d, auto*) {
                         static const gpuprov_type_config_key attempts = {
                             sizeof(gpuprov_type_config_key), GPUPROV_CONFIG_INTEGER,
                             "max_attempts", "x", nullptr, nullptr, 0};
                         static const gpuprov_type_config_key* const members[] = {&attempts};
                         static const gpuprov_type_config_key table = {
                             sizeof(gpuprov_type_config_key), GPUPROV_CONFIG_TABLE, "retry", "x",
                             nullptr, members, 1};
                         static const gpuprov_type_config_key old = {
                             sizeof(gpuprov_type_config_key), 0, "http_delay", "",
                             "retry.base_delay_ms", nullptr, 0};
                         static const gpuprov_type_config_key* const keys[] = {&table, &old};
                         d->config_keys = keys;
                         d->config_key_count = 2;
                       },
                       "replaced by 'retry.base_delay_ms', which the driver does not declare"}),
    [](const auto& info) { return std::string(info.param.test_name); });

// ---- real .so files: the fixture drivers ----

class DriverFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = fs::temp_directory_path() /
           ("gpuprov-driver-host-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(tmp_);
    fs::create_directories(tmp_);
    marker_ = (tmp_ / "init-marker").string();
    setenv("GPUPROV_FIXTURE_INIT_MARKER", marker_.c_str(), 1);
  }
  void TearDown() override {
    unsetenv("GPUPROV_FIXTURE_INIT_MARKER");
    fs::remove_all(tmp_);
  }
  static std::string Fixture(const std::string& name) {
    return std::string(GPUPROV_FIXTURE_DRIVER_DIR) + "/" + gpuprov::DriverFileName(name);
  }
  const DriverInfo* Find(const std::vector<DriverInfo>& all, const std::string& name) {
    for (const auto& i : all) {
      if (i.name == name) return &i;
    }
    return nullptr;
  }
  fs::path tmp_;
  std::string marker_;
};

TEST_F(DriverFilesTest, ListReportsBrokenDriversAndStillLoadsGoodOnes) {
  // A truncated copy of a real driver, as a failed download would leave it.
  {
    std::ifstream in(Fixture("good"), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    std::ofstream out(tmp_ / gpuprov::DriverFileName("truncated"), std::ios::binary);
    out.write(bytes.data(), 300);
  }
  DriverHost host({{GPUPROV_FIXTURE_DRIVER_DIR, "fixtures"}, {tmp_.string(), "tmp"}});
  std::vector<DriverInfo> all = host.ListAll();

  const DriverInfo* good = Find(all, "good");
  ASSERT_NE(good, nullptr);
  EXPECT_TRUE(good->ok()) << good->problem;
  EXPECT_EQ(good->version, "1.2.3");
  EXPECT_EQ(good->abi_major, 1);
  EXPECT_TRUE(good->has(GPUPROV_CAP_OPEN_PORTS | GPUPROV_CAP_HOSTS_KUBERNETES));
  EXPECT_EQ(good->path, Fixture("good"));
  ASSERT_NE(Find(all, "rawok"), nullptr);
  EXPECT_TRUE(Find(all, "rawok")->ok()) << Find(all, "rawok")->problem;

  auto problem = [&](const std::string& name) {
    const DriverInfo* i = Find(all, name);
    return i == nullptr ? std::string("<not listed>") : i->problem;
  };
  EXPECT_NE(problem("newmajor").find("needs driver ABI 2.0 but this gpuprov has ABI 1.5"),
            std::string::npos) << problem("newmajor");
  EXPECT_NE(problem("newminor").find("needs driver ABI 1.99 or newer"), std::string::npos)
      << problem("newminor");
  // Bytes past what this host knows, as a newer minor adds them: read up to what it knows.
  EXPECT_EQ(problem("oversized"), "");
  EXPECT_NE(problem("missingfns").find("does not implement: open_ports"), std::string::npos)
      << problem("missingfns");
  EXPECT_NE(problem("noentry").find("missing entry symbol gpuprov_driver_entry"),
            std::string::npos) << problem("noentry");
  EXPECT_NE(problem("truncated").find("cannot load"), std::string::npos) << problem("truncated");
  EXPECT_NE(problem("truncated").find("cannot read file data"), std::string::npos) << problem("truncated");

  // Listing read descriptors only: no driver was initialised.
  EXPECT_FALSE(fs::exists(marker_));
}

TEST_F(DriverFilesTest, AnAbiOneZeroDriverStillLoadsAndRuns) {
  // abi10 is built with a verbatim copy of the 1.0 header: a descriptor without config keys.
  DriverHost host(std::vector<gpuprov::DriverSearchDir>{{GPUPROV_FIXTURE_DRIVER_DIR, "fixtures"}});
  DriverInfo info = host.Find("abi10");
  EXPECT_TRUE(info.ok()) << info.problem;
  EXPECT_EQ(info.abi_major, 1);
  EXPECT_EQ(info.abi_minor_required, 0);
  EXPECT_FALSE(info.config_keys.has_value());
  auto driver = host.Open("abi10", R"({"endpoint":"","config":{"anything":1}})", {});
  EXPECT_EQ(driver->Call(DriverOp::kList, "{}"), "{}");
}

TEST_F(DriverFilesTest, AnAbiOneOneDriverLoadsAndCannotListResources) {
  // abi11 is built with a verbatim copy of the 1.1 header: its function table ends at
  // open_ports, so the host must not read list_resources or delete_resource from it.
  DriverHost host(std::vector<gpuprov::DriverSearchDir>{{GPUPROV_FIXTURE_DRIVER_DIR, "fixtures"}});
  DriverInfo info = host.Find("abi11");
  EXPECT_TRUE(info.ok()) << info.problem;
  EXPECT_EQ(info.abi_minor_required, 1);
  EXPECT_FALSE(info.lists_resources);
  auto driver = host.Open("abi11", R"({"endpoint":"","config":{}})", {});
  EXPECT_EQ(driver->Call(DriverOp::kList, "{}"), "{}");
  try {
    driver->Call(DriverOp::kListResources, "{}");
    FAIL() << "a 1.1 driver has no list_resources";
  } catch (const DriverCallError& e) {
    EXPECT_EQ(e.status(), GPUPROV_STATUS_UNSUPPORTED);
    EXPECT_NE(std::string(e.what()).find("list_resources"), std::string::npos) << e.what();
  }
}

TEST_F(DriverFilesTest, ACapabilityBitThisHostDoesNotKnowIsListedAndIgnored) {
  // newcap is a C driver setting bit 40, as a driver of a newer minor may.
  DriverHost host(std::vector<gpuprov::DriverSearchDir>{{GPUPROV_FIXTURE_DRIVER_DIR, "fixtures"}});
  DriverInfo info = host.Find("newcap");
  EXPECT_TRUE(info.ok()) << info.problem;
  EXPECT_THAT(gpuprov::CapabilitiesToString(info.capabilities),
              ::testing::HasSubstr("vm-lifecycle,unknown:0x10000000000"));
  auto driver = host.Open("newcap", R"({"endpoint":"","config":{}})", {});
  EXPECT_EQ(driver->Call(DriverOp::kList, "{}"), "{}");
}

TEST_F(DriverFilesTest, AnAbiOneTwoDriverWithConfigKeysLoads) {
  // abi12 is built with a verbatim copy of the 1.2 header: its keys end at help.
  DriverHost host(std::vector<gpuprov::DriverSearchDir>{{GPUPROV_FIXTURE_DRIVER_DIR, "fixtures"}});
  DriverInfo info = host.Find("abi12");
  ASSERT_TRUE(info.ok()) << info.problem;
  EXPECT_EQ(info.abi_minor_required, 2);
  ASSERT_TRUE(info.config_keys.has_value());
  ASSERT_EQ(info.config_keys->size(), 3u);
  EXPECT_EQ((*info.config_keys)[0].name, "zone");
  EXPECT_TRUE((*info.config_keys)[0].replaced_by.empty());
  EXPECT_TRUE((*info.config_keys)[0].members.empty());
  EXPECT_TRUE(info.lists_resources == false);
  auto driver = host.Open("abi12", R"({"endpoint":"","config":{"zone":"z"}})", {});
  EXPECT_EQ(driver->Call(DriverOp::kList, "{}"), "{}");
}

TEST_F(DriverFilesTest, DeclaredConfigKeysAreRead) {
  DriverHost host(std::vector<gpuprov::DriverSearchDir>{{GPUPROV_FIXTURE_DRIVER_DIR, "fixtures"}});
  // A C driver's table...
  DriverInfo raw = host.Find("rawkeys");
  ASSERT_TRUE(raw.ok()) << raw.problem;
  ASSERT_TRUE(raw.config_keys.has_value());
  ASSERT_EQ(raw.config_keys->size(), 6u);
  EXPECT_EQ((*raw.config_keys)[0].name, "zone");
  EXPECT_EQ((*raw.config_keys)[0].type, GPUPROV_CONFIG_STRING);
  EXPECT_EQ((*raw.config_keys)[0].help, "the zone used when provision names none");
  EXPECT_EQ((*raw.config_keys)[1].type, GPUPROV_CONFIG_INTEGER);
  EXPECT_EQ((*raw.config_keys)[2].type, GPUPROV_CONFIG_BOOLEAN);
  // ABI 1.3: a string list, a table with its members, a former name.
  EXPECT_EQ((*raw.config_keys)[3].type, GPUPROV_CONFIG_STRING_LIST);
  EXPECT_EQ((*raw.config_keys)[4].type, GPUPROV_CONFIG_TABLE);
  ASSERT_EQ((*raw.config_keys)[4].members.size(), 1u);
  EXPECT_EQ((*raw.config_keys)[4].members[0].name, "attempts");
  EXPECT_EQ((*raw.config_keys)[4].members[0].type, GPUPROV_CONFIG_INTEGER);
  EXPECT_EQ((*raw.config_keys)[5].name, "old_zone");
  EXPECT_EQ((*raw.config_keys)[5].replaced_by, "zone");
  // ...and one made by the SDK's macro, which requires minor 0 unless told otherwise.
  DriverInfo good = host.Find("good");
  ASSERT_TRUE(good.ok()) << good.problem;
  EXPECT_EQ(good.abi_minor_required, 0);
  ASSERT_TRUE(good.config_keys.has_value());
  ASSERT_EQ(good.config_keys->size(), 3u);
  EXPECT_EQ((*good.config_keys)[0].name, "fail_init");
  EXPECT_EQ((*good.config_keys)[0].type, GPUPROV_CONFIG_BOOLEAN);
  EXPECT_EQ((*good.config_keys)[2].name, "retries");
  // A driver that declares none: rawok (built with this header, keys NULL).
  DriverInfo none = host.Find("rawok");
  EXPECT_FALSE(none.config_keys.has_value());
}

/// Lines of the good fixture's load marker that start with \a word ("load": loaded into this
/// test's process, "probe": into the host's descriptor-reading child).
int MarkerLines(const std::string& marker, const std::string& word) {
  std::ifstream in(marker);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.rfind(word + " ", 0) == 0 ? 1 : 0;
  return n;
}

TEST_F(DriverFilesTest, LoadThenOpenLoadsTheFileOnce) {
  // Fresh copies, so no earlier test has this file loaded.
  for (const char* dir : {"a", "b"}) {
    fs::create_directories(tmp_ / dir);
    fs::copy_file(Fixture("good"), tmp_ / dir / gpuprov::DriverFileName("good"));
  }
  const std::string load_marker = (tmp_ / "load-marker").string();
  setenv("GPUPROV_FIXTURE_LOAD_MARKER", load_marker.c_str(), 1);
  {
    // Find reads the descriptor in a child process: nothing is loaded into this one.
    DriverHost host(std::vector<gpuprov::DriverSearchDir>{{(tmp_ / "a").string(), "a"}});
    EXPECT_TRUE(host.Find("good").ok());
    EXPECT_EQ(MarkerLines(load_marker, "load"), 0);
    EXPECT_EQ(MarkerLines(load_marker, "probe"), 1);
  }
  DriverHost host(std::vector<gpuprov::DriverSearchDir>{{(tmp_ / "b").string(), "b"}});
  host.set_list_cache((tmp_ / "cache" / "drivers.json").string());
  {
    gpuprov::LoadedDriver loaded = host.Load("good");
    EXPECT_TRUE(loaded.info().has(GPUPROV_CAP_HOSTS_KUBERNETES));
    auto driver = DriverHost::Open(loaded, "{}", {});
    EXPECT_EQ(driver->info().name, "good");
    EXPECT_NE(driver->Call(DriverOp::kCreate, R"({"name":"x"})").find("\"vm\""),
              std::string::npos);
  }
  EXPECT_EQ(MarkerLines(load_marker, "load"), 1);  // Load + Open: one load into this process
  EXPECT_EQ(MarkerLines(load_marker, "probe"), 2);  // and one child read its descriptor
  host.Load("good");  // the child's reading is cached: only the load itself
  unsetenv("GPUPROV_FIXTURE_LOAD_MARKER");
  EXPECT_EQ(MarkerLines(load_marker, "load"), 2);
  EXPECT_EQ(MarkerLines(load_marker, "probe"), 2);
}

TEST_F(DriverFilesTest, AShadowedCopyIsReportedFromItsPathAndNeverLoaded) {
  fs::create_directories(tmp_ / "a");
  fs::create_directories(tmp_ / "b");
  fs::copy_file(Fixture("good"), tmp_ / "a" / gpuprov::DriverFileName("good"));
  fs::copy_file(Fixture("good"), tmp_ / "b" / gpuprov::DriverFileName("good"));
  const std::string load_marker = (tmp_ / "load-marker").string();
  setenv("GPUPROV_FIXTURE_LOAD_MARKER", load_marker.c_str(), 1);
  DriverHost host({{(tmp_ / "a").string(), "first"}, {(tmp_ / "b").string(), "second"}});
  auto all = host.ListAll();
  host.Load("good");
  unsetenv("GPUPROV_FIXTURE_LOAD_MARKER");
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].name, "good");
  EXPECT_EQ(all[1].path, (tmp_ / "b" / gpuprov::DriverFileName("good")).string());
  EXPECT_EQ(all[1].version, "");  // never read
  // The first file: described in a child for the list, again for Load (no cache), then
  // loaded here once; the shadowed one in neither process.
  EXPECT_EQ(MarkerLines(load_marker, "probe"), 2);
  EXPECT_EQ(MarkerLines(load_marker, "load"), 1);
}

TEST_F(DriverFilesTest, AFileThatAbortsWhileLoadingIsBrokenAndThisProcessLivesOn) {
  // onepp aborts as a second copy of a gRPC driver does when a copy is already loaded.
  fs::copy_file(Fixture("onepp"), tmp_ / gpuprov::DriverFileName("onepp"));
  setenv("GPUPROV_FIXTURE_ONE_PER_PROCESS_LOADED", "1", 1);
  DriverHost host(std::vector<gpuprov::DriverSearchDir>{{tmp_.string(), "tmp"}});
  auto all = host.ListAll();
  unsetenv("GPUPROV_FIXTURE_ONE_PER_PROCESS_LOADED");
  ASSERT_EQ(all.size(), 1u);
  EXPECT_THAT(all[0].problem, ::testing::HasSubstr("crashed while loading (signal 6"));
  EXPECT_THAT(all[0].problem, ::testing::HasSubstr("File already exists in database"));
}

TEST_F(DriverFilesTest, TwoCopiesOfADriverNeverShareAProcess) {
  // The same one-per-process driver under its own name and a second one: Load of the first
  // works; Load of the copy is refused from its child's reading, without loading it here
  // (which would abort this test program).
  fs::copy_file(Fixture("onepp"), tmp_ / gpuprov::DriverFileName("onepp"));
  fs::copy_file(Fixture("onepp"), tmp_ / gpuprov::DriverFileName("onecopy"));
  DriverHost host(std::vector<gpuprov::DriverSearchDir>{{tmp_.string(), "tmp"}});
  {
    gpuprov::LoadedDriver first = host.Load("onepp");
    EXPECT_EQ(first.info().name, "onepp");
    try {
      host.Load("onecopy");
      ADD_FAILURE() << "the copy was loaded";
    } catch (const gpuprov::Error& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr("is broken: crashed while loading"));
    }
    EXPECT_EQ(host.ListAll().size(), 2u);  // and listing both is safe too
  }
  unsetenv("GPUPROV_FIXTURE_ONE_PER_PROCESS_LOADED");
}

TEST_F(DriverFilesTest, ADriverFolderEntryThatIsNotARegularFileIsNotOpened) {
  ASSERT_EQ(mkfifo((tmp_ / gpuprov::DriverFileName("fifo")).c_str(), 0600), 0);
  fs::create_symlink("/dev/zero", tmp_ / gpuprov::DriverFileName("zero"));
  DriverHost host(std::vector<gpuprov::DriverSearchDir>{{tmp_.string(), "tmp"}});
  auto all = host.ListAll();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_THAT(all[0].problem, ::testing::HasSubstr("is a FIFO (named pipe), not a regular file"));
  EXPECT_THAT(all[1].problem, ::testing::HasSubstr("is a character device, not a regular file"));
  EXPECT_THROW(host.Load("fifo"), gpuprov::Error);
}

TEST_F(DriverFilesTest, FirstDirectoryWinsAndLaterCopiesAreShadowed) {
  fs::create_directories(tmp_ / "a");
  fs::create_directories(tmp_ / "b");
  fs::copy_file(Fixture("good"), tmp_ / "a" / gpuprov::DriverFileName("good"));
  fs::copy_file(Fixture("good"), tmp_ / "b" / gpuprov::DriverFileName("good"));
  DriverHost host({{(tmp_ / "a").string(), "first"}, {(tmp_ / "b").string(), "second"}});
  auto all = host.ListAll();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_TRUE(all[0].ok());
  EXPECT_EQ(all[0].origin, "first");
  EXPECT_EQ(all[1].shadowed_by, (tmp_ / "a" / gpuprov::DriverFileName("good")).string());
  EXPECT_EQ(host.Find("good").origin, "first");
}

TEST_F(DriverFilesTest, FindLoadsOnlyTheNamedFile) {
  // A broken file of another name sits first on the path; finding "good" never reads it.
  std::ofstream(tmp_ / gpuprov::DriverFileName("zzz")) << "not an ELF file";
  DriverHost host({{tmp_.string(), "tmp"}, {GPUPROV_FIXTURE_DRIVER_DIR, "fixtures"}});
  DriverInfo info = host.Find("good");
  EXPECT_TRUE(info.ok()) << info.problem;
  EXPECT_EQ(info.origin, "fixtures");
}

TEST_F(DriverFilesTest, FileNameMustMatchTheDriverName) {
  fs::copy_file(Fixture("good"), tmp_ / gpuprov::DriverFileName("other"));
  DriverHost host({{tmp_.string(), "tmp"}});
  DriverInfo info = host.Find("other");
  EXPECT_NE(info.problem.find("calls itself 'good'"), std::string::npos) << info.problem;
}

TEST_F(DriverFilesTest, MissingDriverNamesTheSearchPath) {
  DriverHost host({{tmp_.string(), "tmp"}});
  try {
    host.Find("nosuchcloud");
    FAIL();
  } catch (const gpuprov::Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_NE(std::string(e.what()).find(tmp_.string()), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("libgpuprov-driver-nosuchcloud.so"), std::string::npos);
  }
}

TEST_F(DriverFilesTest, ListCacheSkipsLoadingUnchangedFilesAndNoticesChangedOnes) {
  fs::copy_file(Fixture("good"), tmp_ / gpuprov::DriverFileName("good"));
  const std::string load_marker = (tmp_ / "load-marker").string();
  setenv("GPUPROV_FIXTURE_LOAD_MARKER", load_marker.c_str(), 1);
  auto loads = [&] {
    std::ifstream in(load_marker);
    return static_cast<int>(std::count(std::istreambuf_iterator<char>(in), {}, '\n'));
  };
  DriverHost host(std::vector<gpuprov::DriverSearchDir>{{tmp_.string(), "tmp"}});
  host.set_list_cache((tmp_ / "cache" / "drivers.json").string());
  auto first = host.ListAll();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_TRUE(first[0].ok()) << first[0].problem;
  EXPECT_EQ(loads(), 1);
  EXPECT_TRUE(fs::exists(tmp_ / "cache" / "drivers.json"));

  auto second = host.ListAll();  // served from the cache: no dlopen
  EXPECT_EQ(loads(), 1);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].version, "1.2.3");
  ASSERT_TRUE(second[0].config_keys.has_value());
  ASSERT_EQ(second[0].config_keys->size(), first[0].config_keys->size());
  EXPECT_EQ((*second[0].config_keys)[1].name, "zone");
  EXPECT_EQ((*second[0].config_keys)[1].help, "fixture: a string setting");
  EXPECT_EQ(second[0].capabilities, first[0].capabilities);
  EXPECT_EQ(second[0].path, first[0].path);

  // A changed file (here truncated) is loaded again and its problem shown.
  fs::resize_file(tmp_ / gpuprov::DriverFileName("good"), 300);
  auto third = host.ListAll();
  ASSERT_EQ(third.size(), 1u);
  EXPECT_NE(third[0].problem.find("cannot load"), std::string::npos) << third[0].problem;
  unsetenv("GPUPROV_FIXTURE_LOAD_MARKER");
}

TEST(DriverSearchPath, FlagThenEnvThenUserThenExeThenPrefix) {
  setenv("GPUPROV_DRIVER_PATH", "/env/one:/env/two", 1);
  auto dirs = DriverHost::DefaultSearchPath("/flag/a:/flag/b", "/home/u/.gpu-provisioner");
  unsetenv("GPUPROV_DRIVER_PATH");
  ASSERT_GE(dirs.size(), 6u);
  EXPECT_EQ(dirs[0].path, "/flag/a");
  EXPECT_EQ(dirs[0].origin, "--driver-path");
  EXPECT_EQ(dirs[1].path, "/flag/b");
  EXPECT_EQ(dirs[2].path, "/env/one");
  EXPECT_EQ(dirs[2].origin, "GPUPROV_DRIVER_PATH");
  EXPECT_EQ(dirs[3].path, "/env/two");
  EXPECT_EQ(dirs[4].path, "/home/u/.gpu-provisioner/drivers");
  EXPECT_EQ(dirs[5].origin, "next to gpuprov");
  EXPECT_EQ(dirs.back().origin, "install prefix");
}

}  // namespace

namespace gpuprov {
namespace {

TEST(DriverReadme, NamesTheReadmeFileOrElseThePackage) {
  // The build tree's gpuprov_test is not installed: the source tree's README is found.
  EXPECT_THAT(DriverReadme("aws"), ::testing::EndsWith("plugins/aws/README.md"));
  EXPECT_TRUE(std::filesystem::is_regular_file(DriverReadme("aws")));
  EXPECT_EQ(DriverReadme("nosuchcloud"), "the README.md of the gpuprov-driver-nosuchcloud package");
}

TEST(ValidateDescriptorNodeAddress, ReadsAKnownValueWhereTheDescriptorReachesIt) {
  gpuprov_drv_vtable vt = FullVtable();
  gpuprov_type_driver_descriptor d{sizeof(d), GPUPROV_DRIVER_MAGIC, GPUPROV_ABI_VERSION_MAJOR, 0,
                                   "mem", "1.0", "in memory", GPUPROV_CAP_VM_LIFECYCLE, &vt,
                                   nullptr, 0, GPUPROV_NODE_ADDRESS_OPENSTACK};
  auto read = [&d] {
    DriverInfo info;
    gpuprov_drv_vtable copy{};
    EXPECT_NE(gpuprov::ValidateDescriptor(&d, &info, &copy), nullptr) << info.problem;
    return info.node_address;
  };
  EXPECT_EQ(read(), "openstack");
  d.node_address = GPUPROV_NODE_ADDRESS_NONE;
  EXPECT_EQ(read(), "none");
  // A value of a newer minor is unknown to this host: the installer's auto.
  d.node_address = "carrier-pigeon";
  EXPECT_EQ(read(), "");
  // A 1.3 descriptor ends before node_address: the member is not read.
  d.node_address = GPUPROV_NODE_ADDRESS_EC2;
  d.struct_size = offsetof(gpuprov_type_driver_descriptor, node_address);
  EXPECT_EQ(read(), "");
  EXPECT_TRUE(gpuprov::KnownNodeAddress("interface"));
  EXPECT_FALSE(gpuprov::KnownNodeAddress("Interface"));
}

// ---- In-memory drivers (DriverHost::AddInMemory) ----

gpuprov_type_status InMemoryOp(gpuprov_type_driver*, gpuprov_type_json, gpuprov_type_json* out) {
  static const char kAnswer[] = R"({"account":"in memory"})";
  *out = gpuprov_type_json{kAnswer, sizeof(kAnswer) - 1};
  return GPUPROV_STATUS_OK;
}
const gpuprov_drv_vtable kInMemoryVtable = {sizeof(gpuprov_drv_vtable), Init, Destroy, LastError,
                                             InMemoryOp, InMemoryOp, InMemoryOp, InMemoryOp,
                                             InMemoryOp, InMemoryOp, nullptr, nullptr, nullptr,
                                             nullptr};

TEST(InMemoryDriver, LoadFindsItBeforeAFileOfTheSameNameAndOpenCallsIt) {
  DriverHost host(std::vector<gpuprov::DriverSearchDir>{{GPUPROV_FIXTURE_DRIVER_DIR, "fixtures"}});
  static const gpuprov_type_driver_descriptor kGood = {
      sizeof(gpuprov_type_driver_descriptor), GPUPROV_DRIVER_MAGIC, GPUPROV_ABI_VERSION_MAJOR, 0,
      "good", "9.9.9", "in memory", GPUPROV_CAP_VM_LIFECYCLE, &kInMemoryVtable, nullptr, 0,
      nullptr};
  host.AddInMemory(&kGood);
  const gpuprov::LoadedDriver loaded = host.Load("good");  // the fixture file is 1.2.3
  EXPECT_EQ(loaded.info().version, "9.9.9");
  EXPECT_EQ(loaded.info().path, "(in memory)");
  auto driver = DriverHost::Open(loaded, "{}", {});
  EXPECT_EQ(driver->Call(DriverOp::kCheck, "{}"), R"({"account":"in memory"})");
  EXPECT_EQ(host.Load("abi10").info().name, "abi10");  // other names: the search path
}

TEST(InMemoryDriver, ABrokenOneIsRefusedWithItsProblem) {
  DriverHost host(std::vector<gpuprov::DriverSearchDir>{});
  static const gpuprov_type_driver_descriptor kNewMajor = {
      sizeof(gpuprov_type_driver_descriptor), GPUPROV_DRIVER_MAGIC, 99, 0, "broken", "1",
      "in memory", GPUPROV_CAP_VM_LIFECYCLE, &kInMemoryVtable, nullptr, 0, nullptr};
  host.AddInMemory(&kNewMajor);
  try {
    host.Load("broken");
    FAIL() << "loaded";
  } catch (const gpuprov::Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("the in-memory broken driver is broken"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("99"));
  }
}

// ABI 1.5: a cluster driver's open_peer_ports is called through its slot, and check's
// max_cluster_nodes reaches the host (absent: no limit known).
std::string g_peer_request;
std::string g_check_answer;
gpuprov_type_status PeerCheck(gpuprov_type_driver*, gpuprov_type_json, gpuprov_type_json* out) {
  *out = gpuprov_type_json{g_check_answer.data(), g_check_answer.size()};
  return GPUPROV_STATUS_OK;
}
gpuprov_type_status PeerPorts(gpuprov_type_driver*, gpuprov_type_json req,
                              gpuprov_type_json* out) {
  g_peer_request.assign(req.data, req.len);
  static const char kEmpty[] = "{}";
  *out = gpuprov_type_json{kEmpty, 2};
  return GPUPROV_STATUS_OK;
}

TEST(ClusterDriver, OpenPeerPortsAndMaxClusterNodesReachTheHost) {
  static gpuprov_drv_vtable vt = FullVtable();
  vt.check = PeerCheck;
  vt.open_peer_ports = PeerPorts;
  static const gpuprov_type_driver_descriptor d{
      sizeof(d), GPUPROV_DRIVER_MAGIC, GPUPROV_ABI_VERSION_MAJOR, 0, "peers", "1.0", "in memory",
      GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_CLUSTER, &vt, nullptr, 0, nullptr};
  auto driver = DriverHost::OpenDescriptor(&d, "{}", {});
  EXPECT_TRUE(driver->info().has(GPUPROV_CAP_CLUSTER));
  EXPECT_EQ(CapabilitiesToString(d.capabilities),
            "boot:none,no-open-ports,no-kubernetes,vm-lifecycle,cluster");
  const std::string request = R"({"cluster":"train","peer_ports":[],"peers":[]})";
  EXPECT_EQ(driver->Call(DriverOp::kOpenPeerPorts, request), "{}");
  EXPECT_EQ(g_peer_request, request);
  Cloud cloud(std::move(driver));
  g_check_answer = R"({"account":"a","max_cluster_nodes":16})";
  EXPECT_EQ(cloud.Check().max_cluster_nodes, 16);
  EXPECT_FALSE(cloud.Check().private_network_unfiltered);
  g_check_answer = R"({"account":"a","private_network_unfiltered":true})";
  EXPECT_TRUE(cloud.Check().private_network_unfiltered);
  g_check_answer = R"({"account":"a"})";
  EXPECT_FALSE(cloud.Check().max_cluster_nodes.has_value());
  EXPECT_FALSE(cloud.Check().private_network_unfiltered);
  EXPECT_STREQ(DriverOpName(DriverOp::kOpenPeerPorts), "open_peer_ports");
}

}  // namespace
}  // namespace gpuprov
