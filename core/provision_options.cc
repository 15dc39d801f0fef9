#include "provision_options.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

#include "candidates.h"
#include "error.h"
#include "installer_text.h"

namespace gpuprov {
namespace {

std::optional<std::string> EnvValue(const EnvLookup& env, const std::string& name) {
  std::optional<std::string> value = env(name);
  if (value && value->empty()) return std::nullopt;
  return value;
}

std::optional<bool> ParseEnvBool(const std::string& name, const std::string& text) {
  std::string lower;
  for (char c : text) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "true" || lower == "1" || lower == "yes") return true;
  if (lower == "false" || lower == "0" || lower == "no") return false;
  throw UsageError(name + ": \"" + text + "\" is not a boolean; use true/false, 1/0 or yes/no",
                   "unset " + name + " to use the default");
}

/// Fills \a out from the first source that has a value; leaves it untouched otherwise.
template <typename T, typename V>
bool Take(Resolved<T>& out, const std::optional<V>& value, Source source,
          const std::string& origin) {
  if (!value) return false;
  out.value = *value;
  out.source = source;
  out.origin = origin;
  return true;
}

/// "--k3s-version" as the user gave it: the flag, or the spec or config key.
std::string K3sFieldName(Source source, const std::string& flag, const std::string& key) {
  return source == Source::kFlag ? flag : key;
}

/// v1.31.4+k3s1 or v1.31.4-rc1+k3s1: v D.D.D [-rcD] +k3sD. Written out rather than with std::regex,
/// whose libstdc++ executor recurses once per character (a long input overflowed the stack in the
/// GCP driver, docs/fuzzing.md).
bool IsK3sReleaseTag(std::string_view tag) {
  std::size_t i = 0;
  const auto literal = [&](std::string_view text) {
    if (tag.substr(i, text.size()) != text) return false;
    i += text.size();
    return true;
  };
  const auto digits = [&] {
    const std::size_t start = i;
    while (i < tag.size() && tag[i] >= '0' && tag[i] <= '9') ++i;
    return i > start;
  };
  if (!(literal("v") && digits() && literal(".") && digits() && literal(".") && digits())) return false;
  if (literal("-rc") && !digits()) return false;
  return literal("+k3s") && digits() && i == tag.size();
}

/// Checks the k3s choice (the installer checks the same on the node; checking here refuses it
/// before anything is created): formats, and a sha256 for any version but the pinned one.
void CheckK3sChoice(ProvisionOptions& o) {
  const PinnedK3s& pinned = PinnedK3sRelease();
  if (const auto& v = o.k3s_version.value) {
    if (!IsK3sReleaseTag(*v)) {
      throw UsageError(K3sFieldName(o.k3s_version.source, "--k3s-version", "k3s_version") + ": \"" +
                           *v + "\" (" + DescribeOrigin(o.k3s_version) +
                           ") is not a k3s release tag like " + pinned.version,
                       "give a tag from https://github.com/k3s-io/k3s/releases, or drop it to "
                       "install " + pinned.version);
    }
  }
  if (auto& h = o.k3s_sha256.value) {
    if (h->size() != 64 || !std::all_of(h->begin(), h->end(), [](unsigned char c) { return std::isxdigit(c); })) {
      throw UsageError(K3sFieldName(o.k3s_sha256.source, "--k3s-sha256", "k3s_sha256") + " (" +
                           DescribeOrigin(o.k3s_sha256) + ") must be 64 hex digits",
                       "copy the hash from the release's sha256sum-amd64.txt or "
                       "sha256sum-arm64.txt");
    }
    for (char& c : *h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (auto& u = o.k3s_download_url.value) {
    const std::size_t scheme = u->rfind("https://", 0) == 0 ? 8 : u->rfind("http://", 0) == 0 ? 7 : 0;
    const auto space = [](unsigned char c) { return std::isspace(c) != 0; };
    if (scheme == 0 || u->size() == scheme || std::any_of(u->begin(), u->end(), space)) {
      throw UsageError(
          K3sFieldName(o.k3s_download_url.source, "--k3s-download-url", "k3s_download_url") +
              ": \"" + *u + "\" (" + DescribeOrigin(o.k3s_download_url) +
              ") is not an http:// or https:// URL",
          "give the base URL of a mirror of https://github.com/k3s-io/k3s/releases/download");
    }
    if (u->substr(scheme, u->find('/', scheme) - scheme).find('@') != std::string::npos) {
      throw UsageError(
          K3sFieldName(o.k3s_download_url.source, "--k3s-download-url", "k3s_download_url") +
              " (" + DescribeOrigin(o.k3s_download_url) +
              ") holds a user name or password: the URL is logged and sent in the boot script",
          "give a mirror that needs no credentials in the URL");
    }
    while (u->size() > 1 && u->back() == '/') u->pop_back();
  }
  const auto& v = o.k3s_version.value;
  if (v && *v != pinned.version && !o.k3s_sha256.value) {
    throw UsageError(
        K3sFieldName(o.k3s_version.source, "--k3s-version", "k3s_version") + " " + *v + " (" +
            DescribeOrigin(o.k3s_version) + ") has no known sha256: gpuprov pins the hashes of " +
            pinned.version + " only and never installs an unverified k3s binary",
        "add --k3s-sha256 HEX (or k3s_sha256) with the hash of that release's k3s binary for the "
        "VM's architecture, from its sha256sum-amd64.txt or sha256sum-arm64.txt; or drop "
        "--k3s-version to install " + pinned.version);
  }
}

/// True for a URL host that is this machine's loopback: localhost, 127.0.0.0/8, [::1].
bool IsLoopbackHost(std::string host) {
  if (host == "localhost") return true;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    in6_addr v6{};
    return inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &v6) == 1 &&
           IN6_IS_ADDR_LOOPBACK(&v6);
  }
  in_addr v4{};
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

/// Checks the NVIDIA apt repository choice (the installer checks the shape again on the node):
/// an https:// URL (http:// only to a loopback host), no credentials, a 40-digit fingerprint.
void CheckNvidiaRepo(ProvisionOptions& o) {
  if (auto& u = o.nvidia_repo_url.value) {
    const std::string field =
        K3sFieldName(o.nvidia_repo_url.source, "--nvidia-repo-url", "nvidia_repo_url");
    const std::size_t scheme = u->rfind("https://", 0) == 0 ? 8 : u->rfind("http://", 0) == 0 ? 7 : 0;
    const auto space = [](unsigned char c) { return std::isspace(c) != 0; };
    const std::string authority = scheme == 0 ? "" : u->substr(scheme, u->find('/', scheme) - scheme);
    if (scheme == 0 || authority.empty() || std::any_of(u->begin(), u->end(), space)) {
      throw UsageError(field + ": \"" + *u + "\" (" + DescribeOrigin(o.nvidia_repo_url) +
                           ") is not an https:// URL",
                       "give the base URL of a mirror of https://nvidia.github.io/libnvidia-container "
                       "(the one that serves gpgkey and stable/deb/)");
    }
    if (authority.find('@') != std::string::npos) {
      throw UsageError(field + " (" + DescribeOrigin(o.nvidia_repo_url) +
                           ") holds a user name or password: the URL is logged and sent in the "
                           "boot script",
                       "give a mirror that needs no credentials in the URL");
    }
    const std::size_t port = authority.rfind(':');
    const std::string host = port != std::string::npos && authority.find(']', port) == std::string::npos
                                 ? authority.substr(0, port)
                                 : authority;
    if (scheme == 7 && !IsLoopbackHost(host)) {
      throw UsageError(field + ": \"" + *u + "\" (" + DescribeOrigin(o.nvidia_repo_url) +
                           ") is plain http: the node would fetch the repository's signing key "
                           "without TLS",
                       "give the mirror's https:// URL (http:// is taken only for a loopback "
                       "host such as 127.0.0.1)");
    }
    while (u->size() > scheme + 1 && u->back() == '/') u->pop_back();
  }
  if (auto& f = o.nvidia_key_fingerprint.value) {
    std::string hex;
    for (unsigned char c : *f) {
      if (c != ' ') hex += static_cast<char>(std::toupper(c));
    }
    if (hex.size() != 40 ||
        !std::all_of(hex.begin(), hex.end(), [](unsigned char c) { return std::isxdigit(c); })) {
      throw UsageError(K3sFieldName(o.nvidia_key_fingerprint.source, "--nvidia-key-fingerprint",
                                    "nvidia_key_fingerprint") +
                           " (" + DescribeOrigin(o.nvidia_key_fingerprint) +
                           ") must be 40 hex digits: the repository key's fingerprint",
                       "copy it from `gpg --show-keys` of the repository's gpgkey (spaces are "
                       "taken); drop it for NVIDIA's own key");
    }
    *f = hex;
  }
}

std::string ExpandHome(const std::string& path, const EnvLookup& env) {
  if (path != "~" && path.rfind("~/", 0) != 0) return path;
  std::optional<std::string> home = EnvValue(env, "HOME");
  if (!home) return path;
  return *home + path.substr(1);
}

}  // namespace

const char* SourceName(Source source) {
  switch (source) {
    case Source::kFlag:
      return "flag";
    case Source::kSpec:
      return "spec";
    case Source::kEnv:
      return "env";
    case Source::kConfig:
      return "config";
    case Source::kDefault:
      return "default";
  }
  return "unknown";
}

std::string DescribeOrigin(Source source, const std::string& origin) {
  switch (source) {
    case Source::kFlag:
      return origin + " from the command line";
    case Source::kSpec:
    case Source::kEnv:
    case Source::kConfig:
      return "from " + origin;
    case Source::kDefault:
      break;
  }
  return "built-in default";
}

ProvisionOptions ResolveProvisionOptions(const ProvisionFlags& flags, const Spec& spec,
                                         const EnvLookup& env, const Config& config) {
  ProvisionOptions o;
  const std::string& spec_name = spec.display_name.empty() ? "the spec file" : spec.display_name;
  const std::string config_name =
      (config.display_name.empty() ? std::string("config.toml") : config.display_name);
  const std::string config_defaults = config_name + " [defaults]";
  const std::string config_timeouts = config_name + " [defaults.timeouts]";
  const ConfigDefaults& d = config.defaults;

  // Flags are checked here as well as by the CLI so every caller gets the same rules.
  if (flags.name) ValidateVmName(*flags.name, "--name");
  if (flags.cloud) ParseCloudList(*flags.cloud, "--cloud");  // one name, a list, or any
  if (flags.region) ParseRegionList(*flags.region, "--region");
  if (flags.disk_gb && (*flags.disk_gb < kMinDiskGb || *flags.disk_gb > kMaxDiskGb)) {
    throw UsageError("--disk-gb: " + std::to_string(*flags.disk_gb) +
                     " is out of range; give a whole number of GB from " +
                     std::to_string(kMinDiskGb) + " to " + std::to_string(kMaxDiskGb));
  }

  const std::optional<std::string> env_cloud = EnvValue(env, "GPUPROV_CLOUD");
  if (env_cloud) ParseCloudList(*env_cloud, "GPUPROV_CLOUD");
  const std::optional<std::string> env_region = EnvValue(env, "GPUPROV_REGION");
  std::optional<GpuRequest> env_gpus;
  if (std::optional<std::string> text = EnvValue(env, "GPUPROV_GPUS")) {
    env_gpus = ParseGpuRequest(*text, "GPUPROV_GPUS");
  }
  std::optional<bool> env_kubernetes;
  if (std::optional<std::string> text = EnvValue(env, "GPUPROV_KUBERNETES")) {
    env_kubernetes = ParseEnvBool("GPUPROV_KUBERNETES", *text);
  }
  const std::optional<std::string> env_image = EnvValue(env, "GPUPROV_IMAGE");

  // name: flag > spec; required.
  Take(o.name, flags.name, Source::kFlag, "--name") ||
      Take(o.name, spec.name, Source::kSpec, spec_name);
  if (o.name.source == Source::kDefault) {
    throw UsageError("missing --name: every VM needs a name",
                     "pass --name <name> (e.g. --name gpu-box-1) or set `name:` in the spec file");
  }

  o.cloud.value = "";  // none given: provision picks the only cloud with credentials (check)
  Take(o.cloud, flags.cloud, Source::kFlag, "--cloud") ||
      Take(o.cloud, spec.cloud, Source::kSpec, spec_name) ||
      Take(o.cloud, env_cloud, Source::kEnv, "GPUPROV_CLOUD") ||
      Take(o.cloud, d.cloud, Source::kConfig, config_defaults);

  Take(o.region, flags.region, Source::kFlag, "--region") ||
      Take(o.region, spec.region, Source::kSpec, spec_name) ||
      Take(o.region, env_region, Source::kEnv, "GPUPROV_REGION") ||
      Take(o.region, d.region, Source::kConfig, config_defaults);

  Take(o.gpus, flags.gpus, Source::kFlag, "--gpus") ||
      Take(o.gpus, spec.gpus, Source::kSpec, spec_name) ||
      Take(o.gpus, env_gpus, Source::kEnv, "GPUPROV_GPUS") ||
      Take(o.gpus, d.gpus, Source::kConfig, config_defaults);

  o.kubernetes.value = true;
  const std::string k8s_flag = flags.kubernetes.value_or(true) ? "--k8s" : "--no-k8s";
  Take(o.kubernetes, flags.kubernetes, Source::kFlag, k8s_flag) ||
      Take(o.kubernetes, spec.kubernetes, Source::kSpec, spec_name) ||
      Take(o.kubernetes, env_kubernetes, Source::kEnv, "GPUPROV_KUBERNETES") ||
      Take(o.kubernetes, d.kubernetes, Source::kConfig, config_defaults);

  Take(o.image, flags.image, Source::kFlag, "--image") ||
      Take(o.image, spec.image, Source::kSpec, spec_name) ||
      Take(o.image, env_image, Source::kEnv, "GPUPROV_IMAGE");

  Take(o.instance_type, flags.instance_type, Source::kFlag, "--instance-type") ||
      Take(o.instance_type, spec.instance_type, Source::kSpec, spec_name);

  Take(o.ssh_key, flags.ssh_key, Source::kFlag, "--ssh-key") ||
      Take(o.ssh_key, spec.ssh_key, Source::kSpec, spec_name) ||
      Take(o.ssh_key, d.ssh_key, Source::kConfig, config_defaults);
  if (o.ssh_key.value) o.ssh_key.value = ExpandHome(*o.ssh_key.value, env);

  Take(o.disk_gb, flags.disk_gb, Source::kFlag, "--disk-gb") ||
      Take(o.disk_gb, spec.disk_gb, Source::kSpec, spec_name);

  if (spec.tags) o.tags = *spec.tags;
  for (const auto& [key, value] : flags.tags) o.tags[key] = value;
  for (const auto& [key, value] : o.tags) {
    if (IsReservedTag(key)) {
      throw UsageError(std::string(flags.tags.count(key) ? "--tag " : "tags in " + spec_name + ": ") +
                           "'" + key + "' is a tag gpuprov sets itself",
                       "choose another key");
    }
  }

  o.boot_wait_seconds.value = kDefaultBootWaitSeconds;
  Take(o.boot_wait_seconds, d.timeouts.boot_wait_seconds, Source::kConfig, config_timeouts);
  o.ssh_wait_seconds.value = kDefaultSshWaitSeconds;
  Take(o.ssh_wait_seconds, d.timeouts.ssh_wait_seconds, Source::kConfig, config_timeouts);
  o.boot_install_wait_seconds.value = kDefaultBootInstallWaitSeconds;
  Take(o.boot_install_wait_seconds, d.timeouts.boot_install_wait_seconds, Source::kConfig,
       config_timeouts);
  o.api_wait_seconds.value = kDefaultApiWaitSeconds;
  Take(o.api_wait_seconds, d.timeouts.api_wait_seconds, Source::kConfig, config_timeouts);
  o.ttl_check_seconds.value = kDefaultTtlCheckSeconds;
  Take(o.ttl_check_seconds, d.timeouts.ttl_check_seconds, Source::kConfig, config_timeouts);

  Take(o.ttl_seconds, flags.ttl_seconds, Source::kFlag, "--ttl") ||
      Take(o.ttl_seconds, spec.ttl_seconds, Source::kSpec, spec_name) ||
      Take(o.ttl_seconds, d.ttl_seconds, Source::kConfig, config_defaults);
  Take(o.idle_ttl_seconds, flags.idle_ttl_seconds, Source::kFlag, "--idle-ttl") ||
      Take(o.idle_ttl_seconds, spec.idle_ttl_seconds, Source::kSpec, spec_name) ||
      Take(o.idle_ttl_seconds, d.idle_ttl_seconds, Source::kConfig, config_defaults);

  Take(o.k3s_version, flags.k3s_version, Source::kFlag, "--k3s-version") ||
      Take(o.k3s_version, spec.k3s_version, Source::kSpec, spec_name) ||
      Take(o.k3s_version, d.k3s_version, Source::kConfig, config_defaults);
  Take(o.k3s_sha256, flags.k3s_sha256, Source::kFlag, "--k3s-sha256") ||
      Take(o.k3s_sha256, spec.k3s_sha256, Source::kSpec, spec_name) ||
      Take(o.k3s_sha256, d.k3s_sha256, Source::kConfig, config_defaults);
  Take(o.k3s_download_url, flags.k3s_download_url, Source::kFlag, "--k3s-download-url") ||
      Take(o.k3s_download_url, spec.k3s_download_url, Source::kSpec, spec_name) ||
      Take(o.k3s_download_url, d.k3s_download_url, Source::kConfig, config_defaults);
  CheckK3sChoice(o);
  o.nvidia_driver.value = "image";
  Take(o.nvidia_driver, flags.nvidia_driver, Source::kFlag, "--nvidia-driver") ||
      Take(o.nvidia_driver, spec.nvidia_driver, Source::kSpec, spec_name) ||
      Take(o.nvidia_driver, d.nvidia_driver, Source::kConfig, config_defaults);
  Take(o.nvidia_repo_url, flags.nvidia_repo_url, Source::kFlag, "--nvidia-repo-url") ||
      Take(o.nvidia_repo_url, spec.nvidia_repo_url, Source::kSpec, spec_name) ||
      Take(o.nvidia_repo_url, d.nvidia_repo_url, Source::kConfig, config_defaults);
  Take(o.nvidia_key_fingerprint, flags.nvidia_key_fingerprint, Source::kFlag,
       "--nvidia-key-fingerprint") ||
      Take(o.nvidia_key_fingerprint, spec.nvidia_key_fingerprint, Source::kSpec, spec_name) ||
      Take(o.nvidia_key_fingerprint, d.nvidia_key_fingerprint, Source::kConfig, config_defaults);
  CheckNvidiaRepo(o);
  if (o.nvidia_driver.value != "image" && o.nvidia_driver.value != "install") {
    throw UsageError(K3sFieldName(o.nvidia_driver.source, "--nvidia-driver", "nvidia_driver") +
                         ": \"" + o.nvidia_driver.value + "\" is not a choice" +
                         (o.nvidia_driver.source == Source::kFlag
                              ? std::string()
                              : " (" + DescribeOrigin(o.nvidia_driver) + ")"),
                     "give image (the default: use the image's driver, fail without one) or "
                     "install (add the distribution's server driver, then reboot once)");
  }

  std::optional<std::vector<std::string>> flag_allow;
  if (!flags.allow_from.empty()) flag_allow = flags.allow_from;
  Take(o.allow_from, flag_allow, Source::kFlag, "--allow-from") ||
      Take(o.allow_from, spec.allow_from, Source::kSpec, spec_name) ||
      Take(o.allow_from, d.allow_from, Source::kConfig, config_defaults);
  if (auto& cidrs = o.allow_from.value) {
    const std::string field = o.allow_from.source == Source::kFlag
                                  ? std::string("--allow-from")
                                  : "allow_from (" + DescribeOrigin(o.allow_from) + ")";
    if (cidrs->empty()) {
      throw UsageError(field + " is an empty list: nobody could reach the VM's ports",
                       "list at least one CIDR, e.g. [\"203.0.113.0/24\"], or remove it to keep "
                       "the ports open to everyone");
    }
    std::vector<std::string> canonical;
    for (const auto& c : *cidrs) {
      std::string one = CanonicalCidr(c, field);
      if (std::find(canonical.begin(), canonical.end(), one) == canonical.end()) {
        canonical.push_back(one);
      }
    }
    *cidrs = canonical;
  }
  Take(o.allow_from_ssh, flags.allow_from_ssh, Source::kFlag, "--allow-from-ssh") ||
      Take(o.allow_from_ssh, spec.allow_from_ssh, Source::kSpec, spec_name) ||
      Take(o.allow_from_ssh, d.allow_from_ssh, Source::kConfig, config_defaults);
  if (o.allow_from_ssh.value.value_or(false) && !o.allow_from.value) {
    throw UsageError(std::string(o.allow_from_ssh.source == Source::kFlag
                                     ? "--allow-from-ssh"
                                     : "allow_from_ssh (" + DescribeOrigin(o.allow_from_ssh) + ")") +
                         " needs sources to narrow SSH to",
                     "add --allow-from CIDR (repeatable) or allow_from = [...]");
  }
  o.smoke_test.value = true;
  Take(o.smoke_test, flags.smoke_test, Source::kFlag, "--no-smoke-test") ||
      Take(o.smoke_test, spec.smoke_test, Source::kSpec, spec_name) ||
      Take(o.smoke_test, d.smoke_test, Source::kConfig, config_defaults);
  Take(o.spot, flags.spot, Source::kFlag, "--spot") ||
      Take(o.spot, spec.spot, Source::kSpec, spec_name) ||
      Take(o.spot, d.spot, Source::kConfig, config_defaults);
  o.smoke_test_image.value = kDefaultSmokeTestImage;
  Take(o.smoke_test_image, spec.smoke_test_image, Source::kSpec, spec_name) ||
      Take(o.smoke_test_image, d.smoke_test_image, Source::kConfig, config_defaults);
  o.nodes.value = 1;
  Take(o.nodes, flags.nodes, Source::kFlag, "--nodes") ||
      Take(o.nodes, spec.nodes, Source::kSpec, spec_name);
  return o;
}

std::string CanonicalCidr(const std::string& text, const std::string& field) {
  const std::string example =
      "give a network such as 203.0.113.0/24, 198.51.100.7/32 or 2001:db8::/48";
  const size_t slash = text.find('/');
  const std::string address = text.substr(0, slash);
  const bool v6 = address.find(':') != std::string::npos;
  const int max_bits = v6 ? 128 : 32;
  int bits = max_bits;
  if (slash != std::string::npos) {
    const std::string len = text.substr(slash + 1);
    if (len.empty() || len.size() > 3 ||
        !std::all_of(len.begin(), len.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        std::stoi(len) > max_bits) {
      throw UsageError(field + ": \"" + text + "\" has no valid prefix length (0 to " +
                           std::to_string(max_bits) + " after the '/')",
                       example);
    }
    bits = std::stoi(len);
  }
  std::array<unsigned char, 16> raw{};
  if (inet_pton(v6 ? AF_INET6 : AF_INET, address.c_str(), raw.data()) != 1) {
    throw UsageError(field + ": \"" + text + "\" is not an IPv4 or IPv6 CIDR", example);
  }
  const int bytes = max_bits / 8;
  std::array<unsigned char, 16> net = raw;
  for (int i = 0; i < bytes; ++i) {
    const int keep = std::clamp(bits - i * 8, 0, 8);
    net[i] = static_cast<unsigned char>(raw[i] & (keep == 0 ? 0 : (0xff << (8 - keep)) & 0xff));
  }
  char buffer[INET6_ADDRSTRLEN] = {};
  inet_ntop(v6 ? AF_INET6 : AF_INET, net.data(), buffer, sizeof buffer);
  const std::string canonical = std::string(buffer) + "/" + std::to_string(bits);
  if (net != raw) {
    throw UsageError(field + ": \"" + text + "\" has address bits set past its /" +
                         std::to_string(bits) + " prefix",
                     "write the network " + canonical + ", or a /" + std::to_string(max_bits) +
                         " for that one address");
  }
  return canonical;
}

namespace {

std::string Line(const std::string& key, const std::string& value, const std::string& origin) {
  return key + "=" + value + " (" + origin + ")";
}

template <typename T>
std::string LineOf(const std::string& key, const Resolved<std::optional<T>>& r,
                   const std::string& unset_text) {
  std::string value = unset_text;
  if (r.value) {
    if constexpr (std::is_same_v<T, GpuRequest>) {
      value = ToString(*r.value);
    } else if constexpr (std::is_same_v<T, int>) {
      value = std::to_string(*r.value);
    } else {
      value = *r.value;
    }
  }
  return Line(key, value, DescribeOrigin(r));
}

}  // namespace

std::vector<std::string> DescribeProvisionOptions(const ProvisionOptions& o) {
  std::vector<std::string> lines;
  lines.push_back(Line("name", o.name.value, DescribeOrigin(o.name)));
  lines.push_back(Line("cloud", o.cloud.value, DescribeOrigin(o.cloud)));
  lines.push_back(LineOf("region", o.region, "(driver default)"));
  lines.push_back(LineOf("gpus", o.gpus, "none"));
  lines.push_back(Line("kubernetes",
                       o.kubernetes.source == Source::kDefault
                           ? std::string("true where the cloud can host it")
                           : std::string(o.kubernetes.value ? "true" : "false"),
                       DescribeOrigin(o.kubernetes)));
  lines.push_back(LineOf("image", o.image, "(driver default)"));
  lines.push_back(LineOf("instance_type", o.instance_type, "(chosen from gpus)"));
  lines.push_back(LineOf("ssh_key", o.ssh_key, "(gpuprov's own key)"));
  lines.push_back(LineOf("disk_gb", o.disk_gb, "(driver default)"));
  std::string tags;
  for (const auto& [key, value] : o.tags) {
    if (!tags.empty()) tags += ",";
    tags += key + ":" + value;
  }
  lines.push_back("tags=" + (tags.empty() ? std::string("(none)") : tags));
  lines.push_back(Line("boot_wait_seconds", std::to_string(o.boot_wait_seconds.value),
                       DescribeOrigin(o.boot_wait_seconds)));
  lines.push_back(Line("ssh_wait_seconds", std::to_string(o.ssh_wait_seconds.value),
                       DescribeOrigin(o.ssh_wait_seconds)));
  lines.push_back(Line("boot_install_wait_seconds",
                       std::to_string(o.boot_install_wait_seconds.value),
                       DescribeOrigin(o.boot_install_wait_seconds)));
  lines.push_back(Line("api_wait_seconds", std::to_string(o.api_wait_seconds.value),
                       DescribeOrigin(o.api_wait_seconds)));
  lines.push_back(LineOf("k3s_version", o.k3s_version, PinnedK3sRelease().version + " (pinned)"));
  lines.push_back(LineOf("k3s_sha256", o.k3s_sha256, "(pinned)"));
  lines.push_back(LineOf("k3s_download_url", o.k3s_download_url, "(GitHub releases)"));
  lines.push_back(Line("nvidia_driver", o.nvidia_driver.value, DescribeOrigin(o.nvidia_driver)));
  lines.push_back(LineOf("nvidia_repo_url", o.nvidia_repo_url, "(NVIDIA's)"));
  lines.push_back(LineOf("nvidia_key_fingerprint", o.nvidia_key_fingerprint, "(NVIDIA's, pinned)"));
  std::string sources = "(the VM's record; new VMs: 0.0.0.0/0)";
  if (o.allow_from.value) {
    sources.clear();
    for (const auto& c : *o.allow_from.value) sources += (sources.empty() ? "" : ",") + c;
  }
  lines.push_back(Line("allow_from", sources, DescribeOrigin(o.allow_from)));
  lines.push_back(Line("allow_from_ssh",
                       o.allow_from_ssh.value ? (*o.allow_from_ssh.value ? "true" : "false")
                                              : "(the VM's record; new VMs: false)",
                       DescribeOrigin(o.allow_from_ssh)));
  lines.push_back(Line("smoke_test", o.smoke_test.value ? "true" : "false",
                       DescribeOrigin(o.smoke_test)));
  lines.push_back(Line("smoke_test_image", o.smoke_test_image.value,
                       DescribeOrigin(o.smoke_test_image)));
  lines.push_back(Line("spot", o.spot.value ? "true" : "false", DescribeOrigin(o.spot)));
  lines.push_back(Line("nodes", std::to_string(o.nodes.value), DescribeOrigin(o.nodes)));
  return lines;
}

InstallRoute ParseInstallRoute(const std::string& text) {
  if (text == "auto") return InstallRoute::kAuto;
  if (text == "boot") return InstallRoute::kBoot;
  if (text == "ssh") return InstallRoute::kSsh;
  throw UsageError("--install-route: '" + text + "' is not a route",
                   "give auto (the default: the boot script where the cloud runs one), boot or "
                   "ssh");
}

int ParseDiskGbFlag(const std::string& text) {
  const std::string range = "give a whole number of GB from " + std::to_string(kMinDiskGb) +
                            " to " + std::to_string(kMaxDiskGb) + ", e.g. --disk-gb 200";
  if (text.empty() || text.size() > 6 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    throw UsageError("--disk-gb: '" + text + "' is not a whole number of GB", range);
  }
  const int gb = std::stoi(text);
  if (gb < kMinDiskGb || gb > kMaxDiskGb) {
    throw UsageError("--disk-gb: " + text + " is out of range", range);
  }
  return gb;
}

bool IsReservedTag(const std::string& key) { return key == "gpuprov" || key == "gpuprov-name"; }

void AddTagFlag(const std::string& text, std::map<std::string, std::string>& tags) {
  const std::string example = "write --tag KEY=VALUE, e.g. --tag team=ml (repeat it for more)";
  const size_t eq = text.find('=');
  if (eq == std::string::npos) {
    throw UsageError("--tag '" + text + "': no '=' between the key and the value", example);
  }
  const std::string key = text.substr(0, eq), value = text.substr(eq + 1);
  if (key.empty() || key.size() > 128 || !std::all_of(key.begin(), key.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) ||
               std::string_view("_.:/+-@").find(c) != std::string_view::npos;
      })) {
    throw UsageError("--tag '" + text + "': the key must be 1 to 128 of A-Z a-z 0-9 _ . : / + - @",
                     example);
  }
  if (value.size() > 256 || !std::all_of(value.begin(), value.end(), [](char c) {
        return static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
      })) {
    throw UsageError("--tag " + key + ": the value must be at most 256 printable characters",
                     example);
  }
  if (IsReservedTag(key)) {
    throw UsageError("--tag " + key + ": '" + key + "' is a tag gpuprov sets itself",
                     "choose another key");
  }
  if (!tags.emplace(key, value).second) {
    throw UsageError("--tag " + key + " is given twice", "keep one of them");
  }
}

}  // namespace gpuprov
