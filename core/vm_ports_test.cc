#include "vm_ports.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cloud.h"
#include "driver_host.h"

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
                                        FakeOp, FakeOpenPorts, nullptr, nullptr};
  static gpuprov_type_driver_descriptor d = {sizeof(d), GPUPROV_DRIVER_MAGIC,
                                             GPUPROV_ABI_VERSION_MAJOR, 0, "fake", "1", "fake",
                                             0, &vt, nullptr, 0};
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

}  // namespace
}  // namespace gpuprov
