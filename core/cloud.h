// Cloud: a typed C++ face over one initialised driver. It builds the JSON requests of
// docs/driver-protocol.md, parses the results into structs, and leaves transport (the C ABI) to
// Driver.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "driver_host.h"
#include "gpu_request.h"

namespace gpuprov {

struct Config;

struct CloudVm {
  std::string id;
  std::string name;
  std::string state;  // pending | running | stopped | terminated | error
  std::string public_ip;
  int ssh_port = 22;
  std::string ssh_user;
  std::string region;
  std::string instance_type;
  std::string message;
  std::map<int, int> ports;  // node port -> reachable port at public_ip
};

struct CloudOffer {
  std::string instance_type;
  std::string gpu_type;
  int gpu_count = 0;
  std::string region;
  double price_per_hour = 0;
};

struct CloudCheck {
  std::string account;
  /// Bytes of raw boot script (user data) the cloud accepts; drivers that do not say get the
  /// smallest limit among the clouds (EC2's 16 KB).
  std::size_t user_data_limit = 16384;
};

struct CreateRequest {
  std::string name;
  std::string region;
  std::string instance_type;
  std::optional<GpuRequest> gpu;
  std::string image;
  std::string ssh_public_key;
  std::string user_data;
  std::map<std::string, std::string> tags;
  std::vector<int> open_ports;
  std::optional<int> disk_gb;
};

class Cloud {
 public:
  /// Opens the driver for `cloud` with its settings from config.toml and the environment
  /// (GPUPROV_<CLOUD>_ENDPOINT overrides `endpoint`).
  static std::unique_ptr<Cloud> Open(const DriverHost& host, const std::string& cloud,
                                     const Config& config);
  explicit Cloud(std::unique_ptr<Driver> driver);

  const DriverInfo& info() const { return driver_->info(); }
  const std::string& name() const { return driver_->info().name; }

  /// The driver's check: a non-secret account description and the cloud's user-data limit.
  CloudCheck Check();
  std::vector<CloudOffer> Offers(const std::optional<GpuRequest>& gpu, const std::string& region);
  /// Returns the VM and whether it already existed.
  std::pair<CloudVm, bool> Create(const CreateRequest& request);
  /// nullopt when the VM is gone.
  std::optional<CloudVm> Get(const std::string& id, const std::string& name);
  std::vector<CloudVm> List();
  /// false when it was already gone.
  bool Delete(const std::string& id, const std::string& name);
  /// The driver's open_ports: opens `ports` of the VM to 0.0.0.0/0, adding only what is
  /// missing (drivers with GPUPROV_CAP_OPEN_PORTS).
  void OpenPorts(const std::string& id, const std::vector<int>& ports);

 private:
  std::unique_ptr<Driver> driver_;
};

/// The JSON given to a driver's init: {"endpoint": ..., "config": {...}}.
std::string DriverConfigJson(const std::string& cloud, const Config& config);

}  // namespace gpuprov
