// SPDX-License-Identifier: Apache-2.0
#include "credentials.h"

#include "config_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "gpuprov/sdk.hpp"

namespace gpuprov::drivers {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

}  // namespace

std::string TrimSpace(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && IsSpace(s[b])) ++b;
  while (e > b && IsSpace(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::optional<Credential> CredentialFromEnv(const std::vector<std::string>& names) {
  for (const auto& name : names) {
    if (name.empty()) continue;
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) continue;
    std::string value = TrimSpace(v);
    if (!value.empty()) return Credential{value, "$" + name};
  }
  return std::nullopt;
}

std::optional<std::string> ReadSmallFile(const std::string& path) {
  constexpr size_t kMax = 1u << 20;
  // O_NONBLOCK: a FIFO in a credential file's place opens at once (and is refused below)
  // instead of waiting for a writer; the descriptor's own fstat decides.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) > kMax) {
    const bool regular = S_ISREG(st.st_mode);
    ::close(fd);
    throw sdk::DriverError(GPUPROV_STATUS_INVALID_INPUT,
                           "refusing to read '" + path + "': it is " +
                               (regular ? "larger than 1 MiB" : "not a regular file") +
                               "; a credential or config file must be a regular file of at "
                               "most 1 MiB");
  }
  std::string data;
  char buf[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    data.append(buf, static_cast<size_t>(n));
    if (data.size() > kMax) break;  // grew while read: refused as too large below
  }
  ::close(fd);
  if (data.size() > kMax) {
    throw sdk::DriverError(GPUPROV_STATUS_INVALID_INPUT,
                           "refusing to read '" + path + "': it grew past 1 MiB while read");
  }
  return data;
}

std::vector<std::string> DoctlConfigPaths() {
  // doctl's README ("Configuring default values"): $XDG_CONFIG_HOME/doctl/config.yaml when set,
  // else ~/.config/doctl/config.yaml on Linux and ~/Library/Application Support/doctl/config.yaml
  // on macOS (Go's os.UserConfigDir); SkyPilot's sky/provision/do/utils.py reads both.
  std::vector<std::string> out;
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg != nullptr && *xdg != '\0') {
    out.push_back(std::string(xdg) + "/doctl/config.yaml");
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    out.push_back(std::string(home) + "/.config/doctl/config.yaml");
    out.push_back(std::string(home) + "/Library/Application Support/doctl/config.yaml");
  }
  return out;
}

std::string DoctlConfigPath() {
  const std::vector<std::string> paths = DoctlConfigPaths();
  return paths.empty() ? "" : paths.front();
}

std::optional<std::string> DoctlTokenFromYaml(const std::string& yaml_text,
                                              const std::string& context) {
  std::string want = context;
  if (want.empty()) want = YamlString(yaml_text, {"context"}).value_or("");
  if (want.empty()) want = "default";
  std::optional<std::string> token;
  if (want == "default") token = YamlString(yaml_text, {"access-token"});
  if (!token || TrimSpace(*token).empty()) token = YamlString(yaml_text, {"auth-contexts", want});
  if (!token || TrimSpace(*token).empty()) return std::nullopt;
  return TrimSpace(*token);
}

std::optional<Credential> CredentialFromDoctlConfig(const std::string& path_in,
                                                    const std::string& context) {
  const std::vector<std::string> paths =
      path_in.empty() ? DoctlConfigPaths() : std::vector<std::string>{path_in};
  for (const std::string& path : paths) {
    std::optional<std::string> text = ReadSmallFile(path);
    if (!text) continue;
    std::optional<std::string> token = DoctlTokenFromYaml(*text, context);
    if (!token) continue;
    return Credential{*token, path + (context.empty() ? "" : " (context " + context + ")")};
  }
  return std::nullopt;
}

}  // namespace gpuprov::drivers
