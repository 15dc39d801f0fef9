// Where gpuprov keeps its files on the user's machine (docs/design.md §5).
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace gpuprov {

/// Looks up an environment variable; nullopt when it is not set. Tests pass a map-backed
/// lookup so they never read or change the real environment.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

/// The process environment (getenv).
EnvLookup ProcessEnv();

/// The gpuprov home and the files in it. Nothing is created by construction; call
/// EnsureDir on a directory before writing into it.
class Paths {
 public:
  /// home = $GPUPROV_HOME, else $HOME/.gpu-provisioner (empty values count as unset).
  /// A relative GPUPROV_HOME is made absolute against the current directory.
  /// Throws UsageError when neither variable is set.
  explicit Paths(const EnvLookup& env);

  /// Paths under an explicit home (made absolute).
  static Paths ForHome(const std::filesystem::path& home);

  const std::filesystem::path& home() const { return home_; }
  std::filesystem::path config_file() const { return home_ / "config.toml"; }
  std::filesystem::path state_dir() const { return home_ / "state"; }
  std::filesystem::path kube_dir() const { return home_ / "kube"; }
  /// The kubeconfig gpuprov writes for VM \a vm_name.
  std::filesystem::path kubeconfig(const std::string& vm_name) const {
    return kube_dir() / (vm_name + ".yaml");
  }
  std::filesystem::path keys_dir() const { return home_ / "keys"; }
  std::filesystem::path known_hosts() const { return home_ / "known_hosts"; }
  std::filesystem::path user_driver_dir() const { return home_ / "drivers"; }
  std::filesystem::path lock_dir() const { return home_ / "locks"; }
  /// Where drivers keep the slots of APIs with a published rate, one file per cloud and API
  /// key hash, so every gpuprov process of the user paces together (plugins/common/pacer.h).
  std::filesystem::path pacer_dir() const { return home_ / "pacer"; }

 private:
  explicit Paths(std::filesystem::path home) : home_(std::move(home)) {}

  std::filesystem::path home_;
};

/// Makes \a dir exist as a directory with mode 0700. Missing parents are created with
/// mode 0700 as well. An existing \a dir that is group or world accessible is tightened to
/// 0700 without error (existing parents are left alone). Throws Error naming the path when
/// \a dir is shared (sticky, or owned by another user) and group or world accessible, or when
/// \a dir exists but is not a directory or cannot be created or changed.
void EnsureDir(const std::filesystem::path& dir);

}  // namespace gpuprov
