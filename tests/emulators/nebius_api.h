// SPDX-License-Identifier: Apache-2.0
//
// The Nebius AI Cloud emulator: a gRPC server (plaintext h2c on 127.0.0.1), not an HTTP
// one, built from the driver's own protos (plugins/nebius/proto). One address serves every
// service the driver uses: IAM token exchange, compute (instances, disks, platforms,
// operations), vpc (subnets, security groups, security rules, operations). It is still a
// CloudApi for the control API (faults, counts, instances, reset, settings); its HTTP
// Serve path is never reached. See tests/emulators/README.md, "Nebius".
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cloud_api.h"

namespace gpuprov::emulator {

/// The environment variable naming the service-account credentials file the emulator
/// accepts JWTs of ({"subject-credentials": {alg, private-key, kid, iss, sub}}). A file that
/// does not exist is written by the emulator at start (mode 0600) with a new key.
inline constexpr const char* kNebiusCredentialsEnv = "NEBIUS_CREDENTIALS_FILE";

std::unique_ptr<CloudApi> MakeNebiusApi(InstanceBackend* backend, CloudOptions options);

/// One finished call for the request log: the gRPC method path
/// ("/nebius.compute.v1.InstanceService/Create"), the gRPC status code and the duration.
using NebiusCallLog =
    std::function<void(const std::string& method, int grpc_code, double duration_ms)>;

/// Starts the gRPC server of `api` (made by MakeNebiusApi) on host:port (0 = ephemeral) and
/// returns the bound port. Throws std::runtime_error when it cannot listen.
int NebiusStartServer(CloudApi* api, const std::string& host, int port, NebiusCallLog log);
/// Stops the server (calls in flight are cancelled after a short grace period).
void NebiusStopServer(CloudApi* api);

/// The HTTP status the request log shows for a gRPC status code (OK 200, NOT_FOUND 404, ...).
int NebiusHttpEquivalent(int grpc_code);

}  // namespace gpuprov::emulator
