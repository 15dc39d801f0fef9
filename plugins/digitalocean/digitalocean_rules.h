// SPDX-License-Identifier: Apache-2.0
//
// The DigitalOcean-specific rules of the driver that need no network, kept apart so they are
// unit-tested directly: where the token comes from, names and tags,
// user-data limits, droplet states, and how an API error becomes a gpuprov status.
#pragma once

#include <Poco/JSON/Object.h>

#include <optional>
#include <string>
#include <vector>

#include "api_client.h"
#include "credentials.h"
#include "gpuprov/driver_abi.h"
#include "tags.h"
#include "vm_rules.h"

namespace gpuprov::digitalocean {

inline constexpr const char* kDefaultEndpoint = "https://api.digitalocean.com/v2";
/// Every droplet the driver makes carries the tag "gpuprov" (list filters on it); firewall
/// and SSH key are named "gpuprov-<vm>" and "gpuprov-<fingerprint hex>": the kit's names.
using drivers::kManagedTag;
using drivers::kResourcePrefix;
/// Prefixes of the tags that record a droplet's VM name and the SSH key gpuprov registered
/// (DigitalOcean tags are single words, not key=value).
inline constexpr const char* kVmTagPrefix = "gpuprov-vm:";
inline constexpr const char* kKeyTagPrefix = "gpuprov-key:";
/// DigitalOcean's limit for user_data (plain text).
inline constexpr size_t kMaxUserDataBytes = 64 * 1024;

/// Environment variables read for the token, in order (after config.token_env).
const std::vector<std::string>& TokenEnvVars();

/// The token: config.token_env (a variable name from config.toml), then $DIGITALOCEAN_TOKEN,
/// $DIGITALOCEAN_ACCESS_TOKEN (doctl), $DO_API_TOKEN, then config.token (config.toml), then
/// doctl's config.yaml (config.doctl_config, else $XDG_CONFIG_HOME/doctl/config.yaml or
/// ~/.config/doctl/config.yaml) for context config.doctl_context, else $DIGITALOCEAN_CONTEXT,
/// else the file's own context.
std::optional<drivers::Credential> ResolveToken(const Poco::JSON::Object::Ptr& config);

/// What to tell a user whose token is missing or refused.
std::string TokenHint();

/// Droplet names are host names: 1-63 of [A-Za-z0-9.-], starting and ending with a letter or
/// digit.
inline const drivers::VmNameRules kVmNameRules{
    .what = "a DigitalOcean droplet name", .max_length = 63, .punctuation = "-."};

/// A string in DigitalOcean's tag charset (letters, digits, ':', '-', '_'): others become '_',
/// cut to 255 characters.
std::string TagSafe(const std::string& s);
std::string VmTag(const std::string& vm_name);
std::string KeyTag(const std::string& key_id);
std::string FirewallName(const std::string& vm_name);

/// DigitalOcean's droplet status -> gpuprov state (new->pending, active->running,
/// off->stopped, archive->terminated, else error).
std::string StateOf(const std::string& droplet_status);

/// DigitalOcean's error body {"id","message"} -> "message (id)"; raw text cut short otherwise.
std::string ApiMessage(const std::string& body);

/// DigitalOcean's API as the kit's client reads it (api_client.h): the envelope (ApiMessage),
/// HTTP statuses with 422 read by Classify422 (with `capacity_messages`), the 401/403 hints.
drivers::ApiDialect DigitalOceanApi(const std::vector<std::string>& capacity_messages);
/// "Authorization: Bearer <token>", the token from ResolveToken(config).
drivers::ApiAuth DigitalOceanAuth(const Poco::JSON::Object::Ptr& config);

/// The status for a 422: CAPACITY when the message names unavailable size/region/capacity
/// (or one of `extra_capacity` substrings), QUOTA only for the account's limits ("droplet
/// limit", "exceed your", "quota"), else INVALID_INPUT (a field that is too long is not quota).
gpuprov_type_status Classify422(const std::string& message,
                                const std::vector<std::string>& extra_capacity = {});

}  // namespace gpuprov::digitalocean
