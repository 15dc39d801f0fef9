#include "paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "error.h"

namespace gpuprov {
namespace {

std::optional<std::string> NonEmpty(const EnvLookup& env, const std::string& name) {
  std::optional<std::string> value = env(name);
  if (value && value->empty()) return std::nullopt;
  return value;
}

std::string Errno(int err) { return std::strerror(err); }

}  // namespace

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

Paths::Paths(const EnvLookup& env) {
  if (std::optional<std::string> home = NonEmpty(env, "GPUPROV_HOME")) {
    home_ = std::filesystem::absolute(*home).lexically_normal();
    return;
  }
  if (std::optional<std::string> user_home = NonEmpty(env, "HOME")) {
    home_ = (std::filesystem::absolute(*user_home) / ".gpu-provisioner").lexically_normal();
    return;
  }
  throw UsageError("cannot find the gpuprov home: neither GPUPROV_HOME nor HOME is set",
                   "set GPUPROV_HOME to a directory gpuprov may use, e.g. "
                   "GPUPROV_HOME=/path/to/.gpu-provisioner");
}

Paths Paths::ForHome(const std::filesystem::path& home) {
  return Paths(std::filesystem::absolute(home).lexically_normal());
}

void EnsureDir(const std::filesystem::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      throw Error("'" + dir.string() + "' exists but is not a directory",
                  "move it away; gpuprov needs a directory there");
    }
    if ((st.st_mode & 077) == 0) return;
    if ((st.st_mode & S_ISVTX) != 0 || st.st_uid != ::geteuid()) {
      // Shared directories such as /tmp are never tightened.
      throw Error("'" + dir.string() + "' is a shared directory (not owned by you, or sticky)",
                  "point GPUPROV_HOME at a directory of your own");
    }
    if (::chmod(dir.c_str(), st.st_mode & 0700) != 0) {
      const int err = errno;
      throw Error("cannot restrict '" + dir.string() + "' to mode 0700: " + Errno(err),
                  "run: chmod 700 '" + dir.string() + "'");
    }
    return;
  }
  if (errno != ENOENT) {
    const int err = errno;
    throw Error("cannot use directory '" + dir.string() + "': " + Errno(err));
  }
  const std::filesystem::path parent = dir.parent_path();
  if (!parent.empty() && parent != dir) {
    struct stat parent_st {};
    if (::stat(parent.c_str(), &parent_st) != 0) EnsureDir(parent);
  }
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    const int err = errno;
    throw Error("cannot create directory '" + dir.string() + "': " + Errno(err),
                "check that the parent directory is writable by you");
  }
  // mkdir applies the umask, which may have removed owner bits; set the mode exactly.
  if (::chmod(dir.c_str(), 0700) != 0) {
    const int err = errno;
    throw Error("cannot set mode 0700 on '" + dir.string() + "': " + Errno(err));
  }
}

}  // namespace gpuprov
