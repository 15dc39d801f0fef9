#include "state_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <regex>

#include "error.h"

namespace gpuprov {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

class StateStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "gpuprov-state-XXXXXX");
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    home_ = root_ / "home";
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }

  StateStore Store() const { return StateStore(Paths::ForHome(home_)); }

  static VmRecord Record(const std::string& name) {
    VmRecord r;
    r.name = name;
    r.cloud = "aws";
    r.region = "us-east-1";
    r.phase = "running";
    r.vm_id = "i-0123";
    r.public_ip = "203.0.113.7";
    r.ssh_user = "ubuntu";
    r.ssh_port = 2222;
    r.image = "ubuntu-22.04";
    r.instance_type = "g6.xlarge";
    r.gpus = "L4:1";
    r.driver_file = "/usr/lib/gpuprov/drivers/libgpuprov-driver-aws.so";
    r.kubernetes = true;
    r.access_mode = "direct";
    r.route = "boot";
    r.kubeconfig = "/home/u/.gpu-provisioner/kube/" + name + ".yaml";
    r.probe = {{"cloud_init", "done"}, {"decision", "check-api: installed, k3s running"}};
    r.phase_seconds = {{"create", 12.5}, {"install", 80}};
    r.last_error = "";
    r.extra = {{"security_group", "sg-1"}, {"note", "a \"quoted\" value"}};
    return r;
  }

  std::filesystem::path StateDir() const { return home_ / "state"; }

  static mode_t ModeOf(const std::filesystem::path& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return 0;
    return st.st_mode & 07777;
  }

  std::vector<std::string> StateFiles() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(StateDir())) {
      names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  std::filesystem::path root_;
  std::filesystem::path home_;
};

TEST_F(StateStoreTest, LoadOfAnUnknownVmIsEmpty) {
  EXPECT_EQ(Store().Load("nothing"), std::nullopt);
}

TEST_F(StateStoreTest, SaveThenLoadRoundTrips) {
  StateStore store = Store();
  const VmRecord saved = store.Save(Record("box"));
  const std::optional<VmRecord> loaded = store.Load("box");
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->version, 1);
  EXPECT_EQ(loaded->name, "box");
  EXPECT_EQ(loaded->cloud, "aws");
  EXPECT_EQ(loaded->region, "us-east-1");
  EXPECT_EQ(loaded->phase, "running");
  EXPECT_EQ(loaded->vm_id, "i-0123");
  EXPECT_EQ(loaded->public_ip, "203.0.113.7");
  EXPECT_EQ(loaded->ssh_user, "ubuntu");
  EXPECT_EQ(loaded->ssh_port, 2222);
  EXPECT_EQ(loaded->image, "ubuntu-22.04");
  EXPECT_EQ(loaded->instance_type, "g6.xlarge");
  EXPECT_EQ(loaded->gpus, "L4:1");
  EXPECT_EQ(loaded->driver_file, "/usr/lib/gpuprov/drivers/libgpuprov-driver-aws.so");
  EXPECT_TRUE(loaded->kubernetes);
  EXPECT_EQ(loaded->access_mode, "direct");
  EXPECT_EQ(loaded->extra, Record("box").extra);
  EXPECT_EQ(loaded->route, "boot");
  EXPECT_EQ(loaded->kubeconfig, Record("box").kubeconfig);
  EXPECT_EQ(loaded->probe, Record("box").probe);
  EXPECT_EQ(loaded->phase_seconds, Record("box").phase_seconds);
  EXPECT_EQ(loaded->created_at, saved.created_at);
  EXPECT_EQ(loaded->updated_at, saved.updated_at);
  const std::regex rfc3339(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)");
  EXPECT_TRUE(std::regex_match(loaded->created_at, rfc3339)) << loaded->created_at;
  EXPECT_TRUE(std::regex_match(loaded->updated_at, rfc3339)) << loaded->updated_at;
}

TEST_F(StateStoreTest, RouteReasonDiskTagsAndOpenPortsRoundTrip) {
  StateStore store = Store();
  VmRecord r = Record("box");
  r.route = "ssh";
  r.route_reason = "the boot install never ran";
  r.disk_gb = 200;
  r.tags = {{"team", "ml"}, {"owner", ""}};
  r.open_ports = {22, 80, 443, 6443};
  store.Save(r);
  const std::optional<VmRecord> loaded = store.Load("box");
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->route_reason, "the boot install never ran");
  EXPECT_EQ(loaded->disk_gb, 200);
  EXPECT_EQ(loaded->tags, r.tags);
  EXPECT_EQ(loaded->open_ports, r.open_ports);
}

TEST_F(StateStoreTest, AllowFromRoundTripsAndIsEmptyInAnOlderRecord) {
  StateStore store = Store();
  VmRecord r = Record("narrow");
  r.open_ports = {22, 80, 443, 6443};
  r.allow_from = {"10.0.0.0/8", "2001:db8::/32"};
  r.allow_from_ports = {80, 443, 6443};
  store.Save(r);
  const std::optional<VmRecord> loaded = store.Load("narrow");
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->allow_from, r.allow_from);
  EXPECT_EQ(loaded->allow_from_ports, r.allow_from_ports);
  WriteFileAtomic(StateDir() / "older.json",
                  R"({"version": 1, "name": "older", "cloud": "aws", "phase": "ready"})");
  const std::optional<VmRecord> older = Store().Load("older");
  ASSERT_TRUE(older.has_value());
  EXPECT_TRUE(older->allow_from.empty());
  EXPECT_TRUE(older->allow_from_ports.empty());
  WriteFileAtomic(StateDir() / "bad.json",
                  R"({"version": 1, "name": "bad", "cloud": "aws", "allow_from": [8]})");
  EXPECT_THROW(Store().Load("bad"), Error);
}

TEST_F(StateStoreTest, ARecordWithoutTheNewerFieldsLoadsWithThemEmpty) {
  Store().Save(Record("good"));  // makes the folders
  WriteFileAtomic(StateDir() / "old.json",
                  R"({"version": 1, "name": "old", "cloud": "aws", "phase": "ready",
                      "access_mode": "direct", "route": "boot"})");
  const std::optional<VmRecord> loaded = Store().Load("old");
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->route_reason, "");
  EXPECT_EQ(loaded->disk_gb, 0);
  EXPECT_TRUE(loaded->tags.empty());
  EXPECT_TRUE(loaded->open_ports.empty());
}

TEST_F(StateStoreTest, PricePerHourRoundTripsAndIsUnknownInAnOlderRecord) {
  StateStore store = Store();
  VmRecord r = Record("priced");
  r.price_per_hour = 1.29;
  store.Save(r);
  const std::optional<VmRecord> loaded = store.Load("priced");
  ASSERT_TRUE(loaded.has_value());
  EXPECT_DOUBLE_EQ(loaded->price_per_hour, 1.29);
  WriteFileAtomic(StateDir() / "older.json",
                  R"({"version": 1, "name": "older", "cloud": "aws", "phase": "ready"})");
  EXPECT_EQ(Store().Load("older")->price_per_hour, 0);
  for (const char* bad : {R"("1.5")", "-1", "true"}) {
    WriteFileAtomic(StateDir() / "bad.json",
                    std::string(R"({"version": 1, "name": "bad", "price_per_hour": )") + bad + "}");
    EXPECT_THROW(Store().Load("bad"), Error) << bad;
  }
}

TEST_F(StateStoreTest, TtlFieldsRoundTripAndAreEmptyInAnOlderRecord) {
  StateStore store = Store();
  VmRecord r = Record("timed");
  r.ttl_deadline = "2026-12-04T20:00:00Z";
  r.idle_ttl_seconds = 3600;
  r.powered_off_cost = "full";
  store.Save(r);
  const std::optional<VmRecord> loaded = store.Load("timed");
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->ttl_deadline, "2026-12-04T20:00:00Z");
  EXPECT_EQ(loaded->idle_ttl_seconds, 3600);
  EXPECT_EQ(loaded->powered_off_cost, "full");
  WriteFileAtomic(StateDir() / "older.json",
                  R"({"version": 1, "name": "older", "cloud": "aws", "phase": "ready"})");
  const std::optional<VmRecord> older = Store().Load("older");
  EXPECT_EQ(older->ttl_deadline, "");
  EXPECT_EQ(older->idle_ttl_seconds, 0);
  EXPECT_EQ(older->powered_off_cost, "");
  WriteFileAtomic(StateDir() / "bad.json",
                  R"({"version": 1, "name": "bad", "idle_ttl_seconds": -5})");
  EXPECT_THROW(Store().Load("bad"), Error);
}

TEST_F(StateStoreTest, ClusterFieldsRoundTripAndAreAbsentFromASingleVmsRecord) {
  StateStore store = Store();
  VmRecord agent = Record("train-agent-2");
  agent.cluster = "train";
  agent.role = "agent";
  agent.node_index = 2;
  agent.private_ip = "10.1.2.3";
  store.Save(agent);
  VmRecord server = Record("train");
  server.cluster = "train";
  server.role = "server";
  server.cluster_nodes = 3;
  store.Save(server);
  const std::optional<VmRecord> loaded = store.Load("train-agent-2");
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->cluster, "train");
  EXPECT_EQ(loaded->role, "agent");
  EXPECT_EQ(loaded->node_index, 2);
  EXPECT_EQ(loaded->private_ip, "10.1.2.3");
  EXPECT_EQ(loaded->cluster_nodes, 0);
  EXPECT_EQ(store.Load("train")->cluster_nodes, 3);
  EXPECT_EQ(store.Load("train")->role, "server");
  store.Save(Record("box"));
  const std::string single = ReadFile(StateDir() / "box.json");
  EXPECT_THAT(single, Not(HasSubstr("\"cluster\"")));
  EXPECT_THAT(single, Not(HasSubstr("\"role\"")));
  EXPECT_THAT(single, Not(HasSubstr("token")));
  EXPECT_EQ(store.Load("box")->cluster, "");
  VmRecord bad = Record("box");
  bad.role = "worker";
  EXPECT_THROW(store.Save(bad), Error);
}

TEST_F(StateStoreTest, OpenPortsThatAreNotPortsAreCorrupt) {
  Store().Save(Record("good"));
  WriteFileAtomic(StateDir() / "bad.json",
                  R"({"version": 1, "name": "bad", "cloud": "aws", "phase": "ready",
                      "access_mode": "none", "open_ports": [22, "x"]})");
  EXPECT_THROW(Store().Load("bad"), Error);
}

TEST_F(StateStoreTest, FileHasVersionAndNoSurprises) {
  Store().Save(Record("box"));
  const std::string text = ReadFile(StateDir() / "box.json");
  EXPECT_THAT(text, HasSubstr("\"version\": 1"));
  EXPECT_THAT(text, HasSubstr("\"gpuprov_version\""));
}

TEST_F(StateStoreTest, ModesAre0600And0700EvenWithUmask0) {
  const mode_t old_umask = ::umask(0);
  Store().Save(Record("box"));
  ::umask(old_umask);
  EXPECT_EQ(ModeOf(StateDir() / "box.json"), 0600u);
  EXPECT_EQ(ModeOf(StateDir()), 0700u);
  EXPECT_EQ(ModeOf(home_), 0700u);
}

TEST_F(StateStoreTest, SaveKeepsCreatedAtAndVersion) {
  StateStore store = Store();
  VmRecord first = Record("box");
  first.created_at = "2020-01-02T03:04:05Z";
  store.Save(first);
  VmRecord second = Record("box");
  second.phase = "ready";
  second.version = 7;  // Save writes the version it knows.
  const VmRecord stored = store.Save(second);
  EXPECT_EQ(stored.created_at, "2020-01-02T03:04:05Z");
  EXPECT_EQ(stored.version, 1);
  EXPECT_EQ(store.Load("box")->phase, "ready");
  EXPECT_EQ(store.Load("box")->created_at, "2020-01-02T03:04:05Z");
}

TEST_F(StateStoreTest, SaveRejectsUndocumentedPhaseAndAccessMode) {
  VmRecord r = Record("box");
  r.phase = "exploded";
  EXPECT_THROW(Store().Save(r), Error);
  r = Record("box");
  r.access_mode = "vpn";
  EXPECT_THROW(Store().Save(r), Error);
  r = Record("box");
  r.route = "carrier-pigeon";
  EXPECT_THROW(Store().Save(r), Error);
}

TEST_F(StateStoreTest, NamesAreValidatedBeforeTouchingFiles) {
  EXPECT_THROW(Store().Load("../etc/passwd"), Error);
  VmRecord r = Record("Bad/Name");
  EXPECT_THROW(Store().Save(r), Error);
  EXPECT_THROW(Store().Remove(".."), Error);
}

TEST_F(StateStoreTest, RemoveDeletesAndToleratesMissing) {
  StateStore store = Store();
  store.Save(Record("box"));
  store.Remove("box");
  EXPECT_EQ(store.Load("box"), std::nullopt);
  EXPECT_NO_THROW(store.Remove("box"));
}

TEST_F(StateStoreTest, ListIsSortedByNameAndSkipsTempFiles) {
  StateStore store = Store();
  EXPECT_TRUE(store.List().empty());  // No state dir yet.
  store.Save(Record("zeta"));
  store.Save(Record("alpha"));
  store.Save(Record("mid-1"));
  WriteFileAtomic(StateDir() / ".alpha.json.tmp.1.abc", "partial");
  WriteFileAtomic(StateDir() / "notes.txt", "hello");
  std::vector<std::string> problems;
  const std::vector<VmRecord> records = store.List(&problems);
  std::vector<std::string> names;
  for (const VmRecord& r : records) names.push_back(r.name);
  EXPECT_THAT(names, ElementsAre("alpha", "mid-1", "zeta"));
  EXPECT_TRUE(problems.empty());
}

TEST_F(StateStoreTest, CorruptFileIsReportedNeverOverwritten) {
  StateStore store = Store();
  store.Save(Record("good"));
  const std::filesystem::path bad = StateDir() / "bad.json";
  WriteFileAtomic(bad, "{\"version\": 1, \"name\": \"bad\", \"phase\": ");
  try {
    store.Load("bad");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("state file '" + bad.string() + "' is corrupt"));
  }
  EXPECT_THROW(store.Save(Record("bad")), Error);
  EXPECT_EQ(ReadFile(bad), "{\"version\": 1, \"name\": \"bad\", \"phase\": ");

  std::vector<std::string> problems;
  const std::vector<VmRecord> records = store.List(&problems);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].name, "good");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_THAT(problems[0], HasSubstr(bad.string()));
  EXPECT_NO_THROW(store.List());
}

TEST_F(StateStoreTest, WrongFieldTypesAndNamesAreCorrupt) {
  StateStore store = Store();
  EnsureDir(StateDir());
  WriteFileAtomic(StateDir() / "a.json", R"({"version": 1, "name": "a", "ssh_port": "22"})");
  WriteFileAtomic(StateDir() / "b.json", R"({"version": 1, "name": "other"})");
  WriteFileAtomic(StateDir() / "c.json", R"([1, 2])");
  WriteFileAtomic(StateDir() / "d.json", R"({"name": "d"})");
  WriteFileAtomic(StateDir() / "e.json", R"({"version": 1, "name": "e", "kubernetes": 1})");
  WriteFileAtomic(StateDir() / "f.json", R"({"version": 1, "name": "f", "extra": {"k": 5}})");
  for (const char* name : {"a", "b", "c", "d", "e", "f"}) {
    try {
      store.Load(name);
      ADD_FAILURE() << name << " loaded";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("is corrupt")) << name;
    }
  }
  std::vector<std::string> problems;
  EXPECT_TRUE(store.List(&problems).empty());
  EXPECT_EQ(problems.size(), 6u);
}

TEST_F(StateStoreTest, NewerRecordVersionNamesTheGpuprovNeeded) {
  StateStore store = Store();
  EnsureDir(StateDir());
  const std::string newer =
      R"({"version": 2, "gpuprov_version": "0.5.0", "name": "box", "shiny": {}})";
  WriteFileAtomic(StateDir() / "box.json", newer);
  try {
    store.Load("box");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("record version 2"));
    EXPECT_THAT(e.what(), HasSubstr("reads up to version 1"));
    EXPECT_THAT(e.what(), HasSubstr("gpuprov 0.5.0 or newer is needed"));
  }
  EXPECT_THROW(store.Save(Record("box")), Error);
  EXPECT_EQ(ReadFile(StateDir() / "box.json"), newer);
  std::vector<std::string> problems;
  EXPECT_TRUE(store.List(&problems).empty());
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_THAT(problems[0], HasSubstr("record version 2"));
}

TEST_F(StateStoreTest, NewerRecordVersionWithoutWriterStillSaysWhatIsNeeded) {
  EnsureDir(StateDir());
  WriteFileAtomic(StateDir() / "box.json", R"({"version": 3, "name": "box"})");
  try {
    Store().Load("box");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("a gpuprov that reads record version 3 is needed"));
  }
}

TEST_F(StateStoreTest, FailedSaveKeepsTheOldRecord) {
  StateStore store = Store();
  store.Save(Record("box"));
  const std::string before = ReadFile(StateDir() / "box.json");
  // In a child, a file size limit below the new record's size makes the write fail.
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit {
      256, 256
    };
    ::setrlimit(RLIMIT_FSIZE, &limit);
    VmRecord bigger = Record("box");
    bigger.last_error = std::string(4096, 'e');
    try {
      Store().Save(bigger);
    } catch (const Error&) {
      ::_exit(0);
    }
    ::_exit(1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(ReadFile(StateDir() / "box.json"), before);
  EXPECT_THAT(StateFiles(), ElementsAre("box.json"));
}

TEST_F(StateStoreTest, LockVmExcludesASecondLockerInAnotherProcess) {
  StateStore store = Store();
  FileLock lock = store.LockVm("box", 0);
  EXPECT_EQ(lock.path(), home_ / "locks" / "box.lock");
  EXPECT_EQ(ModeOf(home_ / "locks"), 0700u);
  const pid_t pid = ::fork();
  if (pid == 0) {
    try {
      FileLock second = Store().LockVm("box", 100);
    } catch (const Error& e) {
      const bool named =
          std::string(e.what()).find("another gpuprov is working on 'box'") != std::string::npos;
      ::_exit(named ? 0 : 2);
    }
    ::_exit(1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // Another VM's lock is independent.
  EXPECT_NO_THROW(store.LockVm("other", 0));
}

TEST_F(StateStoreTest, TryLockVmFailsWhileAnotherProcessHoldsTheLock) {
  int ready[2];
  int done[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(done), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    FileLock lock = Store().LockVm("box", 0);
    char byte = 'x';
    (void)!::write(ready[1], &byte, 1);
    (void)!::read(done[0], &byte, 1);  // Hold the lock until the parent says so.
    ::_exit(0);
  }
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  StateStore store = Store();
  EXPECT_FALSE(store.TryLockVm("box").has_value());
  EXPECT_TRUE(store.TryLockVm("other").has_value());
  ASSERT_EQ(::write(done[1], "x", 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(store.TryLockVm("box").has_value());
  for (int fd : {ready[0], ready[1], done[0], done[1]}) ::close(fd);
}

TEST(FormatRfc3339UtcTest, FormatsUtc) {
  EXPECT_EQ(FormatRfc3339Utc(std::chrono::system_clock::from_time_t(0)), "1970-01-01T00:00:00Z");
  EXPECT_EQ(FormatRfc3339Utc(std::chrono::system_clock::from_time_t(1714566896)),
            "2024-05-01T12:34:56Z");
}

}  // namespace
}  // namespace gpuprov
