// A VM's public address after a stop and start on a cloud without a static address
// (installer/README.md, "A new public address"): the commands that reach a VM (ssh, tunnel,
// ttl, kubeconfig) ask the cloud for its address when the recorded one does not answer, and
// follow a new one: the record, the pinned host key (same key, new address), and in direct
// access the API certificate (the installer re-run over SSH with --public-ip) and the kubeconfig.
#pragma once

#include <optional>
#include <string>

#include "app_context.h"
#include "cloud.h"
#include "state_store.h"

namespace gpuprov {

enum class AddressAction {
  kKeep,        // connect to the recorded address (it answers, or the cloud says the same)
  kFollow,      // the cloud gives the running VM another address: follow it
  kNotRunning,  // the cloud says the VM is not running: nothing answers anywhere
  kGone,        // the cloud has no such VM
};

struct AddressDecision {
  AddressAction action = AddressAction::kKeep;
  std::string reason;
};

/// What to do about \a recorded (the record's address) given whether its SSH port answered
/// and, when it did not, what the cloud's get said (nullopt: no such VM; not asked when it
/// answered).
AddressDecision DecideAddress(const std::string& recorded, bool recorded_answers,
                              const std::optional<CloudVm>& live);

/// The record of VM \a name, its address followed: when the recorded SSH address does not
/// answer within a few seconds, the cloud's get decides (DecideAddress). kFollow moves the host
/// key pin, saves the record and, for a direct-access cluster, re-runs the installer over SSH
/// for the API certificate and rewrites the kubeconfig's server (and the entry merged into the
/// user's kubeconfig), saying so in one line. kNotRunning and kGone throw Error with what to
/// do; a cloud that cannot be asked leaves the record as it is (a debug line), so the command's
/// own connection reports the failure. Takes the VM's lock while it changes files.
VmRecord FollowVmAddress(const AppContext& app, const std::string& name);

}  // namespace gpuprov
