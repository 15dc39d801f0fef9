// The example driver's own tests, built against an INSTALLED gpuprov SDK: the driver .so is
// loaded as gpuprov loads it and called through its C function table with the SDK's recording
// host (gpuprov/testing.hpp). GoogleTest here; the header itself needs no test framework.
#include <gtest/gtest.h>

#include <string>

#include "gpuprov/testing.hpp"

namespace {

namespace gt = gpuprov::sdk::testing;

// The built driver, compiled in by CMakeLists.txt.
constexpr char kDriver[] = HELLO_CLOUD_DRIVER_PATH;
constexpr char kConfig[] = R"({"endpoint": "", "config": {}})";

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(HelloCloud, DescribesItselfAsGpuprovReadsIt) {
  const gpuprov_type_driver_descriptor* d = gt::LoadDriverDescriptor(kDriver);
  EXPECT_STREQ(d->name, "hellocloud");
  EXPECT_EQ(d->abi_major, GPUPROV_ABI_VERSION_MAJOR);
  EXPECT_EQ(d->capabilities, GPUPROV_CAP_VM_LIFECYCLE);
}

TEST(HelloCloud, OffersItsOneGpuType) {
  gt::LoadedDriver driver(kDriver, kConfig);
  ASSERT_EQ(driver.init_status(), GPUPROV_STATUS_OK) << driver.init_error();
  const gt::CallResult r = driver.Offers(R"({"gpu": {"type": "L4", "count": 1}})");
  ASSERT_EQ(r.status, GPUPROV_STATUS_OK) << r;
  EXPECT_TRUE(Contains(r.json, R"("instance_type":"hello-gpu-1")")) << r.json;
}

TEST(HelloCloud, CreateSaysTheCloudIsFullAndReportsItsWait) {
  gt::LoadedDriver driver(kDriver, kConfig);
  const gt::CallResult r =
      driver.Create(R"({"name": "demo", "gpu": {"type": "L4", "count": 1}, "user_data": ""})");
  EXPECT_EQ(r.status, GPUPROV_STATUS_CAPACITY) << r;
  EXPECT_TRUE(Contains(r.error, "hello cloud is full")) << r.error;
  EXPECT_TRUE(Contains(driver.host().All(), "asking hello cloud for room")) << driver.host().All();
}

TEST(HelloCloud, CreateStopsWhenTheUserPressesCtrlC) {
  gt::LoadedDriver driver(kDriver, kConfig);
  driver.host().cancel = true;
  const gt::CallResult r = driver.Create(R"({"name": "demo", "gpu": null, "user_data": ""})");
  EXPECT_EQ(r.status, GPUPROV_STATUS_CANCELLED) << r;
}

TEST(HelloCloud, ABadVmNameIsInvalidInputNamingTheField) {
  gt::LoadedDriver driver(kDriver, kConfig);
  const gt::CallResult r = driver.Create(R"({"name": "Not_A_Name", "user_data": ""})");
  EXPECT_EQ(r.status, GPUPROV_STATUS_INVALID_INPUT) << r;
  EXPECT_TRUE(Contains(r.error, "hello cloud VM name")) << r.error;
}

TEST(HelloCloud, AnOperationItDoesNotHaveSaysSo) {
  gt::LoadedDriver driver(kDriver, kConfig);
  EXPECT_EQ(driver.OpenPorts(R"({"id": "x", "ports": [22]})").error,
            "the driver does not have this operation");
  EXPECT_EQ(driver.Get(R"({"name": "demo"})").status, GPUPROV_STATUS_NOT_FOUND);
  EXPECT_EQ(driver.List().json, R"({"vms":[]})");
}

}  // namespace
