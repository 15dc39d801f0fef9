// The [clouds.NAME] table of config.toml checked against the keys the driver declares (ABI 1.1;
// string lists, tables and former names since 1.3): an unknown key or member, or a value of the
// wrong type, is refused before the driver is initialised, naming the file, the line, the key
// and what the driver accepts. A former name of a key is accepted with a warning naming the
// current one, and passed to the driver under the current name. `endpoint` is the host's own
// key (GPUPROV_<CLOUD>_ENDPOINT overrides it) and is always allowed, as a string. A driver that
// declares no keys (every ABI 1.0 driver) gets its table unchecked.
#pragma once

#include <string>
#include <vector>

#include "config.h"
#include "driver_host.h"

namespace gpuprov {

/// What CheckCloudSettings passes on: \a config with the driver's table under the current key
/// names, and one warning (file:line) per former name it used.
struct CheckedCloudSettings {
  Config config;
  std::vector<std::string> warnings;
};

/// Throws UsageError for the first key of config's [clouds.<driver.name>] table that \a driver
/// does not accept. Changes nothing when the driver declares no keys or the table is absent.
[[nodiscard]] CheckedCloudSettings CheckCloudSettings(const Config& config,
                                                      const DriverInfo& driver);

/// "endpoint, poll_interval_ms, region": every key the driver accepts, sorted, without former
/// names.
std::string AllowedKeysText(const DriverInfo& driver);

}  // namespace gpuprov
