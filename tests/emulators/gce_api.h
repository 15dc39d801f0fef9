// SPDX-License-Identifier: Apache-2.0
//
// What the emulator process does for the GCE emulator beyond the CloudApi interface: the
// service-account key it issues needs the server's URL (its token_uri), known only once the
// server listens.
#pragma once

#include <string>
#include <vector>

#include "cloud_api.h"

namespace gpuprov::emulator {

/// One method of the Compute Engine API discovery document (compute v1) that the emulator
/// serves: its `id`, `httpMethod` and `flatPath` (under /compute/v1/).
struct GceDiscoveryMethod {
  const char* id;
  const char* http_method;
  const char* flat_path;
};
/// Every method the emulator serves, transcribed from the discovery document (gce_api.cc).
const std::vector<GceDiscoveryMethod>& DiscoveryMethods();
/// The discovery id of the method a request is ("compute.instances.insert"), "" for none.
std::string GceDiscoveryMethodId(const std::string& http_method, const std::string& path);
/// "" when a request body has only fields of the method's request schema, each of its type;
/// else the message Google's JSON parser gives (unknown name, invalid value).
std::string GceCheckRequestBody(const std::string& method_id, const JsonObject& body);
/// The same check of a resource the emulator answers with ("Instance", "Firewall"): every
/// field one the schema has, of its type.
std::string GceCheckResource(const std::string& schema, const JsonObject& resource);

/// Called once the gcp server listens at base_url ("http://127.0.0.1:PORT"): when
/// GOOGLE_APPLICATION_CREDENTIALS named a file that did not exist at start, writes the
/// service-account key the emulator made there (mode 0600, token_uri = base_url + "/token").
/// Throws std::runtime_error when the file cannot be written. `api` must be the gcp API.
void GceListening(CloudApi* api, const std::string& base_url);

}  // namespace gpuprov::emulator
