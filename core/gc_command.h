// `gpuprov gc`: finds what carries gpuprov's marks on a cloud but belongs to no state record (a
// run killed before its record, a lost home directory, another machine's VMs) and deletes it
// only when asked. Uses the drivers' list_resources and delete_resource (ABI 1.2).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "app_context.h"
#include "cloud.h"
#include "state_store.h"

namespace gpuprov {

struct GcOptions {
  std::optional<std::string> cloud;  // --cloud; nullopt: every cloud with credentials
  bool remove = false;               // --delete
  bool yes = false;                  // --yes
};

/// A resource of one cloud that gc found, and what became of it.
struct GcOrphan {
  CloudResource resource;
  bool deleted = false;
  bool claimed_meanwhile = false;  // a gpuprov run on this machine took its VM name since
  std::string error;               // why deleting it failed; "" when it did not or was not asked to
};

/// One cloud's part of a gc run.
struct GcCloudReport {
  std::string cloud;
  /// Why this cloud was not swept ("" when it was): no credentials, a driver without
  /// list_resources, an error.
  std::string skipped;
  bool failed = false;  // skipped for an error the user must see (not missing credentials)
  std::vector<GcOrphan> orphans;
  size_t kept = 0;  // listed resources that belong to a recorded VM
};

/// The resources no state record claims: a resource is kept when any of its vm_names has a
/// record on \a cloud (or a record file that cannot be read: gc does not guess), and is an
/// orphan otherwise, a shared one whose users are all gone included. A cluster's server is the
/// VM named after the cluster: when it has no record, neither an agent's record (its cluster
/// and role) nor what the driver says belongs to the cluster (its "cluster": an agent VM by
/// its tags, the cluster's network or firewall) keeps anything. Only what the driver listed
/// (what carries gpuprov's marks) is ever considered.
std::vector<CloudResource> SelectOrphans(const std::string& cloud,
                                         const std::vector<CloudResource>& resources,
                                         const StateStore& store, size_t* kept = nullptr);

/// Lists \a cloud's resources and picks the orphans.
GcCloudReport ListOrphans(Cloud& cloud, const StateStore& store);

/// Deletes the orphans of \a report (exactly those, in the driver's order), each one's VM
/// names locked and their records looked up again first: a provision started since the
/// listing keeps what it uses. Sets each orphan's deleted or error.
void DeleteOrphans(Cloud& cloud, StateStore& store, GcCloudReport& report);

int RunGc(const AppContext& app, const GcOptions& options);

}  // namespace gpuprov
