// SPDX-License-Identifier: Apache-2.0
//
// The files clouds' own CLIs keep credentials and settings in: INI files (~/.aws/credentials,
// ~/.aws/config, gcloud's configurations/config_default) and YAML files (doctl's config.yaml,
// through yaml-cpp). Values read from them are secrets or settings; never log a value.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpuprov::drivers {

/// section -> key -> value. Keys are lower-cased, values trimmed.
using IniFile = std::map<std::string, std::map<std::string, std::string>>;

/// Parses INI text as the AWS CLI and gcloud read it: "[section]" headers (inner whitespace
/// runs become one space: "[profile   dev]" is "profile dev"), "key = value" lines, '#' and ';'
/// comment lines, later duplicates win. A key with an empty value followed by indented
/// "sub = value" lines (AWS's nested settings, e.g. "s3 =\n  max_concurrent_requests = 20")
/// gives keys "s3.max_concurrent_requests". Lines before the first section are ignored.
IniFile ParseIni(const std::string& text);

/// The value of section/key, or nullopt.
std::optional<std::string> IniValue(const IniFile& ini, const std::string& section,
                                    const std::string& key);

/// The scalar at `path` (map keys from the root) of a YAML document, or nullopt when the
/// text is not YAML, the path is absent or does not end at a scalar.
std::optional<std::string> YamlString(const std::string& yaml_text,
                                      const std::vector<std::string>& path);

}  // namespace gpuprov::drivers
