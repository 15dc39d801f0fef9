#include "config.h"

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdio>
#include <sstream>
#include <toml.hpp>
#include <type_traits>
#include <vector>

#include "error.h"
#include "file_util.h"
#include "ttl.h"

namespace gpuprov {
namespace {

constexpr std::string_view kAllowedTopLevel = "[defaults], [clouds.<name>]";
constexpr std::string_view kAllowedDefaults =
    "kubernetes, cloud, region, gpus, ssh_key, k3s_version, k3s_sha256, k3s_download_url, "
    "nvidia_driver, nvidia_repo_url, nvidia_key_fingerprint, "
    "allow_from, allow_from_ssh, merge_kubeconfig, tunnel_first_port, confirm_above_per_hour, "
    "ttl, idle_ttl, smoke_test, smoke_test_image, spot, "
    "[defaults.timeouts]";
constexpr std::string_view kAllowedTimeouts =
    "boot_wait_seconds, ssh_wait_seconds, boot_install_wait_seconds, api_wait_seconds, "
    "ttl_check_seconds, offers_wait_seconds";
constexpr std::string_view kCloudNameRule =
    "cloud names may hold only lower-case letters a-z, digits, '_' and '-'";

std::string TypeName(const toml::value& v) {
  switch (v.type()) {
    case toml::value_t::boolean:
      return "a boolean";
    case toml::value_t::integer:
      return "an integer";
    case toml::value_t::floating:
      return "a float";
    case toml::value_t::string:
      return "a string";
    case toml::value_t::offset_datetime:
    case toml::value_t::local_datetime:
    case toml::value_t::local_date:
    case toml::value_t::local_time:
      return "a date/time";
    case toml::value_t::array:
      return "an array";
    case toml::value_t::table:
      return "a table";
    case toml::value_t::empty:
      break;
  }
  return "empty";
}

/// The offset of the first byte that does not belong to a well-formed UTF-8 sequence (RFC 3629:
/// no overlong forms, no surrogates, nothing above U+10FFFF), or npos when the text is UTF-8.
/// Written here because the check must run before toml11: its 3.7.1 reads outside the buffer
/// while reporting invalid UTF-8 inside a string (found by fuzzing, docs/fuzzing.md).
std::size_t FirstInvalidUtf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto b = static_cast<unsigned char>(text[i]);
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (b < 0x80) {
      ++i;
      continue;
    } else if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3;
      if (b == 0xE0) lo = 0xA0;  // overlong
      if (b == 0xED) hi = 0x9F;  // surrogates
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4;
      if (b == 0xF0) lo = 0x90;  // overlong
      if (b == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return i;
    }
    if (i + len > text.size()) return i;
    for (std::size_t k = 1; k < len; ++k) {
      const auto c = static_cast<unsigned char>(text[i + k]);
      const unsigned char min = k == 1 ? lo : 0x80, max = k == 1 ? hi : 0xBF;
      if (c < min || c > max) return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

/// How deep arrays and inline tables may nest in config.toml. gpuprov's own keys nest at most
/// two deep; toml11 3.7.1 parses nesting by recursion and overflows the stack at a few thousand
/// levels (found by fuzzing, docs/fuzzing.md), so deeper text is refused before toml11 sees it.
constexpr int kMaxTomlNesting = 32;

/// The fewest digits of a binary integer (`0b...`, underscores not counted) that toml11 3.7.1
/// cannot read: it doubles a signed 64-bit place value once per digit, and the 63rd doubling
/// overflows (undefined behaviour, found by fuzzing), whatever the digits are.
constexpr int kMinToml11OverflowingBinaryDigits = 63;

/// What the scan before toml11 found in config.toml text: nothing, or the offset of the first
/// `[` or `{` that opens nesting level kMaxTomlNesting + 1, or of the first binary integer with
/// kMinToml11OverflowingBinaryDigits digits or more.
struct Toml11Hazard {
  enum Kind { kNone, kTooDeep, kLongBinaryInteger };
  Kind kind = kNone;
  std::size_t offset = 0;
};

/// Scans outside strings and comments (TOML's four string forms and `#` comments); counts table
/// headers as nesting too (`[[x]]` is two levels), which close on their line.
Toml11Hazard FirstToml11Hazard(std::string_view text) {
  int depth = 0;
  std::size_t i = 0;
  const auto starts = [&](std::string_view token) { return text.substr(i, token.size()) == token; };
  const auto in_word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; };
  while (i < text.size()) {
    const char c = text[i];
    if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (starts("\"\"\"") || starts("'''")) {
      const std::string_view close = text.substr(i, 3);
      const bool escapes = close[0] == '"';
      i += 3;
      while (i < text.size() && !starts(close)) i += (escapes && text[i] == '\\') ? 2 : 1;
      // A closing delimiter may be followed by up to two more quotes that belong to the string.
      i += 3;
      while (i < text.size() && text[i] == close[0]) ++i;
      continue;
    } else if (c == '"' || c == '\'') {
      ++i;
      while (i < text.size() && text[i] != c && text[i] != '\n') {
        i += (c == '"' && text[i] == '\\') ? 2 : 1;
      }
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxTomlNesting) return {Toml11Hazard::kTooDeep, i};
    } else if (c == ']' || c == '}') {
      if (depth > 0) --depth;
    } else if (starts("0b") && (i == 0 || !in_word(text[i - 1]))) {
      const std::size_t start = i;
      int digits = 0;
      for (i += 2; i < text.size() && (text[i] == '0' || text[i] == '1' || text[i] == '_'); ++i) {
        if (text[i] != '_') ++digits;
      }
      if (digits >= kMinToml11OverflowingBinaryDigits) return {Toml11Hazard::kLongBinaryInteger, start};
      continue;
    }
    ++i;
  }
  return {};
}

class ConfigParser {
 public:
  explicit ConfigParser(const std::string& display_name) : file_(display_name) {}

  Config Parse(std::string_view text) {
    Config config;
    config.display_name = file_;
    config.loaded = true;
    const toml::value root = ParseToml(text);
    for (const auto& [key, value] : ByLine(root)) {
      if (key == "defaults") {
        if (!value->is_table()) throw TypeError("defaults", *value, "a table ([defaults])");
        ParseDefaults(*value, config.defaults);
      } else if (key == "clouds") {
        if (!value->is_table()) throw TypeError("clouds", *value, "a table ([clouds.<name>])");
        ParseClouds(*value, config.clouds, config.cloud_key_lines);
      } else if (value->is_table()) {
        throw UsageError(
            At(*value) + "unknown table [" + key + "]; allowed: " + std::string(kAllowedTopLevel),
            "check the spelling, or remove the table");
      } else {
        throw UsageError(At(*value) + "unknown key '" + key +
                             "' at the top level; allowed: " + std::string(kAllowedTopLevel),
                         "settings go inside [defaults] or [clouds.<name>]");
      }
    }
    return config;
  }

 private:
  using Entry = std::pair<std::string, const toml::value*>;

  toml::value ParseToml(std::string_view text) {
    if (const std::size_t bad = FirstInvalidUtf8(text); bad != std::string_view::npos) {
      const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(bad), '\n');
      char byte[8];
      std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(text[bad]));
      throw UsageError(file_ + ":" + std::to_string(line) + ": not UTF-8 text (byte " + byte +
                           "); a TOML file must be UTF-8",
                       "save the file as UTF-8, or remove that byte");
    }
    if (const Toml11Hazard hazard = FirstToml11Hazard(text); hazard.kind != Toml11Hazard::kNone) {
      const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(hazard.offset), '\n');
      const std::string at = file_ + ":" + std::to_string(line) + ": ";
      if (hazard.kind == Toml11Hazard::kTooDeep) {
        throw UsageError(at + "arrays or inline tables nested more than " + std::to_string(kMaxTomlNesting) + " deep",
                         "gpuprov's settings nest at most two deep: check the brackets on that line");
      }
      throw UsageError(at + "a binary integer (0b...) of " + std::to_string(kMinToml11OverflowingBinaryDigits) +
                           " or more digits, more than this TOML reader can hold",
                       "write the number in decimal; gpuprov's settings are far smaller");
    }
    std::istringstream in{std::string(text)};
    try {
      return toml::parse(in, file_);
    } catch (const toml::syntax_error& e) {
      throw SyntaxError(e);
    } catch (const toml::exception& e) {
      throw SyntaxError(e);
    } catch (const std::exception& e) {
      throw UsageError(file_ + ": cannot parse as TOML: " + e.what());
    }
  }

  /// toml11 reports "[error] toml::<function>: <reason>" then an excerpt of the line with a
  /// caret note. The reason and the note are kept; the excerpt is dropped, and the note too
  /// when the line names a secret-looking key, because either could show a secret value.
  Error SyntaxError(const toml::exception& e) {
    const std::string what = e.what();
    std::string reason = what.substr(0, what.find('\n'));
    if (reason.rfind("[error] ", 0) == 0) reason.erase(0, 8);
    if (reason.rfind("toml::", 0) == 0) {
      const std::size_t colon = reason.find(": ");
      if (colon != std::string::npos) reason.erase(0, colon + 2);
    }
    std::string note;
    const std::size_t caret = what.rfind("^--- ");
    if (caret != std::string::npos) {
      note = what.substr(caret + 5);
      note = note.substr(0, note.find('\n'));
    }
    const std::string& line = e.location().line_str();
    const std::string key_part = line.substr(0, line.find('='));
    std::string message =
        file_ + ":" + std::to_string(e.location().line()) + ": TOML syntax error: " + reason;
    if (!note.empty() && !IsSecretKeyName(key_part)) message += " (" + note + ")";
    return UsageError(message, "fix that line; the TOML format is described at https://toml.io");
  }

  std::string At(const toml::value& v) const {
    return file_ + ":" + std::to_string(v.location().line()) + ": ";
  }

  static std::vector<Entry> ByLine(const toml::value& table) {
    std::vector<Entry> entries;
    for (const auto& [key, value] : table.as_table()) entries.emplace_back(key, &value);
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
      const auto la = a.second->location(), lb = b.second->location();
      if (la.line() != lb.line()) return la.line() < lb.line();
      if (la.column() != lb.column()) return la.column() < lb.column();
      return a.first < b.first;
    });
    return entries;
  }

  Error TypeError(const std::string& key, const toml::value& v, std::string_view expected) {
    std::string hint;
    if (v.is_string() && expected.find("boolean") != std::string_view::npos) {
      hint = "write true or false without quotes";
    } else if (v.is_string() && expected.find("integer") != std::string_view::npos) {
      hint = "write the number without quotes";
    }
    return UsageError(
        At(v) + "key '" + key + "' must be " + std::string(expected) + ", not " + TypeName(v),
        hint);
  }

  /// The value in quotes, or a placeholder for keys that may hold secrets.
  static std::string Shown(const std::string& key, const std::string& value) {
    if (IsSecretKeyName(key)) return "(value hidden)";
    return "\"" + value + "\"";
  }

  std::string String(const std::string& key, const toml::value& v, bool allow_empty) {
    if (!v.is_string()) throw TypeError(key, v, "a string");
    std::string s = v.as_string().str;
    if (!allow_empty && s.empty()) {
      throw UsageError(At(v) + "key '" + key + "' must not be empty",
                       "remove the line to use the default");
    }
    return s;
  }

  void ParseDefaults(const toml::value& table, ConfigDefaults& out) {
    for (const auto& [key, value] : ByLine(table)) {
      const std::string full = "defaults." + key;
      const toml::value& v = *value;
      if (key == "kubernetes") {
        if (!v.is_boolean()) throw TypeError(full, v, "a boolean (true or false)");
        out.kubernetes = v.as_boolean();
      } else if (key == "cloud") {
        std::string cloud = String(full, v, false);
        if (!IsValidCloudName(cloud)) {
          throw UsageError(At(v) + "key '" + full + "': " + Shown(key, cloud) +
                               " is not a cloud name; " + std::string(kCloudNameRule),
                           "`gpuprov drivers` lists the clouds");
        }
        out.cloud = std::move(cloud);
      } else if (key == "region") {
        out.region = String(full, v, false);
      } else if (key == "gpus") {
        const std::string text = String(full, v, false);
        out.gpus = ParseGpuRequest(text, At(v) + "key '" + full + "'");
      } else if (key == "ssh_key") {
        out.ssh_key = String(full, v, false);
      } else if (key == "k3s_version") {  // Formats are checked with the flags' (provision_options).
        out.k3s_version = String(full, v, false);
      } else if (key == "k3s_sha256") {
        out.k3s_sha256 = String(full, v, false);
      } else if (key == "k3s_download_url") {
        out.k3s_download_url = String(full, v, false);
      } else if (key == "nvidia_driver") {
        out.nvidia_driver = String(full, v, false);
      } else if (key == "nvidia_repo_url") {
        out.nvidia_repo_url = String(full, v, false);
      } else if (key == "nvidia_key_fingerprint") {
        out.nvidia_key_fingerprint = String(full, v, false);
      } else if (key == "allow_from") {
        if (!v.is_array()) throw TypeError(full, v, "an array of CIDR strings");
        std::vector<std::string> cidrs;
        for (const toml::value& item : v.as_array()) {
          if (!item.is_string()) throw TypeError(full, item, "an array of CIDR strings");
          cidrs.push_back(item.as_string().str);
        }
        out.allow_from = std::move(cidrs);
      } else if (key == "allow_from_ssh" || key == "smoke_test" || key == "spot") {
        if (!v.is_boolean()) throw TypeError(full, v, "a boolean (true or false)");
        (key == "smoke_test" ? out.smoke_test
         : key == "spot"     ? out.spot
                             : out.allow_from_ssh) = v.as_boolean();
      } else if (key == "smoke_test_image") {
        out.smoke_test_image = String(full, v, false);
      } else if (key == "ttl" || key == "idle_ttl") {
        const long seconds =
            ParseDurationSeconds(String(full, v, false), At(v) + "key '" + full + "'");
        (key == "ttl" ? out.ttl_seconds : out.idle_ttl_seconds) = seconds;
      } else if (key == "merge_kubeconfig") {
        if (!v.is_boolean()) throw TypeError(full, v, "a boolean (true or false)");
        out.merge_kubeconfig = v.as_boolean();
      } else if (key == "tunnel_first_port") {
        if (!v.is_integer() || v.as_integer() < 1024 || v.as_integer() > 65535) {
          throw TypeError(full, v, "a port number from 1024 to 65535");
        }
        out.tunnel_first_port = static_cast<int>(v.as_integer());
      } else if (key == "confirm_above_per_hour") {
        const double price = v.is_floating()  ? v.as_floating()
                             : v.is_integer() ? static_cast<double>(v.as_integer())
                                              : -1;
        if (!(v.is_floating() || v.is_integer()) || !(price >= 0)) {
          throw TypeError(full, v, "a price in dollars per hour of 0 or more, e.g. 5.0");
        }
        out.confirm_above_per_hour = price;
      } else if (key == "timeouts") {
        if (!v.is_table()) throw TypeError(full, v, "a table ([defaults.timeouts])");
        ParseTimeouts(v, out.timeouts);
      } else {
        throw UsageError(At(v) + "unknown key '" + key +
                             "' in [defaults]; allowed: " + std::string(kAllowedDefaults),
                         "check the spelling; cloud-specific settings go in [clouds.<name>]");
      }
    }
  }

  int PositiveSeconds(const std::string& key, const toml::value& v) {
    if (!v.is_integer()) throw TypeError(key, v, "a positive integer (seconds)");
    const std::int64_t n = v.as_integer();
    if (n < 1 || n > INT_MAX) {
      throw UsageError(At(v) + "key '" + key + "' must be a positive integer (seconds), not " +
                       std::to_string(n));
    }
    return static_cast<int>(n);
  }

  void ParseTimeouts(const toml::value& table, ConfigTimeouts& out) {
    for (const auto& [key, value] : ByLine(table)) {
      const std::string full = "defaults.timeouts." + key;
      if (key == "boot_wait_seconds") {
        out.boot_wait_seconds = PositiveSeconds(full, *value);
      } else if (key == "ssh_wait_seconds") {
        out.ssh_wait_seconds = PositiveSeconds(full, *value);
      } else if (key == "boot_install_wait_seconds") {
        out.boot_install_wait_seconds = PositiveSeconds(full, *value);
      } else if (key == "api_wait_seconds") {
        out.api_wait_seconds = PositiveSeconds(full, *value);
      } else if (key == "ttl_check_seconds") {
        out.ttl_check_seconds = PositiveSeconds(full, *value);
      } else if (key == "offers_wait_seconds") {
        out.offers_wait_seconds = PositiveSeconds(full, *value);
      } else {
        throw UsageError(At(*value) + "unknown key '" + key +
                             "' in [defaults.timeouts]; allowed: " + std::string(kAllowedTimeouts),
                         "check the spelling");
      }
    }
  }

  void ParseClouds(const toml::value& table, std::map<std::string, CloudSettings>& out,
                   std::map<std::string, std::map<std::string, int>>& lines) {
    for (const auto& [cloud, value] : ByLine(table)) {
      if (!value->is_table()) {
        throw TypeError("clouds." + cloud, *value, "a table ([clouds." + cloud + "])");
      }
      if (!IsValidCloudName(cloud)) {
        throw UsageError(At(*value) + "table [clouds." + cloud + "]: '" + cloud +
                             "' is not a cloud name; " + std::string(kCloudNameRule),
                         "`gpuprov drivers` lists the clouds");
      }
      CloudSettings& settings = out[cloud];
      for (const auto& [key, setting] : ByLine(*value)) {
        const std::string full = "clouds." + cloud + "." + key;
        lines[cloud][key] = static_cast<int>(setting->location().line());
        if (!setting->is_table()) {
          settings[key] = std::visit([](auto v) -> CloudSettingValue { return v; },
                                     Scalar(full, *setting, kCloudValueTypes));
          continue;
        }
        CloudSettingTable table;
        for (const auto& [member, member_value] : ByLine(*setting)) {
          lines[cloud][key + "." + member] = static_cast<int>(member_value->location().line());
          table[member] = Scalar(full + "." + member, *member_value, kCloudMemberTypes);
        }
        settings[key] = std::move(table);
      }
    }
  }

  static constexpr std::string_view kCloudValueTypes =
      "a string, an integer, a boolean, an array of strings or a table";
  static constexpr std::string_view kCloudMemberTypes =
      "a string, an integer, a boolean or an array of strings";

  /// A cloud setting that is not a table; \a allowed names what the place takes otherwise.
  CloudSettingScalar Scalar(const std::string& full, const toml::value& v,
                            std::string_view allowed) {
    if (v.is_string()) return v.as_string().str;
    if (v.is_integer()) return static_cast<std::int64_t>(v.as_integer());
    if (v.is_boolean()) return v.as_boolean();
    if (!v.is_array()) throw TypeError(full, v, allowed);
    std::vector<std::string> items;
    for (const toml::value& item : v.as_array()) {
      if (!item.is_string()) {
        throw UsageError(At(item) + "key '" + full + "' must hold only strings, not " +
                             TypeName(item),
                         "put each item in quotes");
      }
      items.push_back(item.as_string().str);
    }
    return items;
  }

  std::string file_;
};

}  // namespace

bool IsSecretKeyName(std::string_view key) {
  std::string lower;
  lower.reserve(key.size());
  for (char c : key) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (std::string_view word : {"token", "secret", "key", "password"}) {
    if (lower.find(word) != std::string::npos) return true;
  }
  return false;
}

bool IsValidCloudName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

Config ParseConfig(std::string_view text, const std::string& display_name) {
  return ConfigParser(display_name).Parse(text);
}

Config LoadConfig(const std::filesystem::path& path) {
  std::optional<std::string> text = ReadFileIfExists(path, kConfigFileKind);
  if (!text) {
    Config config;
    config.display_name = path.string();
    return config;
  }
  return ParseConfig(*text, path.string());
}

namespace {

Poco::Dynamic::Var SettingJson(const CloudSettingScalar& value) {
  if (const auto* text = std::get_if<std::string>(&value)) return *text;
  if (const auto* number = std::get_if<std::int64_t>(&value)) return *number;
  if (const auto* flag = std::get_if<bool>(&value)) return *flag;
  Poco::JSON::Array::Ptr array = new Poco::JSON::Array;
  for (const auto& item : std::get<std::vector<std::string>>(value)) array->add(item);
  return array;
}

Poco::Dynamic::Var SettingJson(const CloudSettingValue& value) {
  if (std::optional<CloudSettingScalar> scalar = AsScalar(value)) return SettingJson(*scalar);
  Poco::JSON::Object::Ptr object = new Poco::JSON::Object(Poco::JSON_PRESERVE_KEY_ORDER);
  for (const auto& [key, member] : std::get<CloudSettingTable>(value)) {
    object->set(key, SettingJson(member));
  }
  return object;
}

}  // namespace

std::optional<CloudSettingScalar> AsScalar(const CloudSettingValue& value) {
  return std::visit(
      [](const auto& v) -> std::optional<CloudSettingScalar> {
        if constexpr (std::is_same_v<std::decay_t<decltype(v)>, CloudSettingTable>) {
          return std::nullopt;
        } else {
          return v;
        }
      },
      value);
}

std::string CloudSettingsJson(const Config& config, const std::string& cloud) {
  Poco::JSON::Object object(Poco::JSON_PRESERVE_KEY_ORDER);
  auto it = config.clouds.find(cloud);
  if (it != config.clouds.end()) {
    for (const auto& [key, value] : it->second) object.set(key, SettingJson(value));
  }
  std::ostringstream out;
  object.stringify(out);
  return out.str();
}

}  // namespace gpuprov
