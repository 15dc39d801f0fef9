#include "spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "candidates.h"
#include "cluster_nodes.h"
#include "config.h"
#include "error.h"
#include "file_util.h"
#include "ttl.h"

namespace gpuprov {
namespace {

constexpr std::string_view kAllowedFields =
    "name, cloud, region, gpus, kubernetes, image, instance_type, ssh_key, disk_gb, tags, "
    "k3s_version, k3s_sha256, k3s_download_url, nvidia_driver, nvidia_repo_url, "
    "nvidia_key_fingerprint, allow_from, allow_from_ssh, ttl, idle_ttl, smoke_test, "
    "smoke_test_image, spot, nodes";

std::string Lower(std::string_view s) {
  std::string lower;
  lower.reserve(s.size());
  for (char c : s) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}

std::string KindOf(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "nothing";
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Undefined:
      break;
  }
  return "undefined";
}

class SpecParser {
 public:
  explicit SpecParser(const std::string& display_name) : file_(display_name) {}

  Spec Parse(std::string_view text) {
    Spec spec;
    spec.display_name = file_;
    YAML::Node root;
    try {
      root = YAML::Load(std::string(text));
    } catch (const YAML::ParserException& e) {
      throw UsageError(
          file_ + ":" + std::to_string(e.mark.line + 1) + ": YAML syntax error: " + e.msg,
          "fix that line; a spec file is a mapping of fields, e.g. `name: gpu-box-1`");
    }
    if (root.IsNull()) return spec;
    if (!root.IsMap()) {
      throw UsageError(
          At(root) + "a spec file must be a mapping of fields, not " + KindOf(root),
          "write one `field: value` per line; allowed fields: " + std::string(kAllowedFields));
    }
    std::map<std::string, int> seen;  // field -> line
    for (auto it = root.begin(); it != root.end(); ++it) {
      const YAML::Node key = it->first;  // Copies: it-> yields a temporary.
      const YAML::Node value = it->second;
      if (!key.IsScalar()) {
        throw UsageError(At(key) + "field names must be plain words, not " + KindOf(key),
                         "allowed fields: " + std::string(kAllowedFields));
      }
      const std::string field = key.Scalar();
      const int line = key.Mark().line + 1;
      if (auto [prev, inserted] = seen.emplace(field, line); !inserted) {
        throw UsageError(At(key) + "field '" + field + "' is given twice (first on line " +
                             std::to_string(prev->second) + ")",
                         "keep one of them");
      }
      ParseField(field, key, value, spec);
    }
    return spec;
  }

 private:
  std::string At(const YAML::Node& node) const {
    const YAML::Mark mark = node.Mark();
    if (mark.is_null()) return file_ + ": ";
    return file_ + ":" + std::to_string(mark.line + 1) + ": ";
  }

  /// "spec.yaml:4: field 'gpus'"
  std::string Field(const YAML::Node& key, std::string_view field) const {
    return At(key) + "field '" + std::string(field) + "'";
  }

  std::string Scalar(std::string_view field, const YAML::Node& key, const YAML::Node& value,
                     std::string_view expected) {
    if (value.IsNull()) {
      throw UsageError(Field(key, field) + " has no value; it must be " + std::string(expected),
                       "give a value or remove the line");
    }
    if (!value.IsScalar()) {
      throw UsageError(Field(key, field) + " must be " + std::string(expected) + ", not " +
                       KindOf(value));
    }
    return value.Scalar();
  }

  std::string NonEmptyString(std::string_view field, const YAML::Node& key,
                             const YAML::Node& value) {
    std::string s = Scalar(field, key, value, "a string");
    if (s.empty()) {
      throw UsageError(Field(key, field) + " must not be empty", "give a value or remove the line");
    }
    return s;
  }

  /// A string, or a list of strings joined with commas (cloud and region candidates).
  std::string OneOrList(std::string_view field, const YAML::Node& key, const YAML::Node& value) {
    if (!value.IsSequence()) return NonEmptyString(field, key, value);
    if (value.size() == 0) {
      throw UsageError(Field(key, field) + " must not be an empty list",
                       "give a value or remove the line");
    }
    std::string joined;
    for (const auto& item : value) {
      if (!item.IsScalar() || item.Scalar().empty() ||
          item.Scalar().find(',') != std::string::npos) {
        throw UsageError(Field(key, field) + ": each entry must be one non-empty name, not " +
                             (item.IsScalar() ? "\"" + item.Scalar() + "\"" : KindOf(item)),
                         "e.g. " + std::string(field) + ": [a, b]");
      }
      joined += (joined.empty() ? "" : ",") + item.Scalar();
    }
    return joined;
  }

  void ParseField(const std::string& field, const YAML::Node& key, const YAML::Node& value,
                  Spec& spec) {
    if (field == "name") {
      std::string name = NonEmptyString(field, key, value);
      ValidateVmName(name, Field(key, field));
      spec.name = std::move(name);
    } else if (field == "cloud") {
      std::string cloud = OneOrList(field, key, value);
      ParseCloudList(cloud, Field(key, field));  // one name, a list, or any
      spec.cloud = std::move(cloud);
    } else if (field == "region") {
      std::string region = OneOrList(field, key, value);
      ParseRegionList(region, Field(key, field));
      spec.region = std::move(region);
    } else if (field == "gpus") {
      const std::string text = Scalar(field, key, value, "TYPE:COUNT, e.g. L4:1");
      spec.gpus = ParseGpuRequest(text, Field(key, field));
    } else if (field == "allow_from") {
      std::vector<std::string> cidrs;
      const YAML::Node list = value;
      if (!list.IsSequence()) {
        throw UsageError(Field(key, field) + " must be a list of CIDRs, not " + KindOf(value),
                         "write e.g. `allow_from: [203.0.113.0/24]`");
      }
      for (const YAML::Node& item : list) {
        if (!item.IsScalar() || item.Scalar().empty()) {
          throw UsageError(Field(key, field) + " must be a list of CIDRs, not " + KindOf(item),
                           "write e.g. `allow_from: [203.0.113.0/24]`");
        }
        cidrs.push_back(item.Scalar());
      }
      spec.allow_from = std::move(cidrs);
    } else if (field == "allow_from_ssh" || field == "smoke_test" || field == "spot") {
      const std::string lower = Lower(Scalar(field, key, value, "true or false"));
      std::optional<bool>& out = field == "smoke_test" ? spec.smoke_test
                                 : field == "spot"     ? spec.spot
                                                       : spec.allow_from_ssh;
      if (lower == "true" || lower == "yes" || lower == "on") {
        out = true;
      } else if (lower == "false" || lower == "no" || lower == "off") {
        out = false;
      } else {
        throw UsageError(Field(key, field) + " must be true or false");
      }
    } else if (field == "smoke_test_image") {
      spec.smoke_test_image = NonEmptyString(field, key, value);
    } else if (field == "kubernetes") {
      const std::string text = Scalar(field, key, value, "true or false");
      const std::string lower = Lower(text);
      if (lower == "true" || lower == "yes" || lower == "on") {
        spec.kubernetes = true;
      } else if (lower == "false" || lower == "no" || lower == "off") {
        spec.kubernetes = false;
      } else {
        throw UsageError(Field(key, field) + " must be true or false, not \"" + text + "\"");
      }
    } else if (field == "image") {
      spec.image = NonEmptyString(field, key, value);
    } else if (field == "instance_type") {
      spec.instance_type = NonEmptyString(field, key, value);
    } else if (field == "ssh_key") {
      spec.ssh_key = NonEmptyString(field, key, value);
    } else if (field == "disk_gb") {
      const std::string range = "a whole number of GB from " + std::to_string(kMinDiskGb) + " to " +
                                std::to_string(kMaxDiskGb);
      const std::string text = Scalar(field, key, value, range);
      const bool digits =
          !text.empty() && text.size() <= 6 &&
          std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
      const int gb = digits ? std::stoi(text) : -1;
      if (gb < kMinDiskGb || gb > kMaxDiskGb) {
        throw UsageError(Field(key, field) + " must be " + range + ", not \"" + text + "\"");
      }
      spec.disk_gb = gb;
    } else if (field == "nodes") {
      spec.nodes = ParseNodeCount(Scalar(field, key, value, "a whole number of VMs, e.g. 3"),
                                  Field(key, field));
    } else if (field == "tags") {
      spec.tags = ParseTags(key, value);
    } else if (field == "k3s_version") {  // Formats are checked with the flags' (provision_options).
      spec.k3s_version = NonEmptyString(field, key, value);
    } else if (field == "k3s_sha256") {
      spec.k3s_sha256 = NonEmptyString(field, key, value);
    } else if (field == "k3s_download_url") {
      spec.k3s_download_url = NonEmptyString(field, key, value);
    } else if (field == "nvidia_driver") {
      spec.nvidia_driver = NonEmptyString(field, key, value);
    } else if (field == "nvidia_repo_url") {
      spec.nvidia_repo_url = NonEmptyString(field, key, value);
    } else if (field == "nvidia_key_fingerprint") {
      spec.nvidia_key_fingerprint = NonEmptyString(field, key, value);
    } else if (field == "ttl" || field == "idle_ttl") {
      const long seconds = ParseDurationSeconds(
          Scalar(field, key, value, "a duration such as 8h, 90m or off"), Field(key, field));
      (field == "ttl" ? spec.ttl_seconds : spec.idle_ttl_seconds) = seconds;
    } else {
      throw UsageError(
          At(key) + "unknown field '" + field + "'; allowed: " + std::string(kAllowedFields),
          "check the spelling");
    }
  }

  std::map<std::string, std::string> ParseTags(const YAML::Node& key, const YAML::Node& value) {
    if (!value.IsMap()) {
      throw UsageError(
          Field(key, "tags") + " must be a mapping of names to strings, not " + KindOf(value),
          "write e.g. `tags: {team: ml, owner: alice}`");
    }
    std::map<std::string, std::string> tags;
    for (auto it = value.begin(); it != value.end(); ++it) {
      const YAML::Node tag_key = it->first;  // Copies: it-> yields a temporary.
      const YAML::Node tag_value = it->second;
      if (!tag_key.IsScalar() || tag_key.Scalar().empty()) {
        throw UsageError(At(tag_key) + "field 'tags': tag names must be non-empty strings");
      }
      const std::string name = tag_key.Scalar();
      const std::string where = "tags." + name;
      if (tag_value.IsNull()) {
        throw UsageError(Field(tag_key, where) + " has no value; it must be a string",
                         "write \"\" for an empty value");
      }
      if (!tag_value.IsScalar()) {
        throw UsageError(Field(tag_key, where) + " must be a string, not " + KindOf(tag_value));
      }
      if (!tags.emplace(name, tag_value.Scalar()).second) {
        throw UsageError(Field(tag_key, where) + " is given twice", "keep one of them");
      }
    }
    return tags;
  }

  std::string file_;
};

}  // namespace

void ValidateVmName(std::string_view name, std::string_view field_name) {
  bool ok = !name.empty() && name.size() <= 39 && name.front() >= 'a' && name.front() <= 'z' &&
            name.back() != '-';
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) ok = false;
  }
  if (!ok) {
    throw UsageError(std::string(field_name) + ": \"" + std::string(name) +
                     "\" is not a valid VM name; use 1 to 39 characters from a-z, 0-9 and '-', "
                     "starting with a letter and not ending with '-' (e.g. gpu-box-1)");
  }
}

Spec ParseSpec(std::string_view text, const std::string& display_name) {
  return SpecParser(display_name).Parse(text);
}

Spec LoadSpec(const std::filesystem::path& path) {
  std::optional<std::string> text;
  try {
    text = ReadFileIfExists(path, kSpecFileKind);
  } catch (const Error& e) {
    throw UsageError(std::string("spec file: ") + e.what(), "check the path given with -f");
  }
  if (!text) {
    throw UsageError("spec file '" + path.string() + "' does not exist",
                     "check the path given with -f");
  }
  return ParseSpec(*text, path.string());
}

}  // namespace gpuprov
