// SPDX-License-Identifier: Apache-2.0
//
// The gpuprov driver kit: what every cloud driver needs besides its cloud's own logic, in one
// static library (target gpuprov::driver_kit, installed with the SDK). Include this header, or
// the parts you use:
//   api_client.h      a cloud's JSON REST API: credential, error envelope and code table,
//                     hints, idempotent vs not, as data (ApiDialect)
//   api_transport.h   what any API client shares whatever its wire form: error table and
//                     hints, secrets kept out of error text, signed attempts with retries
//                     (ApiTransport; the AWS driver's EC2 Query/XML client is on it)
//   http_client.h     HTTPS client: TLS verified, http:// only to loopback, timeouts, retries
//                     with back-off, jitter and Retry-After, waits that end on cancel
//   retry_policy.h    the retry limits and the back-off computation
//   driver_status.h   HTTP status and cloud error code -> driver status, one table
//   wait.h            cancellable sleep, bounded poll with progress, driver-level back-off
//   pacer.h           spacing of calls for APIs with a published rate, per API key across
//                     processes (the host's pacer_dir), else process-wide
//   uri.h             path and query encoding
//   gpu_names.h       the one table of GPU model names and their spellings
//   catalogue.h       GPU request / instance_type / CPU default -> instance type
//   vm_rules.h        VM-name rules as data, user-data size and encoding checks, base64, gzip
//   config_files.h    INI (AWS's nested keys too) and YAML (yaml-cpp) credential files
//   credentials.h     tokens from environment variables and doctl's config
//   tags.h            gpuprov's tags, the user's tags, tag/label character sets
//   ssh_public_key.h  OpenSSH public key lines: checked, compared, MD5 fingerprint
//   standard_settings.h  the settings every driver names alike (retry, poll interval, delete
//                     wait, token variable): declared and read once
//   driver_request.h  request fields (ports, gpu, ssh key), offers and vm results
//   json_util.h       Poco::JSON helpers
//   text.h            Lower, Upper, Squash, StartsWith
// See docs/driver-protocol.md, "The driver kit".
#pragma once

#include "api_client.h"
#include "api_transport.h"
#include "catalogue.h"
#include "cluster_request.h"
#include "config_files.h"
#include "credentials.h"
#include "driver_request.h"
#include "driver_status.h"
#include "gpu_names.h"
#include "http_client.h"
#include "json_util.h"
#include "pacer.h"
#include "retry_policy.h"
#include "ssh_public_key.h"
#include "standard_settings.h"
#include "tags.h"
#include "text.h"
#include "uri.h"
#include "vm_rules.h"
#include "wait.h"

/// The names every driver source uses, in one using-directive:
///   using namespace gpuprov::drivers::prelude;
namespace gpuprov::drivers::prelude {
namespace json = gpuprov::drivers::json;
using gpuprov::sdk::DriverError;
using Poco::JSON::Array;
using Poco::JSON::Object;
}  // namespace gpuprov::drivers::prelude
