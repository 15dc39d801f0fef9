// The [clouds.NAME] table of config.toml checked against the keys the driver declares (ABI 1.1):
// an unknown key or a value of the wrong type is refused before the driver is initialised,
// naming the file, the line, the key and what the driver accepts. `endpoint` is the host's own
// key (GPUPROV_<CLOUD>_ENDPOINT overrides it) and is always allowed, as a string. A driver that
// declares no keys (every ABI 1.0 driver) gets its table unchecked.
#pragma once

#include <string>

#include "config.h"
#include "driver_host.h"

namespace gpuprov {

/// Throws UsageError for the first key of config's [clouds.<driver.name>] table that \a driver
/// does not accept. No-op when the driver declares no keys or the table is absent.
void CheckCloudSettings(const Config& config, const DriverInfo& driver);

/// "endpoint, poll_interval_ms, region": every key the driver accepts, sorted.
std::string AllowedKeysText(const DriverInfo& driver);

}  // namespace gpuprov
