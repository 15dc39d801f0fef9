// Test-only helpers shared by core's unit tests (header only; never linked into gpuprov).
#pragma once

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

#include "ssh_client.h"
#include "ssh_keys.h"

namespace gpuprov::testing {

/// A fresh directory under the system temp dir, removed with everything in it at scope exit.
class ScopedTempDir {
 public:
  explicit ScopedTempDir(const std::string& prefix = "gpuprov-test") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + ".XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~ScopedTempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// The permission bits of path (07777), or 0 when it does not exist.
inline mode_t ModeOf(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

/// An SSH target for root at host:port whose ed25519 key (made now when missing) and
/// known_hosts file live in \a dir.
inline SshTarget KeyedSshTarget(const std::filesystem::path& dir, const std::string& host,
                                int port = 22) {
  SshTarget target;
  target.host = host;
  target.port = port;
  target.user = "root";
  target.private_key_path = (dir / "keys" / "id_ed25519").string();
  target.known_hosts_path = (dir / "known_hosts").string();
  EnsureEd25519Key(target.private_key_path);
  return target;
}

}  // namespace gpuprov::testing
