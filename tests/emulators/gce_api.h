// SPDX-License-Identifier: Apache-2.0
//
// What the emulator process does for the GCE emulator beyond the CloudApi interface: the
// service-account key it issues needs the server's URL (its token_uri), known only once the
// server listens.
#pragma once

#include <string>

#include "cloud_api.h"

namespace gpuprov::emulator {

/// Called once the gcp server listens at base_url ("http://127.0.0.1:PORT"): when
/// GOOGLE_APPLICATION_CREDENTIALS named a file that did not exist at start, writes the
/// service-account key the emulator made there (mode 0600, token_uri = base_url + "/token").
/// Throws std::runtime_error when the file cannot be written. `api` must be the gcp API.
void GceListening(CloudApi* api, const std::string& base_url);

}  // namespace gpuprov::emulator
