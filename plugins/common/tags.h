// SPDX-License-Identifier: Apache-2.0
//
// Tags (labels) on what a driver makes: gpuprov's own pair, the user's tags from the create
// request, and making a text fit a cloud's tag or label character set.
#pragma once

#include <Poco/JSON/Object.h>

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace gpuprov::drivers {

/// The tag every VM gpuprov makes carries, with value "1", and the tag with its VM name
/// (docs/driver-protocol.md).
inline constexpr const char* kManagedTag = "gpuprov";
inline constexpr const char* kNameTag = "gpuprov-name";
/// The name prefix of what a driver makes for a VM: "gpuprov-<vm>" (firewall, key, group).
inline constexpr const char* kResourcePrefix = "gpuprov-";

/// {"gpuprov": "1", "gpuprov-name": vm_name}.
std::map<std::string, std::string> ManagedTags(const std::string& vm_name);

/// The request's "tags" as text key -> value, without gpuprov's own two, empty keys and keys
/// starting with one of `reserved_prefixes` (e.g. "aws:"); null values become "".
std::map<std::string, std::string> UserTags(const Poco::JSON::Object::Ptr& request,
                                            const std::vector<std::string>& reserved_prefixes = {});

/// `text` in a cloud's tag/label character set: letters and digits stay (lower-cased when
/// `lower_case`), characters of `punctuation` stay, every other becomes `replacement`; cut
/// to `max_length`.
std::string FitTag(std::string_view text, std::string_view punctuation, size_t max_length,
                   bool lower_case = false, char replacement = '_');

}  // namespace gpuprov::drivers
