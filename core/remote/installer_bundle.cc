#include "installer_bundle.h"

#include <Poco/Base64Encoder.h>

#include <regex>
#include <sstream>

#include "error.h"
#include "gzip.h"
#include "gpuprov/driver_abi.h"
#include "ssh_client.h"

namespace gpuprov {
namespace {

constexpr const char* kHereDocEnd = "GPUPROV_INSTALLER_EOF";

/// Base64 on one line ending in "\n": `base64 -d` takes any line length, and line breaks would
/// cost 1 byte in 77 of the EC2-sized boot script (Poco's own are "\r\n", which GNU
/// `base64 -d` rejects).
std::string Base64(const std::string& data) {
  std::ostringstream encoded;
  Poco::Base64Encoder encoder(encoded);
  encoder.rdbuf()->setLineLength(0);
  encoder << data;
  encoder.close();
  return encoded.str() + "\n";
}

std::string QuotedArgs(const InstallerArgs& args) {
  std::string out;
  for (const auto& word : InstallerArgWords(args)) out += " " + ShellQuote(word);
  return out;
}

/// The lines around the installer: make the folder, write the file (how depends on the form),
/// then run it. cloud-init logs the output to /var/log/cloud-init-output.log. With \a trace the
/// script first writes "started <time>" to kNodeBootTracePath and, through an EXIT trap,
/// "exit <status>" when it ends (so the installer runs as a child, not through exec).
std::string Wrap(const std::string& write_file, const InstallerArgs& args, bool trace) {
  // "$dir/boot-script.status" is kNodeBootTracePath (dir is kNodeInstallerDir).
  const std::string tracing =
      trace ? "echo \"started $(date -u +%Y-%m-%dT%H:%M:%SZ)\" >\"$dir/boot-script.status\"\n"
              "trap 'echo \"exit $?\" >>\"$dir/boot-script.status\"' EXIT\n"
            : std::string();
  return "#!/bin/bash\n"
         "# gpuprov boot script: saves gpuprov's installer and runs it as root at first boot.\n"
         "# Installer log: " + std::string(kNodeInstallLog) +
         "; status: " + kNodeStatusPath + "\n"
         "set -euo pipefail\n"
         "umask 077\n"
         "dir=" + kNodeInstallerDir + "\n"
         "mkdir -p \"$dir\"\n" + tracing +
         write_file + "mv -f \"$dir/gpuprov-install.sh.new\" \"$dir/gpuprov-install.sh\"\n" +
         (trace ? "" : "exec ") + "bash \"$dir/gpuprov-install.sh\"" + QuotedArgs(args) + "\n";
}

}  // namespace

std::string InstallerVersion() {
  static const std::string version = [] {
    std::smatch m;
    static const std::regex re("\\nreadonly INSTALLER_VERSION=\"([^\"]+)\"");
    if (!std::regex_search(InstallerScript(), m, re)) return std::string("unknown");
    return m[1].str();
  }();
  return version;
}

std::vector<std::string> InstallerArgWords(const InstallerArgs& args) {
  std::vector<std::string> words;
  if (!args.public_ip.empty()) {
    words.push_back("--public-ip");
    words.push_back(args.public_ip);
  }
  for (const auto& san : args.tls_sans) {
    words.push_back("--tls-san");
    words.push_back(san);
  }
  for (const auto& [flag, value] : {std::pair{"--k3s-version", &args.k3s_version},
                                    std::pair{"--k3s-sha256", &args.k3s_sha256},
                                    std::pair{"--k3s-download-url", &args.k3s_download_url},
                                    std::pair{"--node-firewall", &args.node_firewall},
                                    std::pair{"--nvidia-driver", &args.nvidia_driver},
                                    std::pair{"--nvidia-repo-url", &args.nvidia_repo_url},
                                    std::pair{"--nvidia-key-fingerprint", &args.nvidia_key_fingerprint},
                                    std::pair{"--public-ip-source", &args.public_ip_source},
                                    std::pair{"--role", &args.role},
                                    std::pair{"--node-ip", &args.node_ip},
                                    std::pair{"--node-external-ip", &args.node_external_ip},
                                    std::pair{"--server-url", &args.server_url},
                                    std::pair{"--token-file", &args.token_file}}) {
    if (value->empty()) continue;
    words.push_back(flag);
    words.push_back(*value);
  }
  if (args.cluster_nodes > 1) {
    words.push_back("--cluster-nodes");
    words.push_back(std::to_string(args.cluster_nodes));
  }
  for (const auto& peer : args.peers) {
    words.push_back("--peer");
    words.push_back(peer);
  }
  return words;
}

bool PrivateAddressFromMetadata(const std::string& public_ip_source) {
  for (const char* source : {GPUPROV_NODE_ADDRESS_EC2, GPUPROV_NODE_ADDRESS_OPENSTACK,
                             GPUPROV_NODE_ADDRESS_GCE, GPUPROV_NODE_ADDRESS_DIGITALOCEAN,
                             GPUPROV_NODE_ADDRESS_NEBIUS}) {
    if (public_ip_source == source) return true;
  }
  return false;
}

std::string PublicIpSourceShortfall(const std::string& public_ip_source) {
  if (public_ip_source == GPUPROV_NODE_ADDRESS_NONE) {
    return "the cloud tells a VM its public address neither by a metadata service nor on an "
           "interface";
  }
  if (public_ip_source == GPUPROV_NODE_ADDRESS_INTERFACE) {
    return "no public address on the VM's interfaces (the cloud puts none there: NAT)";
  }
  if (public_ip_source.empty()) return "no metadata service gave the installer the address";
  return "the " + public_ip_source + " metadata service did not give the installer the address";
}

std::optional<BootScript> MakeBootScript(const InstallerArgs& args, const UserDataLimit& limit,
                                         bool trace) {
  const std::string& script = InstallerScript();
  const std::string path = "\"$dir/gpuprov-install.sh.new\"";
  if (script.find(std::string("\n") + kHereDocEnd + "\n") == std::string::npos) {
    std::string text = Wrap("cat > " + path + " <<'" + kHereDocEnd + "'\n" + script +
                                (script.empty() || script.back() == '\n' ? "" : "\n") +
                                kHereDocEnd + "\n",
                            args, trace);
    if (const std::size_t size = limit.SizeOf(text); size <= limit.bytes) {
      return BootScript{text, BootScriptForm::kPlain, size};
    }
  }
  std::string text = Wrap("base64 -d <<'" + std::string(kHereDocEnd) + "' | gzip -dc > " + path +
                              "\n" + Base64(Gzip(script)) + kHereDocEnd + "\n",
                          args, trace);
  if (const std::size_t size = limit.SizeOf(text); size <= limit.bytes) {
    return BootScript{text, BootScriptForm::kCompressed, size};
  }
  return std::nullopt;
}

std::optional<std::string> AddTtlToBootScript(const std::string& boot_script, const NodeTtl& ttl,
                                              const UserDataLimit& limit) {
  const size_t first_line = boot_script.find('\n');
  if (boot_script.rfind("#!", 0) != 0 || first_line == std::string::npos) return std::nullopt;
  // One `if`: the script through base64 and gzip, then its settings and timer; the here-document
  // body follows the `if` line. Nothing before it has set -e, so a failure is only reported.
  const std::string block =
      "# gpuprov TTL (docs/ttl.md): the timer that powers this VM off, before anything else.\n"
      "mkdir -p /usr/local/sbin\n"
      "if " + TtlScriptSaveCommand("base64 -d <<'GPUPROV_TTL_EOF' | gzip -dc") + " && " +
      TtlSetupCommand(ttl) + "; then\n" +
      Base64(Gzip(TtlScript())) +
      "GPUPROV_TTL_EOF\n"
      "  echo 'gpuprov-ttl: timer installed at boot'\n"
      "else\n"
      "  echo 'gpuprov-ttl: timer NOT installed at boot (gpuprov sets it over SSH)' >&2\n"
      "fi\n";
  std::string out = boot_script.substr(0, first_line + 1) + block + boot_script.substr(first_line + 1);
  if (!limit.Fits(out)) return std::nullopt;
  return out;
}

std::string InstallerPushCommand(const InstallerArgs& args) {
  const std::string path = kNodeInstallerPath;
  return "set -e; umask 077; mkdir -p /var/lib/gpuprov; cat > " + path + ".new; mv -f " + path +
         ".new " + path + "; exec bash " + path + QuotedArgs(args);
}

std::string AgentServerUrl(const std::string& server_address) {
  const bool ipv6 = server_address.find(':') != std::string::npos;
  return "https://" + (ipv6 ? "[" + server_address + "]" : server_address) + ":6443";
}

std::string AgentJoinCommand(InstallerArgs args, const std::string& server_url) {
  args.role = "agent";
  args.server_url = server_url;
  args.token_file = kNodeJoinTokenPath;
  const std::string token = kNodeJoinTokenPath;
  return "set -e; umask 077; mkdir -p /run/gpuprov; head -n1 > " + token + "; exec bash " +
         kNodeInstallerPath + QuotedArgs(args);
}

std::string PeersOnlyCommand(const std::vector<std::string>& peers) {
  std::string command = std::string("exec bash ") + kNodeInstallerPath + " --peers-only";
  for (const auto& peer : peers) command += " --peer " + ShellQuote(peer);
  return command;
}

std::string AsRoot(const std::string& command, const std::string& ssh_user) {
  if (ssh_user.empty() || ssh_user == "root") return command;
  return "sudo -n sh -c " + ShellQuote(command);
}

}  // namespace gpuprov
