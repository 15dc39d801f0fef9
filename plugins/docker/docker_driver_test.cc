// SPDX-License-Identifier: Apache-2.0
//
// Loads the BUILT driver .so with dlopen, as the host does, and drives it
// through the C vtable against the real Docker daemon and the real test image.
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <Poco/Net/SocketAddress.h>
#include <Poco/Net/StreamSocket.h>
#include <Poco/Timespan.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "docker_engine.h"
#include "docker_test_util.h"
#include "driver_test_util.h"
#include "gpuprov/driver_abi.h"

namespace gpuprov::docker {
namespace {

using drivers::testing::LoadDriverDescriptor;
using drivers::testing::LoadedDriver;
using drivers::testing::OpResult;
using drivers::testing::ScopedEnv;
using Poco::JSON::Array;
using Poco::JSON::Object;
using testing::DaemonProblem;
using testing::ImageProblem;
using testing::kRunTagLabel;
using testing::RunId;
using testing::TestEngine;

const bool kCleanupRegistered = testing::RegisterCleanup();

constexpr const char* kImage = GPUPROV_TESTVM_IMAGE;

// The driver's descriptor, from the .so loaded once (never unloaded).
const gpuprov_type_driver_descriptor* Descriptor() {
  return LoadDriverDescriptor(GPUPROV_DOCKER_DRIVER_PATH);
}

// One initialised driver handle (init must succeed).
class Driver : public LoadedDriver {
 public:
  explicit Driver(const std::string& config = R"({"endpoint":"","config":{}})")
      : LoadedDriver(GPUPROV_DOCKER_DRIVER_PATH, config) {
    if (init_status() != GPUPROV_STATUS_OK) {
      throw std::runtime_error("init failed: " + init_error());
    }
  }
};

// A VM name unique to this process and test.
std::string VmName(const std::string& suffix) {
  return "dt" + std::to_string(getpid()) + "-" + suffix;
}

std::string CreateRequest(const std::string& name, const std::string& gpu_json,
                          const std::string& extra = "") {
  Object req;
  req.set("name", name);
  req.set("region", "");
  req.set("ssh_public_key",
          "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdwdXByb3YtdGVzdC1rZXktMDAwMDAw "
          "test@gpuprov");
  Object::Ptr tags = new Object();
  tags->set("test-run", RunId());
  tags->set("owner", "docker-driver-test");
  req.set("tags", tags);
  std::ostringstream s;
  req.stringify(s);
  std::string json = s.str();
  json.pop_back();  // "}"
  json += R"(,"gpu":)" + gpu_json + extra + "}";
  return json;
}

// Containers labelled with a VM name, counted by Docker.
size_t CountByName(const std::string& name) {
  return TestEngine().ListContainers({"io.gpuprov.managed=1", "io.gpuprov.name=" + name}).size();
}

std::string Cat(const std::string& id, const std::string& path, int* exit_code = nullptr) {
  ExecResult r = TestEngine().Exec(id, {"/bin/cat", path});
  if (exit_code) *exit_code = r.exit_code;
  return r.out;
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// --- no daemon needed ------------------------------------------------------

TEST(DockerDriverTest, DescriptorNamesDockerAndItsCapabilities) {
  const gpuprov_type_driver_descriptor* d = Descriptor();
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->magic, GPUPROV_DRIVER_MAGIC);
  EXPECT_EQ(d->struct_size, sizeof(gpuprov_type_driver_descriptor));
  EXPECT_EQ(d->abi_major, GPUPROV_ABI_VERSION_MAJOR);
  EXPECT_STREQ(d->name, "docker");
  // How its VM learns its public address: REFERENCE.md section 6.
  EXPECT_STREQ(d->node_address, GPUPROV_NODE_ADDRESS_NONE);
  EXPECT_EQ(d->capabilities, GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_BOOT_CLOUD_INIT);
  const gpuprov_drv_vtable* v = d->vtable;
  ASSERT_NE(v, nullptr);
  drivers::testing::ExpectEveryOperation(*v, /*open_ports=*/false);
}

TEST(DockerDriverTest, OffersFakeGpusInRegionLocal) {
  Driver driver;
  OpResult r = driver.Offers(R"({"gpu":{"type":"L4","count":1},"region":""})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  Array::Ptr offers = r.Doc()->getArray("offers");
  EXPECT_EQ(r.Doc()->getValue<std::string>("powered_off_cost"), "none");  // the test cloud
  ASSERT_EQ(offers->size(), 1u);
  Object::Ptr o = offers->getObject(0);
  EXPECT_EQ(o->getValue<std::string>("instance_type"), "testvm-l4x1");
  EXPECT_EQ(o->getValue<std::string>("gpu_type"), "L4");
  EXPECT_EQ(o->getValue<int>("gpu_count"), 1);
  EXPECT_EQ(o->getValue<std::string>("region"), "local");

  r = driver.Offers(R"({"gpu":{"type":"h100-80gb","count":8},"region":"local"})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  o = r.Doc()->getArray("offers")->getObject(0);
  EXPECT_EQ(o->getValue<std::string>("instance_type"), "testvm-h100-80gbx8");
  EXPECT_EQ(o->getValue<std::string>("gpu_type"), "H100-80GB");

  r = driver.Offers(R"({"gpu":null,"region":""})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  o = r.Doc()->getArray("offers")->getObject(0);
  EXPECT_EQ(o->getValue<std::string>("instance_type"), "testvm-cpu");
  EXPECT_TRUE(o->isNull("gpu_type"));
  EXPECT_EQ(o->getValue<int>("gpu_count"), 0);
}

TEST(DockerDriverTest, OffersNothingForUnknownGpuCountOrRegion) {
  Driver driver;
  for (const char* req : {R"({"gpu":{"type":"B200","count":1},"region":""})",
                          R"({"gpu":{"type":"L4","count":3},"region":""})",
                          R"({"gpu":{"type":"L4","count":1},"region":"us-east-1"})"}) {
    OpResult r = driver.Offers(req);
    ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << req << ": " << r.error;
    EXPECT_EQ(r.Doc()->getArray("offers")->size(), 0u) << req;
  }
}

TEST(DockerDriverTest, BadCreateRequestsAreInvalidInput) {
  Driver driver;
  struct Case {
    std::string request;
    std::string message;
  };
  std::vector<Case> cases = {
      {R"({"name":"bad_name!"})", "is not usable as a hostname"},
      {R"({"name":"ok","region":"eu-west"})", "region eu-west does not exist"},
      {R"({"name":"ok","instance_type":"m5.large"})", "instance type m5.large does not exist"},
      {R"({"name":"ok","gpu":{"type":"B200","count":1}})", "does not offer B200:1"},
      {R"({"name":"ok","instance_type":"testvm-l4x1","gpu":{"type":"A100","count":1}})",
       "does not have A100:1"},
      {"not json", "not a JSON object"},
  };
  for (const auto& c : cases) {
    OpResult r = driver.Create(c.request);
    EXPECT_EQ(r.status, GPUPROV_STATUS_INVALID_INPUT) << c.request;
    EXPECT_TRUE(Contains(r.error, c.message)) << c.request << ": " << r.error;
  }
}

TEST(DockerDriverTest, UnreachableDaemonSaysStartDockerd) {
  ScopedEnv env("DOCKER_HOST", "unix:///nonexistent");
  Driver driver;
  const std::string expected =
      "cannot connect to the Docker daemon at /nonexistent: No such file or directory; "
      "start dockerd";
  OpResult r = driver.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_FAILED);
  EXPECT_TRUE(Contains(r.error, expected)) << r.error;
  r = driver.Create(CreateRequest(VmName("nodaemon"), "null"));
  EXPECT_EQ(r.status, GPUPROV_STATUS_FAILED);
  EXPECT_TRUE(Contains(r.error, expected)) << r.error;
  r = driver.List();
  EXPECT_TRUE(Contains(r.error, expected)) << r.error;
  // No socket, no container: gc's sweep finds nothing here instead of failing.
  r = driver.Call(driver.vtable().list_resources, "{}");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  EXPECT_EQ(r.Doc()->getArray("resources")->size(), 0u) << r.json;
  EXPECT_TRUE(Contains(driver.host().All(), "no Docker daemon socket at /nonexistent"))
      << driver.host().All();
}

TEST(DockerDriverTest, TcpDockerHostIsRefused) {
  ScopedEnv env("DOCKER_HOST", "tcp://127.0.0.1:2375");
  Driver driver;
  OpResult r = driver.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_TRUE(Contains(r.error, "only over a unix socket")) << r.error;
}

TEST(DockerDriverTest, EndpointSettingNamesTheSocket) {
  Driver driver(R"({"endpoint":"unix:///nonexistent/other.sock","config":{}})");
  OpResult r = driver.Check();
  EXPECT_EQ(r.status, GPUPROV_STATUS_FAILED);
  EXPECT_TRUE(Contains(r.error, "Docker daemon at /nonexistent/other.sock")) << r.error;
}

// --- against the daemon ----------------------------------------------------

TEST(DockerDriverTest, CheckNamesDaemonVersionAndSocket) {
  if (auto p = DaemonProblem()) GTEST_SKIP() << *p;
  Driver driver;
  OpResult r = driver.Check();
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  std::string account = r.Doc()->getValue<std::string>("account");
  EXPECT_EQ(account,
            "docker " + TestEngine().Version().version + " at " + TestEngine().socket_path());
}

TEST(DockerDriverTest, MissingImagesSayWhatToDo) {
  if (auto p = DaemonProblem()) GTEST_SKIP() << *p;
  const std::string name = VmName("noimage");
  {
    Driver driver(R"({"endpoint":"","config":{"image":"gpuprov-testvm:000000000000"}})");
    OpResult r = driver.Create(CreateRequest(name, "null"));
    EXPECT_EQ(r.status, GPUPROV_STATUS_INVALID_INPUT);
    EXPECT_TRUE(Contains(r.error,
                         "image gpuprov-testvm:000000000000 is not built; run: bash "
                         "tests/fixtures/testvm/build-image.sh"))
        << r.error;
  }
  {
    Driver driver;
    OpResult r =
        driver.Create(CreateRequest(name, "null", R"(,"image":"gpuprov-no-such-image:zzz")"));
    EXPECT_EQ(r.status, GPUPROV_STATUS_INVALID_INPUT);
    EXPECT_TRUE(Contains(r.error, "image gpuprov-no-such-image:zzz does not exist")) << r.error;
  }
  EXPECT_EQ(CountByName(name), 0u);
}

TEST(DockerDriverTest, CreateGetListDelete) {
  if (auto p = ImageProblem(kImage)) GTEST_SKIP() << *p;
  Driver driver;
  const std::string name = VmName("life");
  const std::string user_data = "#!/bin/bash\necho gpuprov-user-data > /root/user-data-ran\n";
  Object ud;
  ud.set("user_data", user_data);
  std::ostringstream uds;
  ud.stringify(uds);
  std::string extra = "," + uds.str().substr(1, uds.str().size() - 2);

  const auto started = std::chrono::steady_clock::now();
  OpResult r = driver.Create(CreateRequest(name, R"({"type":"L4","count":2})", extra));
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  // create does not wait for the boot.
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
  Object::Ptr doc = r.Doc();
  EXPECT_FALSE(doc->getValue<bool>("existing"));
  Object::Ptr vm = doc->getObject("vm");
  const std::string id = vm->getValue<std::string>("id");
  const std::string address = vm->getValue<std::string>("public_ip");
  EXPECT_EQ(vm->getValue<std::string>("name"), name);
  EXPECT_EQ(vm->getValue<std::string>("state"), "running");
  EXPECT_EQ(address.rfind("127.77.", 0), 0u) << address;
  EXPECT_EQ(vm->getValue<int>("ssh_port"), 22);
  EXPECT_EQ(vm->getValue<std::string>("ssh_user"), "root");
  EXPECT_EQ(vm->getValue<std::string>("region"), "local");
  EXPECT_EQ(vm->getValue<std::string>("instance_type"), "testvm-l4x2");
  EXPECT_EQ(vm->getValue<std::string>("gpus"), "L4:2");
  EXPECT_EQ(vm->getValue<std::string>("image"), kImage);
  EXPECT_EQ(vm->getObject("ports")->getValue<int>("22"), 22);
  EXPECT_EQ(vm->getObject("ports")->getValue<int>("6443"), 6443);
  EXPECT_FALSE(driver.host().progress.empty());

  // The container: name, hostname, labels, ports on the VM's own loopback address.
  Engine engine = TestEngine();
  auto info = engine.InspectContainer(id);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->name, "gpuprov-" + name);
  EXPECT_EQ(info->hostname, name);
  EXPECT_EQ(info->labels.at("io.gpuprov.managed"), "1");
  EXPECT_EQ(info->labels.at("io.gpuprov.name"), name);
  EXPECT_EQ(info->labels.at("io.gpuprov.address"), address);
  EXPECT_EQ(info->labels.at("io.gpuprov.gpus"), "L4:2");
  EXPECT_EQ(info->labels.at("io.gpuprov.tag.owner"), "docker-driver-test");
  EXPECT_EQ(info->labels.at(kRunTagLabel), RunId());
  std::vector<std::string> published;
  for (const auto& p : info->published) {
    published.push_back(std::to_string(p.container_port) + "->" + p.host_ip + ":" + p.host_port);
  }
  std::sort(published.begin(), published.end());
  EXPECT_EQ(published,
            (std::vector<std::string>{"22->" + address + ":22", "6443->" + address + ":6443"}));

  // The seed, read back from inside.
  std::string meta = Cat(id, "/var/lib/cloud/seed/nocloud/meta-data");
  EXPECT_TRUE(Contains(meta, "instance-id: \"gpuprov-" + name + "-")) << meta;
  EXPECT_TRUE(Contains(meta, "local-hostname: \"" + name + "\"")) << meta;
  EXPECT_TRUE(Contains(meta, "public-keys:\n  - \"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5")) << meta;
  EXPECT_EQ(Cat(id, "/var/lib/cloud/seed/nocloud/user-data"), user_data);
  EXPECT_EQ(Cat(id, "/etc/gpuprov-testvm/gpu"), "L4:2\n");
  ExecResult smi = engine.Exec(id, {"nvidia-smi", "-L"});
  EXPECT_EQ(smi.exit_code, 0) << smi.err;
  EXPECT_TRUE(Contains(smi.out, "GPU 1: NVIDIA L4")) << smi.out;

  // Idempotent by name: the same VM, no second container.
  r = driver.Create(CreateRequest(name, R"({"type":"L4","count":2})", extra));
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  EXPECT_TRUE(r.Doc()->getValue<bool>("existing"));
  EXPECT_EQ(r.Doc()->getObject("vm")->getValue<std::string>("id"), id);
  EXPECT_EQ(CountByName(name), 1u);

  // Get by name and by id.
  r = driver.Get(R"({"name":")" + name + R"("})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  EXPECT_EQ(r.Doc()->getObject("vm")->getValue<std::string>("id"), id);
  r = driver.Get(R"({"id":")" + id + R"("})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  EXPECT_EQ(r.Doc()->getObject("vm")->getValue<std::string>("name"), name);
  EXPECT_EQ(r.Doc()->getObject("vm")->getValue<std::string>("public_ip"), address);

  // List has it.
  r = driver.List();
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  Array::Ptr vms = r.Doc()->getArray("vms");
  int found = 0;
  for (size_t i = 0; i < vms->size(); ++i) {
    if (vms->getObject(static_cast<unsigned>(i))->getValue<std::string>("id") == id) ++found;
  }
  EXPECT_EQ(found, 1);

  // Delete, then delete again, then get.
  r = driver.Delete(R"({"id":")" + id + R"(","name":")" + name + R"("})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  EXPECT_TRUE(r.Doc()->getValue<bool>("deleted"));
  EXPECT_FALSE(engine.InspectContainer(id).has_value());
  EXPECT_EQ(CountByName(name), 0u);
  r = driver.Delete(R"({"id":")" + id + R"(","name":")" + name + R"("})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  EXPECT_FALSE(r.Doc()->getValue<bool>("deleted"));
  r = driver.Get(R"({"name":")" + name + R"("})");
  EXPECT_EQ(r.status, GPUPROV_STATUS_NOT_FOUND);
  EXPECT_TRUE(Contains(r.error, "no docker test VM named " + name)) << r.error;
}

TEST(DockerDriverTest, CpuVmGetsDefaultUserDataAndNoGpuFile) {
  if (auto p = ImageProblem(kImage)) GTEST_SKIP() << *p;
  Driver driver;
  const std::string name = VmName("cpu");
  OpResult r = driver.Create(CreateRequest(name, "null"));
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  Object::Ptr vm = r.Doc()->getObject("vm");
  const std::string id = vm->getValue<std::string>("id");
  EXPECT_EQ(vm->getValue<std::string>("instance_type"), "testvm-cpu");
  EXPECT_EQ(vm->getValue<std::string>("gpus"), "");
  EXPECT_EQ(Cat(id, "/var/lib/cloud/seed/nocloud/user-data"), "#cloud-config\n{}\n");
  int rc = 0;
  Cat(id, "/etc/gpuprov-testvm/gpu", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_EQ(TestEngine().Exec(id, {"nvidia-smi"}).exit_code, 9);
}

TEST(DockerDriverTest, VmsGetDistinctAddresses) {
  if (auto p = ImageProblem(kImage)) GTEST_SKIP() << *p;
  Driver driver;
  std::vector<std::string> addresses;
  for (const char* suffix : {"addr-a", "addr-b"}) {
    OpResult r = driver.Create(CreateRequest(VmName(suffix), "null"));
    ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
    addresses.push_back(r.Doc()->getObject("vm")->getValue<std::string>("public_ip"));
  }
  EXPECT_NE(addresses[0], addresses[1]);
}

TEST(DockerDriverTest, CreateStartsAStoppedVmAgain) {
  if (auto p = ImageProblem(kImage)) GTEST_SKIP() << *p;
  Driver driver;
  const std::string name = VmName("restart");
  OpResult r = driver.Create(CreateRequest(name, "null"));
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  const std::string id = r.Doc()->getObject("vm")->getValue<std::string>("id");
  TestEngine().KillContainer(id);
  r = driver.Get(R"({"name":")" + name + R"("})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  EXPECT_EQ(r.Doc()->getObject("vm")->getValue<std::string>("state"), "stopped");

  r = driver.Create(CreateRequest(name, "null"));
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  EXPECT_TRUE(r.Doc()->getValue<bool>("existing"));
  EXPECT_EQ(r.Doc()->getObject("vm")->getValue<std::string>("id"), id);
  EXPECT_EQ(r.Doc()->getObject("vm")->getValue<std::string>("state"), "running");
  EXPECT_EQ(CountByName(name), 1u);
}

TEST(DockerDriverTest, ForeignContainerWithTheNameIsNotTakenOver) {
  if (auto p = ImageProblem(kImage)) GTEST_SKIP() << *p;
  const std::string name = VmName("foreign");
  ContainerSpec spec;
  spec.name = "gpuprov-" + name;
  spec.image = kImage;
  spec.cmd = {"/bin/true"};
  spec.labels = {{testing::kRunLabel, RunId()}};
  TestEngine().CreateContainer(spec);
  Driver driver;
  OpResult r = driver.Create(CreateRequest(name, "null"));
  EXPECT_EQ(r.status, GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_TRUE(Contains(r.error, "exists that gpuprov did not create")) << r.error;
  r = driver.Delete(R"({"name":")" + name + R"("})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  EXPECT_FALSE(r.Doc()->getValue<bool>("deleted"));
  EXPECT_TRUE(TestEngine().InspectContainer(spec.name).has_value());
}

// The seed is one cloud-init accepts: it boots, takes the key and runs the user data.
TEST(DockerDriverTest, CloudInitRunsTheSeed) {
  if (auto p = ImageProblem(kImage)) GTEST_SKIP() << *p;
  Driver driver;
  const std::string name = VmName("boot");
  OpResult r = driver.Create(CreateRequest(
      name, "null", R"(,"user_data":"#!/bin/bash\necho booted > /root/gpuprov-boot\n")"));
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r.error;
  const std::string id = r.Doc()->getObject("vm")->getValue<std::string>("id");
  const std::string address = r.Doc()->getObject("vm")->getValue<std::string>("public_ip");
  // cloud-init status --wait prints nothing for a while: a longer socket timeout.
  Engine patient(TestEngine().socket_path(), std::chrono::seconds(150));
  ExecResult wait = patient.Exec(
      id, {"/bin/sh", "-c", "timeout 120 cloud-init status --wait >/dev/null; cloud-init status"});
  EXPECT_TRUE(Contains(wait.out, "status: done")) << wait.out << wait.err;
  EXPECT_EQ(Cat(id, "/root/gpuprov-boot"), "booted\n");
  ExecResult system =
      patient.Exec(id, {"/bin/sh", "-c", "timeout 120 systemctl is-system-running --wait"});
  EXPECT_EQ(system.out, "running\n") << system.err;
  EXPECT_TRUE(Contains(Cat(id, "/root/.ssh/authorized_keys"), "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5"));
  EXPECT_EQ(TestEngine().Exec(id, {"hostname"}).out, name + "\n");

  // sshd answers on the VM's own address, port 22.
  Poco::Net::StreamSocket ssh;
  ssh.connect(Poco::Net::SocketAddress(address, 22), Poco::Timespan(5, 0));
  ssh.setReceiveTimeout(Poco::Timespan(10, 0));
  char banner[8] = {};
  int n = ssh.receiveBytes(banner, sizeof banner);
  EXPECT_EQ(std::string(banner, n > 0 ? n : 0), "SSH-2.0-");
}

// `gpuprov gc` (ABI 1.2): the containers of the driver's scope, with age and price; another
// scope's container and a container without gpuprov's labels are neither listed nor removed.
TEST(DockerDriverTest, ListResourcesAndDeleteResourceStayInTheScope) {
  if (auto p = ImageProblem(kImage)) GTEST_SKIP() << *p;
  const std::string scope_a = "gc-a-" + RunId(), scope_b = "gc-b-" + RunId();
  Driver a(R"({"endpoint":"","config":{"scope":")" + scope_a + R"("}})");
  Driver b(R"({"endpoint":"","config":{"scope":")" + scope_b + R"("}})");
  ASSERT_NE(a.vtable().list_resources, nullptr);
  ASSERT_NE(a.vtable().delete_resource, nullptr);
  const std::string in_a = VmName("gc-a"), in_b = VmName("gc-b");
  OpResult ca = a.Create(CreateRequest(in_a, "null"));
  ASSERT_EQ(ca.status, GPUPROV_STATUS_OK) << ca.error;
  OpResult cb = b.Create(CreateRequest(in_b, "null"));
  ASSERT_EQ(cb.status, GPUPROV_STATUS_OK) << cb.error;
  const std::string id_a = ca.Vm()->getValue<std::string>("id");
  const std::string id_b = cb.Vm()->getValue<std::string>("id");
  ContainerSpec foreign;
  foreign.name = "gpuprov-" + VmName("gc-foreign");
  foreign.image = kImage;
  foreign.cmd = {"/bin/true"};
  foreign.labels = {{testing::kRunLabel, RunId()}};
  const std::string id_foreign = TestEngine().CreateContainer(foreign);

  OpResult listed = a.Call(a.vtable().list_resources, "{}");
  ASSERT_EQ(listed.status, GPUPROV_STATUS_OK) << listed.error;
  Array::Ptr resources = listed.Doc()->getArray("resources");
  ASSERT_EQ(resources->size(), 1u) << listed.json;
  Object::Ptr r = resources->getObject(0);
  EXPECT_EQ(r->getValue<std::string>("kind"), "vm");
  EXPECT_EQ(r->getValue<std::string>("id"), id_a);
  EXPECT_EQ(r->getValue<std::string>("name"), "gpuprov-" + in_a);
  EXPECT_EQ(r->getArray("vm_names")->getElement<std::string>(0), in_a);
  EXPECT_EQ(r->getValue<std::string>("region"), "local");
  EXPECT_EQ(r->getValue<std::string>("created_at").size(), 20u) << listed.json;  // ...T..:..:..Z
  EXPECT_EQ(r->getValue<double>("price_per_hour"), 0.0);
  // The other scope's VM is not this driver's: get, list and delete do not see it either.
  EXPECT_EQ(a.Get(R"({"name":")" + in_b + R"("})").status, GPUPROV_STATUS_NOT_FOUND);
  EXPECT_EQ(a.List().Doc()->getArray("vms")->size(), 1u);
  // Without a scope, every gpuprov container of the daemon is listed (both, not the foreign one).
  Driver all;
  OpResult every = all.Call(all.vtable().list_resources, "{}");
  ASSERT_EQ(every.status, GPUPROV_STATUS_OK) << every.error;
  EXPECT_TRUE(Contains(every.json, id_a) && Contains(every.json, id_b)) << every.json;
  EXPECT_FALSE(Contains(every.json, id_foreign)) << every.json;

  for (const std::string& id : {id_b, id_foreign}) {
    OpResult refused = a.Call(a.vtable().delete_resource, R"({"kind":"vm","id":")" + id + R"("})");
    EXPECT_EQ(refused.status, GPUPROV_STATUS_INVALID_INPUT) << refused.json;
    EXPECT_TRUE(Contains(refused.error, "gpuprov leaves it alone")) << refused.error;
  }
  OpResult kind = a.Call(a.vtable().delete_resource, R"({"kind":"ssh_key","id":"1"})");
  EXPECT_EQ(kind.status, GPUPROV_STATUS_INVALID_INPUT);
  OpResult del = a.Call(a.vtable().delete_resource, R"({"kind":"vm","id":")" + id_a + R"("})");
  ASSERT_EQ(del.status, GPUPROV_STATUS_OK) << del.error;
  EXPECT_TRUE(del.Doc()->getValue<bool>("deleted"));
  OpResult again = a.Call(a.vtable().delete_resource, R"({"kind":"vm","id":")" + id_a + R"("})");
  ASSERT_EQ(again.status, GPUPROV_STATUS_OK) << again.error;
  EXPECT_FALSE(again.Doc()->getValue<bool>("deleted"));
  EXPECT_EQ(CountByName(in_a), 0u);
  EXPECT_EQ(CountByName(in_b), 1u);
  EXPECT_TRUE(TestEngine().InspectContainer(id_foreign).has_value());
}

TEST(DockerDriverTest, ABadScopeIsRefusedAtInit) {
  LoadedDriver bad(GPUPROV_DOCKER_DRIVER_PATH, R"({"endpoint":"","config":{"scope":"a b"}})");
  EXPECT_EQ(bad.init_status(), GPUPROV_STATUS_INVALID_INPUT);
  EXPECT_TRUE(Contains(bad.init_error(), "[clouds.docker] scope")) << bad.init_error();
}

}  // namespace
}  // namespace gpuprov::docker
