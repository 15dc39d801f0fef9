// SPDX-License-Identifier: Apache-2.0
//
// The Verda API operations the emulator serves, transcribed from the sources it follows: the
// official OpenAPI spec "Verda Cloud Public API" (openapi 3.1.0, info.version v1, changelog up
// to 2026-09-25), vendored in gurdasnijor/effect-verda at spec/verda.openapi.json, commit
// 805db07978f1267a1c6cb2db6d966c32ff923a03 ("V-SPEC" in plugins/verda/REFERENCE.md).
// Each row is one of the spec's `paths` entries: method, path (a {name} segment matches any one
// segment), its operationId, whether the spec marks it deprecated, its query parameters and
// those of them the spec marks deprecated (space-separated).
//
// The emulator answers only requests that match a row (anything else is the spec's not_found
// "Resource not found, or invalid path", 404), and the tests check that every request the
// verda driver sends matches a row that is not deprecated. Header-only and data-only, so the
// driver's tests can include it without linking the emulator.
#pragma once

#include <string_view>

namespace gpuprov::emulator {

struct VerdaSpecOperation {
  std::string_view method;
  std::string_view path;
  std::string_view operation_id;
  bool deprecated = false;
  std::string_view query = "";
  std::string_view deprecated_query = "";
};

// clang-format off
inline constexpr VerdaSpecOperation kVerdaSpecOperations[] = {
    {"POST",   "/v1/oauth2/token",                          "Oauth2Controller_getAccessToken"},
    {"GET",    "/v1/images",                                "ImagesController_getImageTypes", false, "instance_type"},
    {"GET",    "/v1/instances",                             "InstancesController_getInstances", false, "status computeId tag"},
    {"POST",   "/v1/instances",                             "InstancesController_deployInstance"},
    {"PUT",    "/v1/instances",                             "InstancesController_performActions"},
    {"GET",    "/v1/instances/{instance_id}",               "InstancesController_getInstanceById"},
    {"GET",    "/v1/instance-types",                        "InstanceTypesController_getInstanceTypes", false, "currency"},
    {"GET",    "/v1/instance-availability",                 "InstanceAvailabilityController_getAllAvailabilities", false, "is_spot location_code", "isSpot locationCode"},
    {"GET",    "/v1/instance-availability/{instance_type}", "InstanceAvailabilityController_checkAvailability", false, "is_spot location_code", "isSpot locationCode"},
    {"GET",    "/v1/ssh-keys",                              "SshkeysController_getKeys"},
    {"POST",   "/v1/ssh-keys",                              "SshkeysController_addKey"},
    {"DELETE", "/v1/ssh-keys",                              "SshkeysController_deleteKeys"},
    {"GET",    "/v1/ssh-keys/{sshKeyId}",                   "SshkeysController_getKey"},
    {"DELETE", "/v1/ssh-keys/{sshKeyId}",                   "SshkeysController_deleteKey"},
    {"GET",    "/v1/sshkeys",                               "DeprecatedSshkeysController_getKeys", true},
    {"POST",   "/v1/sshkeys",                               "DeprecatedSshkeysController_addKey", true},
    {"DELETE", "/v1/sshkeys",                               "DeprecatedSshkeysController_deleteKeys", true},
    {"GET",    "/v1/sshkeys/{sshKeyId}",                    "DeprecatedSshkeysController_getKey", true},
    {"DELETE", "/v1/sshkeys/{sshKeyId}",                    "DeprecatedSshkeysController_deleteKey", true},
    {"GET",    "/v1/scripts",                               "ScriptsController_getScripts", false, "page pageSize name orderBy orderDirection"},
    {"POST",   "/v1/scripts",                               "ScriptsController_addScript"},
    {"DELETE", "/v1/scripts",                               "ScriptsController_deleteScripts"},
    {"GET",    "/v1/scripts/{scriptId}",                    "ScriptsController_getScript"},
    {"DELETE", "/v1/scripts/{scriptId}",                    "ScriptsController_deleteKey"},
    {"GET",    "/v1/locations",                             "LocationsController_getVolumeTypes"},
    // Private networks: not in the spec above; the official Go SDK's PrivateNetworkService
    // (verda-cloud/verdacloud-sdk-go pkg/verda/private_networks.go) calls them. The operation
    // ids are its method names.
    {"GET",    "/v1/private-networks",                      "PrivateNetworkService.Get"},
    {"POST",   "/v1/private-networks",                      "PrivateNetworkService.Create"},
    {"GET",    "/v1/private-networks/{id}",                 "PrivateNetworkService.GetByID"},
    {"DELETE", "/v1/private-networks/{id}",                 "PrivateNetworkService.Delete"},
};
// clang-format on

/// True when `name` is one of the space-separated `names`.
inline bool VerdaSpecListHas(std::string_view names, std::string_view name) {
  while (!names.empty()) {
    const size_t space = names.find(' ');
    if (names.substr(0, space) == name) return true;
    names = space == std::string_view::npos ? std::string_view() : names.substr(space + 1);
  }
  return false;
}

/// The row a request matches (path without the query, no trailing slash), or nullptr.
inline const VerdaSpecOperation* FindVerdaSpecOperation(std::string_view method,
                                                        std::string_view path) {
  auto next = [](std::string_view& rest) {
    if (!rest.empty() && rest.front() == '/') rest.remove_prefix(1);
    const size_t slash = rest.find('/');
    std::string_view seg = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
    return seg;
  };
  for (const auto& op : kVerdaSpecOperations) {
    if (op.method != method) continue;
    std::string_view want = op.path;
    std::string_view got = path;
    bool match = true;
    while (match && (!want.empty() || !got.empty())) {
      const std::string_view w = next(want);
      const std::string_view g = next(got);
      const bool any = w.size() > 2 && w.front() == '{' && w.back() == '}';
      match = any ? !g.empty() : w == g;
    }
    if (match) return &op;
  }
  return nullptr;
}

}  // namespace gpuprov::emulator
