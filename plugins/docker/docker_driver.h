// SPDX-License-Identifier: Apache-2.0
//
// The "docker" driver: a local test cloud where each VM is a container of the
// gpuprov test image (systemd as PID 1, OpenSSH, cloud-init with a NoCloud
// seed; tests/fixtures/testvm/). Each VM gets its own loopback address
// 127.77.X.Y with ports 22 and 6443 published on it, so the host sees
// "public IP, port 22" as on a real cloud. Fake GPUs are offered so GPU code
// paths run: the chosen GPU is written to /etc/gpuprov-testvm/gpu, where the
// image's fake nvidia-smi reads it.
//
// Settings (docs/driver-protocol.md, init): "endpoint" may be a unix:///path
// Docker socket (default: $DOCKER_HOST, else /var/run/docker.sock);
// config.image replaces the default image; config.scope labels the containers made and
// limits every look-up (list, get, delete, gc) to that label, so test runs can share a daemon.
#pragma once

#include <cstdint>
#include <string>

#include "docker_engine.h"
#include "gpuprov/sdk.hpp"

namespace gpuprov::docker {

class DockerDriver {
 public:
  static constexpr const char* kName = "docker";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription =
      "local test cloud: VMs are systemd containers of the gpuprov test image";
  static constexpr uint64_t kCapabilities = GPUPROV_CAP_VM_LIFECYCLE | GPUPROV_CAP_BOOT_CLOUD_INIT;
  /// How a VM learns its public address: a container on this machine: its address is 127.0.0.1 with a published port; REFERENCE.md §9.
  static constexpr const char* kNodeAddress = GPUPROV_NODE_ADDRESS_NONE;

  explicit DockerDriver(const gpuprov::sdk::InitContext& ctx);

  std::string Check(const std::string& request_json);
  std::string Offers(const std::string& request_json);
  std::string Create(const std::string& request_json);
  std::string Get(const std::string& request_json);
  std::string List(const std::string& request_json);
  std::string Delete(const std::string& request_json);
  /// The containers labelled io.gpuprov.managed=1 (and the scope, when set): `gpuprov gc`
  /// (ABI 1.2). A VM here is one container; nothing else is made for it.
  std::string ListResources(const std::string& request_json);
  /// Removes one of those by id ("vm"), inspected again; refused when it lacks the labels.
  std::string DeleteResource(const std::string& request_json);

 private:
  /// A client for the socket named by the endpoint setting, else $DOCKER_HOST
  /// (read on every call), else /var/run/docker.sock.
  Engine MakeEngine() const;

  gpuprov::sdk::Host host_;
  std::string endpoint_;       // "" or unix:///path
  std::string default_image_;  // config.image, else GPUPROV_TESTVM_IMAGE
  std::string scope_;          // config.scope: "" sees every gpuprov container of the daemon
};

}  // namespace gpuprov::docker
