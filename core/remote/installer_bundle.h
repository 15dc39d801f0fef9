// The node installer (installer/gpuprov-install.sh) as gpuprov carries it: built into the binary
// at build time, sent to a node either inside the boot script (cloud-init user data or a startup
// script) or over SSH. docs/design.md §3 and §4.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "cloud.h"
#include "installer_text.h"
#include "ttl.h"

namespace gpuprov {

/// INSTALLER_VERSION of the built-in installer (what its status marker reports).
std::string InstallerVersion();

/// Where the installer lives on the node once sent, and what it writes there.
inline constexpr const char* kNodeInstallerDir = "/var/lib/gpuprov";
inline constexpr const char* kNodeInstallerPath = "/var/lib/gpuprov/gpuprov-install.sh";
inline constexpr const char* kNodeStatusPath = "/var/lib/gpuprov/install-status.json";
inline constexpr const char* kNodeInstallLog = "/var/log/gpuprov-install.log";
inline constexpr const char* kNodeBootLog = "/var/log/cloud-init-output.log";
/// The trace a startup-script boot script leaves (MakeBootScript with `trace`): a line
/// "started <UTC time>" first thing, and "exit <status>" when it ends. It is how gpuprov tells,
/// without cloud-init, whether the startup script ran (cluster_probe.h, BootRoute).
inline constexpr const char* kNodeBootTracePath = "/var/lib/gpuprov/boot-script.status";
/// Where AgentJoinCommand puts the join token for the installer (tmpfs, 0600; the installer
/// removes it once read).
inline constexpr const char* kNodeJoinTokenPath = "/run/gpuprov/join-token";

/// The installer's command-line options gpuprov chooses.
struct InstallerArgs {
  std::string public_ip;               // --public-ip; "" = the installer asks the metadata service
  std::vector<std::string> tls_sans;   // --tls-san, each
  std::string k3s_version;             // --k3s-version; "" = the installer's pin
  std::string k3s_sha256;              // --k3s-sha256; "" = the installer's pinned hash
  std::string k3s_download_url;        // --k3s-download-url; "" = GitHub's release downloads
  std::string node_firewall;           // --node-firewall; "" = the node's firewall left as it is
  std::string nvidia_driver;           // --nvidia-driver; "" = the installer's default (image)
  std::string nvidia_repo_url;         // --nvidia-repo-url; "" = NVIDIA's apt repository
  std::string nvidia_key_fingerprint;  // --nvidia-key-fingerprint; "" = NVIDIA's key (pinned)
  /// --public-ip-source: how the cloud tells a VM its public address (the driver's
  /// GPUPROV_NODE_ADDRESS_* value, DriverInfo::node_address); "" = the installer's auto.
  std::string public_ip_source;
  // A node of a multi-node cluster (installer/README.md, "Clusters"):
  std::string role;                 // --role; "" = server
  int cluster_nodes = 0;            // --cluster-nodes, given when > 1 (the server's wireguard-native)
  std::string node_ip;              // --node-ip: the private address, else the public one;
                                    // kNodeIpFromMetadata: the server learns both at boot
  std::string node_external_ip;     // --node-external-ip
  std::vector<std::string> peers;   // --peer, each: the other nodes the node firewall admits
  std::string server_url;           // --server-url (an agent's join; AgentJoinCommand sets it)
  std::string token_file;           // --token-file (AgentJoinCommand sets it)
};

/// --node-ip's value for a cluster server's boot script: the installer takes node-ip and
/// node-external-ip from the metadata service's private and public addresses, as the host
/// would give them over SSH (installer/README.md, "Clusters").
inline constexpr const char* kNodeIpFromMetadata = "metadata";
/// Whether a VM of a cloud whose driver names \a public_ip_source learns its private address
/// from a metadata service (ec2, openstack, gce, digitalocean, nebius).
bool PrivateAddressFromMetadata(const std::string& public_ip_source);

/// Why a VM whose driver names \a public_ip_source did not learn its public address itself:
/// the tail of the route reason when gpuprov re-runs the installer with --public-ip.
std::string PublicIpSourceShortfall(const std::string& public_ip_source);

/// The arguments as words (unquoted), e.g. {"--public-ip", "1.2.3.4"}.
std::vector<std::string> InstallerArgWords(const InstallerArgs& args);

/// How the boot script carries the installer.
enum class BootScriptForm {
  kPlain,       // the script as text in a here-document
  kCompressed,  // gzip, then base64, unpacked on the node with base64 -d | gzip -dc
};

struct BootScript {
  std::string text;  // a #!/bin/bash user-data script
  BootScriptForm form;
  std::size_t size = 0;  // what the cloud counts of text (UserDataLimit::SizeOf), measured once
};

/// The boot script that writes the installer to kNodeInstallerPath and runs it with \a args:
/// plain when that fits in \a limit, else compressed when that fits, else nullopt (the
/// caller falls back to the SSH route). With \a trace (a startup script: no cloud-init run
/// records whether it ran) it also writes kNodeBootTracePath; cloud-init user data goes
/// without, so EC2's 16 KB stays reachable.
std::optional<BootScript> MakeBootScript(const InstallerArgs& args, const UserDataLimit& limit,
                                         bool trace = false);

/// \a boot_script (MakeBootScript's) with the node's TTL timer (ttl.h) set up first thing, before
/// the installer: the script compressed in a here-document, its settings, the timer started; a
/// failure there is logged ("gpuprov-ttl: ...") and the installer runs anyway. nullopt when the
/// result would not fit in \a limit (gpuprov then sets the TTL over SSH only).
std::optional<std::string> AddTtlToBootScript(const std::string& boot_script, const NodeTtl& ttl,
                                              const UserDataLimit& limit);

/// The shell command (run as root) that saves the installer it reads on stdin to
/// kNodeInstallerPath and runs it with \a args; the installer's exit status is the command's.
std::string InstallerPushCommand(const InstallerArgs& args);

/// The k3s server URL an agent joins: https://ADDRESS:6443 (IPv6 in brackets).
std::string AgentServerUrl(const std::string& server_address);

/// The shell command (run as root) that joins an agent whose installer is already on the node
/// (boot script or InstallerPushCommand): the join token, read on stdin (one line, as the
/// server's node-token file holds it), goes to kNodeJoinTokenPath (0600), then the installer runs
/// with \a args, `--role agent --server-url` \a server_url and `--token-file` that path. The
/// token is never on a command line, in the boot script or in a log; the installer removes the
/// file once read. The installer's exit status is the command's.
std::string AgentJoinCommand(InstallerArgs args, const std::string& server_url);

/// The shell command (run as root) that sets the node firewall's peers to \a peers and nothing
/// else (`--peers-only`: no unit change, no daemon-reload); idempotent. \a peers empty: none.
std::string PeersOnlyCommand(const std::vector<std::string>& peers);

/// \a command run as root by \a ssh_user: as is for root, else through `sudo -n sh -c`.
std::string AsRoot(const std::string& command, const std::string& ssh_user);

}  // namespace gpuprov
