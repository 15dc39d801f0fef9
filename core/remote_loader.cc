#include <algorithm>
#include <boost/dll/shared_library.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "driver_host.h"
#include "error.h"
#include "remote.h"

#ifndef GPUPROV_VERSION
#define GPUPROV_VERSION "0.0.0"
#endif
#ifndef GPUPROV_INSTALL_LIBDIR
#define GPUPROV_INSTALL_LIBDIR "lib"
#endif
#ifndef GPUPROV_INSTALL_MODULE_DIR
#define GPUPROV_INSTALL_MODULE_DIR "/usr/local/lib/gpuprov"
#endif

namespace gpuprov {
namespace {

namespace fs = std::filesystem;

constexpr const char* kModuleFile = "libgpuprov-remote.so";
constexpr const char* kReinstallHint =
    "reinstall gpuprov: the module must come from the same build as the gpuprov executable";

/// Where the module may be, in order: <prefix>/<libdir>/gpuprov next to the executable's
/// <prefix>/bin (an installed prefix, wherever it was moved; the build tree uses lib/), then
/// the configured install folder.
std::vector<fs::path> ModuleCandidates() {
  std::vector<fs::path> out;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const char* libdir : {GPUPROV_INSTALL_LIBDIR, "lib"}) {
      if (fs::path(libdir).is_absolute()) continue;
      out.push_back(exe.parent_path().parent_path() / libdir / "gpuprov" / kModuleFile);
    }
  }
  out.push_back(fs::path(GPUPROV_INSTALL_MODULE_DIR) / kModuleFile);
  for (fs::path& path : out) path = path.lexically_normal();
  out.erase(std::unique(out.begin(), out.end()), out.end());  // libdir "lib": one path twice
  return out;
}

const RemoteCommands& Load() {
  std::vector<fs::path> candidates = ModuleCandidates();
  std::error_code ec;
  for (const fs::path& path : candidates) {
    if (!fs::exists(path, ec)) continue;
    static const boost::dll::shared_library* module = nullptr;
    try {
      // Never closed (no destructor runs at exit): the commands run from it until the process
      // exits. Held by a static, so LeakSanitizer sees it reachable.
      module = new boost::dll::shared_library(
          path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
    } catch (const std::exception& e) {
      throw Error("cannot load the remote module: " + path.string() + ": " +
                      LoaderReason(path.string(), e.what()),
                  kReinstallHint);
    }
    const RemoteCommands* (*entry)() = nullptr;
    if (module->has("gpuprov_remote_commands")) {
      entry = module->get<const RemoteCommands*()>("gpuprov_remote_commands");
    }
    const RemoteCommands* commands = entry != nullptr ? entry() : nullptr;
    if (commands == nullptr || std::string(commands->version) != GPUPROV_VERSION) {
      throw Error(path.string() + " is not the remote module of gpuprov " GPUPROV_VERSION,
                  kReinstallHint);
    }
    return *commands;
  }
  std::string searched;
  for (const fs::path& path : candidates) searched += "\n  " + path.string();
  throw Error(std::string("cannot find ") + kModuleFile + ", which SSH, tunnels and provision " +
                  "need; searched:" + searched,
              "reinstall gpuprov: its package (or cmake --install) puts the module in " +
                  candidates.front().parent_path().string());
}

}  // namespace

const RemoteCommands& Remote() {
  static const RemoteCommands& commands = Load();
  return commands;
}

}  // namespace gpuprov
