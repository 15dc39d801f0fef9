// Merging gpuprov's kubeconfig of one VM into the user's own (`gpuprov kubeconfig NAME --merge`,
// `provision --merge-kubeconfig`) and taking it out again (`gpuprov down`).
//
// How: the user's file is edited as text, never re-emitted. yaml-cpp parses it and gives the
// line of every entry of `clusters`, `users` and `contexts`; gpuprov replaces, inserts or deletes
// only the lines of the entries named gpuprov-<name> (and the `current-context` line for
// --switch), so comments, key order, quoting and every other entry stay byte for byte as they
// were. Re-emitting with yaml-cpp would drop comments and re-quote values. Before writing, the
// result is parsed again and every other entry (and every other top-level key) must compare
// equal to the original's, else nothing is written. Block-style lists (what kubectl writes) are
// edited; a non-empty flow-style list ([...]) is refused with what to do instead.
#pragma once

#include <filesystem>
#include <string>

#include "paths.h"

namespace gpuprov {

/// The key of VmRecord::extra naming the user's kubeconfig a VM's entries were merged into.
inline constexpr const char* kKubeconfigMergedKey = "kubeconfig_merged_into";

/// \a existing (a kubeconfig's text; "" for a new file) with the cluster, user and context
/// named \a name set to the one cluster, user and context of \a ours (a kubeconfig gpuprov
/// rendered with that name). \a switch_context: current-context becomes \a name (else it is
/// left as it is, and not added to a file without one). Throws Error naming \a display (the
/// file) when \a existing is not a kubeconfig or its lists cannot be edited as text.
std::string MergeKubeconfigText(const std::string& existing, const std::string& ours,
                                const std::string& name, bool switch_context,
                                const std::string& display);

/// \a existing without the cluster, user and context named \a name; a current-context naming
/// it becomes "". Returns \a existing unchanged when it holds none of them.
std::string RemoveKubeconfigEntries(const std::string& existing, const std::string& name,
                                    const std::string& display);

/// The file `kubectl` writes to: the first entry of $KUBECONFIG, else $HOME/.kube/config.
/// Throws UsageError when neither KUBECONFIG nor HOME is set.
std::filesystem::path UserKubeconfigFile(const EnvLookup& env);

/// What a file edit did.
struct KubeconfigEdit {
  bool changed = false;
  std::filesystem::path file;    // the file edited (a symlink's target)
  std::filesystem::path backup;  // <file>.gpuprov-backup, the previous contents ("" if none)
};

/// Merges \a ours into \a file (created 0600, its folder 0700, when missing): under \a lock
/// (a gpuprov lock file, so two gpuprov runs never interleave) and kubectl's `<file>.lock`, the
/// old contents saved to <file>.gpuprov-backup (0600), the new written atomically with the
/// file's owner bits (group and other dropped: it holds credentials).
KubeconfigEdit MergeKubeconfigFile(const std::filesystem::path& file, const std::string& ours,
                                   const std::string& name, bool switch_context,
                                   const std::filesystem::path& lock);

/// Removes the entries named \a name from \a file the same way; a missing file is no change.
KubeconfigEdit RemoveFromKubeconfigFile(const std::filesystem::path& file, const std::string& name,
                                        const std::filesystem::path& lock);

}  // namespace gpuprov
