#include "vm_ports.h"

#include <gtest/gtest.h>

#include <string>
#include <memory>
#include <vector>

#include "cloud.h"
#include "driver_host.h"
#include "error.h"

namespace gpuprov {
namespace {

// ---- The decision, one test per row. ----

const std::vector<int> kSsh = {22};
const std::vector<int> kDirect = {22, 6443, 80, 443};

TEST(PlanPorts, ANewVmHasWhatCreateOpened) {
  PortsPlan p = PlanPorts(false, {}, kDirect, true);
  EXPECT_FALSE(p.call_open_ports);
  EXPECT_EQ(p.open_after, (std::vector<int>{22, 80, 443, 6443}));
}

TEST(PlanPorts, AnExistingPlainVmTurnedIntoADirectClusterGetsOpenPorts) {
  PortsPlan p = PlanPorts(true, kSsh, kDirect, true);
  EXPECT_TRUE(p.call_open_ports);
  EXPECT_EQ(p.open_after, (std::vector<int>{22, 80, 443, 6443}));
  EXPECT_NE(p.reason.find("6443, 80 and 443"), std::string::npos) << p.reason;
}

TEST(PlanPorts, AnExistingVmThatHasThemAlreadyIsLeftAlone) {
  PortsPlan p = PlanPorts(true, {22, 80, 443, 6443}, kDirect, true);
  EXPECT_FALSE(p.call_open_ports);
  // Turning Kubernetes off later closes nothing: the record keeps saying what is open.
  p = PlanPorts(true, {22, 80, 443, 6443}, kSsh, true);
  EXPECT_FALSE(p.call_open_ports);
  EXPECT_EQ(p.open_after, (std::vector<int>{22, 80, 443, 6443}));
}

TEST(PlanPorts, AnUnknownRecordCountsAsSshAlone) {
  EXPECT_FALSE(PlanPorts(true, {}, kSsh, true).call_open_ports);
  EXPECT_TRUE(PlanPorts(true, {}, kDirect, true).call_open_ports);
}

TEST(PlanPorts, ADriverWithoutOpenPortsIsNeverAsked) {
  PortsPlan p = PlanPorts(true, kSsh, kDirect, false);
  EXPECT_FALSE(p.call_open_ports);
  EXPECT_EQ(p.open_after, kSsh);  // only what is really open
}

TEST(PortsText, ReadsAsAList) {
  EXPECT_EQ(PortsText({22}), "22");
  EXPECT_EQ(PortsText({22, 443}), "22 and 443");
  EXPECT_EQ(PortsText(kDirect), "22, 6443, 80 and 443");
}

// ---- With a fake driver behind the real Cloud and driver host. ----

std::vector<std::string> g_open_ports_requests;

gpuprov_type_status FakeOp(gpuprov_type_driver*, gpuprov_type_json, gpuprov_type_json* out) {
  static const char kEmpty[] = "{}";
  *out = gpuprov_type_json{kEmpty, 2};
  return GPUPROV_STATUS_OK;
}
gpuprov_type_status FakeOpenPorts(gpuprov_type_driver*, gpuprov_type_json req,
                                  gpuprov_type_json* out) {
  g_open_ports_requests.emplace_back(req.data, req.len);
  return FakeOp(nullptr, req, out);
}
gpuprov_type_driver* FakeInit(const gpuprov_type_init_input*, gpuprov_type_status* st) {
  static char handle;
  *st = GPUPROV_STATUS_OK;
  return reinterpret_cast<gpuprov_type_driver*>(&handle);
}
void FakeDestroy(gpuprov_type_driver*) {}
const char* FakeLastError(gpuprov_type_driver*) { return ""; }

std::unique_ptr<Cloud> FakeCloud(bool open_ports_capability) {
  static const gpuprov_drv_vtable vt = {sizeof(gpuprov_drv_vtable), FakeInit, FakeDestroy,
                                        FakeLastError, FakeOp, FakeOp, FakeOp, FakeOp, FakeOp,
                                        FakeOp, FakeOpenPorts, nullptr, nullptr, nullptr};
  static gpuprov_type_driver_descriptor d = {sizeof(d), GPUPROV_DRIVER_MAGIC,
                                             GPUPROV_ABI_VERSION_MAJOR, 0, "fake", "1", "fake",
                                             0, &vt, nullptr, 0, nullptr};
  d.capabilities = GPUPROV_CAP_VM_LIFECYCLE |
                   (open_ports_capability ? GPUPROV_CAP_OPEN_PORTS : 0);
  return std::make_unique<Cloud>(DriverHost::OpenDescriptor(&d, "{}", {}));
}

CloudVm Vm() {
  CloudVm vm;
  vm.id = "r1/vm-7";
  vm.name = "box";
  vm.state = "running";
  return vm;
}

TEST(EnsurePortsOpen, CallsTheDriverWithTheNeededSetForAnExistingVm) {
  g_open_ports_requests.clear();
  auto cloud = FakeCloud(true);
  PortsPlan p = EnsurePortsOpen(*cloud, Vm(), true, kSsh, kDirect);
  EXPECT_TRUE(p.call_open_ports);
  ASSERT_EQ(g_open_ports_requests.size(), 1u);
  EXPECT_EQ(g_open_ports_requests[0],
            R"({"id":"r1/vm-7","name":"box","ports":[22,6443,80,443]})");
  EXPECT_EQ(p.open_after, (std::vector<int>{22, 80, 443, 6443}));
}

TEST(EnsurePortsOpen, NeverCallsTheDriverForANewVmOrOneThatHasThePorts) {
  g_open_ports_requests.clear();
  auto cloud = FakeCloud(true);
  EnsurePortsOpen(*cloud, Vm(), false, {}, kDirect);
  EnsurePortsOpen(*cloud, Vm(), true, {22, 80, 443, 6443}, kDirect);
  EnsurePortsOpen(*cloud, Vm(), true, kSsh, kSsh);
  EXPECT_TRUE(g_open_ports_requests.empty());
}

TEST(EnsurePortsOpen, ADriverWithoutTheCapabilityIsNotCalled) {
  g_open_ports_requests.clear();
  auto cloud = FakeCloud(false);
  PortsPlan p = EnsurePortsOpen(*cloud, Vm(), true, kSsh, kDirect);
  EXPECT_FALSE(p.call_open_ports);
  EXPECT_TRUE(g_open_ports_requests.empty());
  EXPECT_EQ(p.open_after, kSsh);
}

// ---- Sources (--allow-from) ----

PortSources Narrowed(std::vector<std::string> cidrs, std::vector<int> ports = {80, 443, 6443}) {
  PortSources s;
  s.allow_from = std::move(cidrs);
  s.narrowed_ports = std::move(ports);
  return s;
}

TEST(WantedSources, NarrowsTheWebAndApiPortsAndSshOnlyWhenAsked) {
  EXPECT_FALSE(WantedSources({}, true, kDirect).narrows());
  PortSources s = WantedSources({"10.0.0.0/8"}, false, kDirect);
  EXPECT_EQ(s.narrowed_ports, (std::vector<int>{80, 443, 6443}));
  s = WantedSources({"10.0.0.0/8"}, true, kDirect);
  EXPECT_EQ(s.narrowed_ports, (std::vector<int>{22, 80, 443, 6443}));
  EXPECT_FALSE(WantedSources({"10.0.0.0/8"}, false, kSsh).narrows());  // nothing to narrow
  EXPECT_EQ(SourcesText(Narrowed({"10.0.0.0/8", "192.0.2.0/24"})),
            "80, 443 and 6443 open only to 10.0.0.0/8 and 192.0.2.0/24");
}

TEST(PlanPorts, ANewVmHasTheSourcesCreateWasGiven) {
  PortsPlan p = PlanPorts(false, {}, {}, kDirect, Narrowed({"10.0.0.0/8"}), true);
  EXPECT_FALSE(p.call_open_ports);
  EXPECT_EQ(p.sources_after.allow_from, std::vector<std::string>{"10.0.0.0/8"});
}

TEST(PlanPorts, AnExistingVmWithOtherSourcesGetsOpenPortsWithEveryOpenPort) {
  PortsPlan p = PlanPorts(true, {22, 80, 443, 6443}, Narrowed({"127.0.0.1/32"}), kDirect,
                          Narrowed({"10.0.0.0/8"}), true);
  EXPECT_TRUE(p.call_open_ports);
  EXPECT_EQ(p.call_ports, (std::vector<int>{22, 80, 443, 6443}));
  EXPECT_EQ(p.sources_after.allow_from, std::vector<std::string>{"10.0.0.0/8"});
  EXPECT_NE(p.reason.find("its sources change from 80, 443 and 6443 open only to 127.0.0.1/32 to "
                          "80, 443 and 6443 open only to 10.0.0.0/8"),
            std::string::npos)
      << p.reason;
  // The same sources in another order: nothing to do.
  p = PlanPorts(true, {22, 80, 443, 6443}, Narrowed({"10.0.0.0/8", "192.0.2.0/24"}), kDirect,
                Narrowed({"192.0.2.0/24", "10.0.0.0/8"}), true);
  EXPECT_FALSE(p.call_open_ports);
  // Narrowed from open: called; a driver without open_ports keeps what the record says.
  EXPECT_TRUE(PlanPorts(true, {22, 80, 443, 6443}, {}, kDirect, Narrowed({"10.0.0.0/8"}), true)
                  .call_open_ports);
  p = PlanPorts(true, {22, 80, 443, 6443}, {}, kDirect, Narrowed({"10.0.0.0/8"}), false);
  EXPECT_FALSE(p.call_open_ports);
  EXPECT_FALSE(p.sources_after.narrows());
}

std::string g_open_ports_answer = "{}";
gpuprov_type_status AnsweringOpenPorts(gpuprov_type_driver*, gpuprov_type_json req,
                                       gpuprov_type_json* out) {
  g_open_ports_requests.emplace_back(req.data, req.len);
  *out = gpuprov_type_json{g_open_ports_answer.c_str(), g_open_ports_answer.size()};
  return GPUPROV_STATUS_OK;
}

std::unique_ptr<Cloud> AnsweringCloud() {
  static const gpuprov_drv_vtable vt = {sizeof(gpuprov_drv_vtable), FakeInit, FakeDestroy,
                                        FakeLastError, FakeOp, FakeOp, FakeOp, FakeOp, FakeOp,
                                        FakeOp, AnsweringOpenPorts, nullptr, nullptr, nullptr};
  static gpuprov_type_driver_descriptor d = {sizeof(d), GPUPROV_DRIVER_MAGIC,
                                             GPUPROV_ABI_VERSION_MAJOR, 0, "fake", "1", "fake",
                                             GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_OPEN_PORTS,
                                             &vt, nullptr, 0, nullptr};
  return std::make_unique<Cloud>(DriverHost::OpenDescriptor(&d, "{}", {}));
}

TEST(EnsurePortsOpen, SendsTheSourcesAndNeedsTheDriversConfirmation) {
  g_open_ports_requests.clear();
  auto cloud = AnsweringCloud();
  g_open_ports_answer = R"({"allow_from":["10.0.0.0/8"]})";
  PortsPlan p = EnsurePortsOpen(*cloud, Vm(), true, {22, 80, 443, 6443}, kDirect, {},
                                Narrowed({"10.0.0.0/8"}));
  EXPECT_TRUE(p.call_open_ports);
  ASSERT_EQ(g_open_ports_requests.size(), 1u);
  EXPECT_EQ(g_open_ports_requests[0],
            R"({"allow_from":["10.0.0.0/8"],"allow_from_ports":[80,443,6443],"id":"r1/vm-7",)"
            R"("name":"box","ports":[22,80,443,6443]})");

  // A driver that ignored the field (no echo) left the ports open to everyone: an error.
  g_open_ports_answer = "{}";
  try {
    EnsurePortsOpen(*cloud, Vm(), true, {22, 80, 443, 6443}, kDirect, {}, Narrowed({"10.0.0.0/8"}));
    ADD_FAILURE() << "an unconfirmed narrowing passed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("did not confirm allow_from"), std::string::npos)
        << e.what();
  }
  g_open_ports_answer = "{}";
}

}  // namespace
}  // namespace gpuprov
