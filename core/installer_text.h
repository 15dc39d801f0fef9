// The node installer (installer/gpuprov-install.sh) and its k3s pin, as built into gpuprov at
// build time (installer_text.cc, generated from installer_text.cc.in). Base code needs the pin
// to check --k3s-version; sending the installer to a node is remote/installer_bundle.h's.
#pragma once

#include <string>

namespace gpuprov {

/// The installer script, byte for byte as in installer/gpuprov-install.sh at build time.
const std::string& InstallerScript();

/// The k3s release the installer pins: its K3S_PINNED_VERSION and K3S_SHA256_AMD64/ARM64 lines,
/// read at build time. Any other version needs a sha256 from the user.
struct PinnedK3s {
  std::string version;       // e.g. "v1.36.4+k3s1"
  std::string sha256_amd64;  // of the release asset `k3s`
  std::string sha256_arm64;  // of the release asset `k3s-arm64`
};
const PinnedK3s& PinnedK3sRelease();

}  // namespace gpuprov
