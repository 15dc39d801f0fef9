// `gpuprov list`, `gpuprov ssh` and `gpuprov down`: the commands that act on recorded VMs.
#pragma once

#include <Poco/JSON/Object.h>

#include <optional>
#include <string>
#include <vector>

#include "app_context.h"
#include "openssh.h"
#include "ssh_client.h"
#include "state_store.h"

namespace gpuprov {

int RunList(const AppContext& app, bool refresh);
/// What `gpuprov ssh NAME` was asked for besides the name.
struct SshCommandOptions {
  std::vector<std::string> command;     // the words after `--`, joined as OpenSSH does
  std::vector<LocalForward> forwards;   // -L
  bool no_command = false;              // -N: forward only
};

/// One command (its exit status), or OpenSSH for a shell and for -L forwards. Defined in
/// ssh_command.cc, part of libgpuprov-remote.so (remote.h): call it through Remote().ssh.
int RunSsh(const AppContext& app, const std::string& name, const SshCommandOptions& options);
/// `gpuprov ssh-config NAME`: the OpenSSH Host block for the VM on stdout.
int RunSshConfig(const AppContext& app, const std::string& name);
/// Deletes the VM; on a terminal asks first unless \a yes (prompt.h).
int RunDown(const AppContext& app, const std::string& name, const std::optional<std::string>& cloud,
            bool yes = false);

/// `down`: takes the VM's cluster, user and context out of the user's kubeconfig when a merge
/// put them there (the record names the file); a file that cannot be edited is a warning
/// naming the kubectl commands that remove them.
void RemoveMergedKubeconfigEntries(const AppContext& app, const VmRecord& rec);

/// The record of \a name; UsageError naming `gpuprov list` when there is none.
VmRecord LoadVmRecord(const StateStore& store, const std::string& name);

/// How gpuprov reaches the VM over SSH: its address and port, login user, key and gpuprov's
/// known_hosts. Error when the VM has no address yet.
SshTarget SshTargetOf(const AppContext& app, const VmRecord& rec);

/// The record as the JSON `list --output json` and `provision --output json` print.
std::string VmRecordJson(const VmRecord& record);

/// The object `list --output json` prints for one VM, \a state being the cloud's word (or the
/// record's phase when the cloud was not asked).
Poco::JSON::Object::Ptr VmRecordObject(const VmRecord& record, const std::string& state);

/// The columns of `gpuprov list`, each as wide as its widest cell: NAME, CLOUD, REGION, STATE,
/// ADDRESS, GPUS, $/H, K8S, AGE. \a states holds each record's shown state.
std::string ListTable(const std::vector<VmRecord>& records, const std::vector<std::string>& states,
                      const std::vector<long>& age_seconds);

}  // namespace gpuprov
