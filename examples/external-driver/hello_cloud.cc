// The smallest useful gpuprov driver: a cloud with one fixed VM type that is always full. Shows
// the SDK's shape (a plain class with identity constants and JSON-in/JSON-out methods, and one
// macro) and the driver kit every driver is written on: the catalogue lookup, the VM-name and
// user-data rules, a progress line, a wait that ends on Ctrl-C, and the offers result.
// hello_cloud_test.cc tests it with the SDK's fake host (gpuprov/testing.hpp).
#include <chrono>
#include <string>

#include "gpuprov/driver_kit/driver_kit.h"
#include "gpuprov/sdk.hpp"

namespace kit = gpuprov::drivers;

class HelloCloud {
 public:
  static constexpr const char* kName = "hellocloud";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription = "example third-party driver";
  static constexpr uint64_t kCapabilities = GPUPROV_CAP_VM_LIFECYCLE;

  explicit HelloCloud(const gpuprov::sdk::InitContext& ctx) : host_(ctx.host) {
    catalogue_.cloud = "hello cloud";
    catalogue_.rows = {{"hello-gpu-1", "L4", 1, true}};
    catalogue_.cpu_default = {"hello-1", "", 0, false};
  }

  std::string Check(const std::string&) { return R"({"account":"hello"})"; }

  std::string Offers(const std::string& request_json) {
    auto request = kit::json::ParseObject(request_json, "the offers request");
    kit::CatalogueChoice choice =
        kit::ChooseInstanceType(catalogue_, kit::ParseGpu(request), "");
    Poco::JSON::Array::Ptr offers = new Poco::JSON::Array();
    offers->add(kit::OfferJson({choice.row.instance_type, choice.row.gpu_type,
                                choice.row.gpu_count, "earth", 0.0, ""}));
    Poco::JSON::Object result;
    result.set("offers", offers);
    return kit::json::Stringify(result);
  }

  std::string Create(const std::string& request_json) {
    auto request = kit::json::ParseObject(request_json, "the create request");
    kit::ValidateVmName(kit::json::Str(request, "name"), {.what = "a hello cloud VM name", .max_length = 40});
    kit::CheckUserData(kit::json::Str(request, "user_data"), 16384, "hello cloud");
    kit::CatalogueChoice choice = kit::ChooseInstanceType(
        catalogue_, kit::ParseGpu(request), kit::json::Str(request, "instance_type"));
    // A real cloud would be polled here; the kit's waits end when the user presses Ctrl-C.
    host_.Progress("asking hello cloud for room for " + choice.row.instance_type);
    kit::SleepOrCancel(host_, std::chrono::milliseconds(100), "asking hello cloud for room");
    throw gpuprov::sdk::DriverError(GPUPROV_STATUS_CAPACITY,
                                    "hello cloud is full (no " + choice.row.instance_type + ")");
  }
  std::string Get(const std::string&) {
    throw gpuprov::sdk::DriverError(GPUPROV_STATUS_NOT_FOUND, "no such VM");
  }
  std::string List(const std::string&) { return R"({"vms":[]})"; }
  std::string Delete(const std::string&) { return R"({"deleted":false})"; }

 private:
  gpuprov::sdk::Host host_;
  kit::Catalogue catalogue_;
};

GPUPROV_DRIVER(HelloCloud)
