#include "address_follow.h"

#include <chrono>
#include <memory>
#include <thread>

#include "cluster_bringup.h"
#include "config.h"
#include "console.h"
#include "error.h"
#include "file_util.h"
#include "installer_bundle.h"
#include "installer_text.h"
#include "kube_api_client.h"
#include "kubeconfig.h"
#include "kubeconfig_merge.h"
#include "node_shell.h"
#include "provision_options.h"
#include "ssh_client.h"
#include "vm_records.h"

namespace gpuprov {
namespace {

using Clock = std::chrono::steady_clock;

/// How long the recorded SSH address has to answer before the cloud is asked.
constexpr std::chrono::seconds kAnswerWait{3};
/// How long the API may take to serve a certificate for the new address after the re-run.
constexpr std::chrono::seconds kCertificateWait{90};

/// The port of a "https://HOST:PORT" server URL (HOST in brackets for IPv6); kApiPort when it
/// names none.
int ServerPort(const std::string& server) {
  const size_t colon = server.rfind(':');
  const size_t bracket = server.rfind(']');
  if (colon != std::string::npos && colon > std::string("https").size() &&
      (bracket == std::string::npos || colon > bracket)) {
    try {
      return std::stoi(server.substr(colon + 1));
    } catch (const std::exception&) {
    }
  }
  return kApiPort;
}

/// SSH at the record's (new) address, waited for as provision does: the cloud says running
/// before sshd listens.
SshSession WaitForSshAt(const AppContext& app, const VmRecord& rec) {
  const SshTarget target = SshTargetOf(app, rec);
  const std::chrono::seconds wait(
      app.LoadUserConfig().defaults.timeouts.ssh_wait_seconds.value_or(kDefaultSshWaitSeconds));
  const std::string where = "waiting for SSH on " + SshHostPort(target.host, target.port);
  return WaitForSsh(target, wait,
                    [&](std::chrono::seconds s) { Console::Get().Progress(where, s); });
}

/// Direct access at the new address: the installer re-run over SSH with --public-ip (the k3s
/// the node has, so nothing is downloaded) puts the address in the API certificate, as
/// provision's re-run does; then the kubeconfig's server (and the merged entry) move to it.
void FollowCertificate(const AppContext& app, const VmRecord& rec, SshSession& session) {
  const std::string& name = rec.name;
  const std::filesystem::path own = app.paths.kubeconfig(name);
  const std::optional<std::string> text = ReadFileIfExists(own, kKubeconfigKind);
  if (!text) return;  // provision has not written one: its re-run does all this
  const KubeCredentials creds = ParseKubeconfig(*text);
  const int api_port = ServerPort(creds.server);
  const std::string& host = rec.public_ip;
  const std::string server = "https://" +
                             (host.find(':') != std::string::npos ? "[" + host + "]" : host) +
                             ":" + std::to_string(api_port);

  SshNodeShell shell(&session);
  InstallerArgs args;
  args.public_ip = rec.public_ip;
  args.k3s_version = TrimSpace(
      shell
          .RunAsRoot("read the node's k3s version",
                     "sed -n 's/.*\"k3s_version\": *\"\\([^\"]*\\)\".*/\\1/p' " +
                         std::string(kNodeStatusPath),
                     "", std::chrono::seconds(30))
          .stdout_text);
  Console::Get().Info("re-running the installer on " + name + " with --public-ip " +
                      rec.public_ip + " for the API certificate");
  const SshRunResult r = shell.RunAsRoot("re-run installer with the new public IP",
                                         InstallerPushCommand(args), InstallerScript(),
                                         std::chrono::minutes(30));
  if (r.exit_status != 0) {
    const std::string said = TrimSpace(r.stderr_text);
    throw Error("the k3s installer failed on " + name + " with --public-ip " + rec.public_ip +
                    " (exit " + std::to_string(r.exit_status) +
                    "): " + said.substr(said.rfind('\n') == std::string::npos ? 0 : said.rfind('\n') + 1),
                "its log: gpuprov ssh " + name + " -- sudo tail -n 50 " + kNodeInstallLog);
  }
  const auto start = Clock::now();
  for (std::string covered;;) {
    try {
      const std::vector<std::string> names =
          ServedCertificateNames(rec.public_ip, api_port, creds.ca_pem, std::chrono::seconds(10));
      if (CertificateCovers(names, rec.public_ip)) break;
      covered.clear();
      for (const auto& n : names) covered += (covered.empty() ? "" : ", ") + n;
    } catch (const Error& e) {
      covered = e.what();
    }
    if (Clock::now() - start >= kCertificateWait) {
      throw Error("the API certificate of " + name + " does not cover " + rec.public_ip +
                      " after the installer's re-run (" + covered + ")",
                  "re-run the same `gpuprov provision --name " + name + "`");
    }
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
  const std::string ours = RenderKubeconfig(name, server, creds);
  WriteKubeconfig(own, ours);
  if (auto merged = rec.extra.find(kKubeconfigMergedKey); merged != rec.extra.end()) {
    MergeKubeconfigFile(merged->second, ours, KubeContextName(name), /*switch_context=*/false,
                        app.paths.lock_dir() / "kubeconfig.lock");
  }
}

}  // namespace

AddressDecision DecideAddress(const std::string& recorded, bool recorded_answers,
                              const std::optional<CloudVm>& live) {
  if (recorded_answers) return {AddressAction::kKeep, "the recorded address answers"};
  if (!live || live->state == "terminated") {
    return {AddressAction::kGone, "the cloud has no such VM any more"};
  }
  if (live->state != "running") {
    return {AddressAction::kNotRunning, "the VM is " + live->state + ", not running"};
  }
  if (live->public_ip.empty()) {
    return {AddressAction::kKeep, "the cloud reports no public address"};
  }
  if (live->public_ip == recorded) {
    return {AddressAction::kKeep, "the cloud reports the recorded address " + recorded};
  }
  return {AddressAction::kFollow,
          "the cloud reports " + live->public_ip + ", not the recorded " + recorded};
}

VmRecord FollowVmAddress(const AppContext& app, const std::string& name) {
  Console& console = Console::Get();
  StateStore store(app.paths);
  VmRecord rec = LoadVmRecord(store, name);
  if (rec.public_ip.empty()) return rec;  // SshTargetOf says what to do
  if (TcpConnectError(rec.public_ip, rec.ssh_port, kAnswerWait).empty()) return rec;
  std::optional<CloudVm> live;
  try {
    DriverHost host = app.MakeDriverHost();
    std::unique_ptr<Cloud> cloud = Cloud::Open(host, rec.cloud, app.LoadUserConfig());
    live = cloud->Get(rec.vm_id, rec.name);
  } catch (const Error& e) {
    console.Debug("address of " + name + ": " + SshHostPort(rec.public_ip, rec.ssh_port) +
                  " does not answer and " + rec.cloud + " could not be asked: " + e.what());
    return rec;
  }
  const AddressDecision d = DecideAddress(rec.public_ip, false, live);
  console.Debug("address of " + name + ": " + SshHostPort(rec.public_ip, rec.ssh_port) +
                " does not answer; " + d.reason);
  switch (d.action) {
    case AddressAction::kKeep:
      return rec;
    case AddressAction::kGone:
      throw Error("VM " + name + " does not answer at " + rec.public_ip + ": " + d.reason + " on " +
                      rec.cloud,
                  "`gpuprov down " + name + "` removes its local files");
    case AddressAction::kNotRunning:
      throw Error("VM " + name + " does not answer at " + rec.public_ip + ": " + d.reason +
                      " on " + rec.cloud,
                  "start it (the cloud's console or CLI), then run this again: gpuprov follows "
                  "a new address");
    case AddressAction::kFollow:
      break;
  }
  FileLock lock = store.LockVm(name, 60 * 1000);
  rec = LoadVmRecord(store, name);
  const std::string from = rec.public_ip;
  const int from_port = rec.ssh_port;
  rec.public_ip = live->public_ip;
  rec.ssh_port = live->ports.count(22) ? live->ports.at(22) : live->ssh_port;
  MoveHostKey(app.paths.known_hosts().string(), from, from_port, rec.public_ip, rec.ssh_port);
  const bool direct = rec.kubernetes && rec.access_mode == "direct";
  {
    // Also so that the command's own connection finds sshd up.
    SshSession session = WaitForSshAt(app, rec);
    if (direct) FollowCertificate(app, rec, session);
  }
  // Saved last: a failure above leaves the old address recorded, so the next command follows
  // again (the pin has moved already; MoveHostKey then changes nothing).
  rec = store.Save(rec);
  console.Note(name + "'s address changed from " + from + " to " + rec.public_ip +
               " (the VM was restarted); " +
               (direct ? "kubeconfig and certificate updated"
                       : "the record and the pinned SSH host key follow"));
  return rec;
}

}  // namespace gpuprov
