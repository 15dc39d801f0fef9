// The smallest useful gpuprov driver: a cloud with one fixed VM. Shows the SDK's shape: a plain
// class with identity constants and JSON-in/JSON-out methods, and one macro.
#include <string>

#include "gpuprov/sdk.hpp"

class HelloCloud {
 public:
  static constexpr const char* kName = "hellocloud";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription = "example third-party driver";
  static constexpr uint64_t kCapabilities = GPUPROV_CAP_VM_LIFECYCLE;

  explicit HelloCloud(const gpuprov::sdk::InitContext& ctx) : host_(ctx.host) {}

  std::string Check(const std::string&) { return R"({"account":"hello"})"; }
  std::string Offers(const std::string&) {
    return R"({"offers":[{"instance_type":"hello-1","region":"earth","gpu_count":0}]})";
  }
  std::string Create(const std::string&) {
    throw gpuprov::sdk::DriverError(GPUPROV_STATUS_CAPACITY, "hello cloud is full");
  }
  std::string Get(const std::string&) {
    throw gpuprov::sdk::DriverError(GPUPROV_STATUS_NOT_FOUND, "no such VM");
  }
  std::string List(const std::string&) { return R"({"vms":[]})"; }
  std::string Delete(const std::string&) { return R"({"deleted":false})"; }

 private:
  gpuprov::sdk::Host host_;
};

GPUPROV_DRIVER(HelloCloud)
