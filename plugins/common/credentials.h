// SPDX-License-Identifier: Apache-2.0
//
// Finding a cloud API token in the places users keep it: environment variables (in a given
// order) and, for DigitalOcean, doctl's config.yaml. Values are never logged; only where a
// token came from (`origin`) may be shown.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gpuprov::drivers {

struct Credential {
  std::string value;   ///< the secret; never log it
  std::string origin;  ///< where it came from, e.g. "$DIGITALOCEAN_TOKEN"; safe to show
};

/// Trims ASCII whitespace (tokens pasted into files often end in a newline).
std::string TrimSpace(const std::string& s);

/// The first variable of `names` that is set and non-blank, trimmed.
std::optional<Credential> CredentialFromEnv(const std::vector<std::string>& names);

/// A whole small file (<= 1 MiB), or nullopt when it does not exist or cannot be opened.
/// Throws sdk::DriverError (INVALID_INPUT, naming the path) when it is not a regular file (a
/// FIFO or a device in its place is never read) or is larger.
std::optional<std::string> ReadSmallFile(const std::string& path);

/// Where doctl keeps config.yaml, in the order searched: $XDG_CONFIG_HOME/doctl (when set),
/// $HOME/.config/doctl (Linux), $HOME/Library/Application Support/doctl (macOS).
std::vector<std::string> DoctlConfigPaths();
/// The first of DoctlConfigPaths() ("" if neither variable is set).
std::string DoctlConfigPath();

/// The token in a doctl config.yaml text for `context` ("" means the file's own `context:`
/// value, else "default"). Context "default" is the top-level `access-token`; any other is
/// `auth-contexts.<context>` (read with yaml-cpp).
std::optional<std::string> DoctlTokenFromYaml(const std::string& yaml_text,
                                              const std::string& context = "");

/// DoctlTokenFromYaml over the file at `path` (when empty: the first of DoctlConfigPaths()
/// that holds a token); origin names the file and context.
std::optional<Credential> CredentialFromDoctlConfig(const std::string& path = "",
                                                    const std::string& context = "");

}  // namespace gpuprov::drivers
