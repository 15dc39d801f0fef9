// Merging gpuprov's kubeconfig of one VM into the user's own (`gpuprov kubeconfig NAME --merge`,
// `provision --merge-kubeconfig`) and taking it out again (`gpuprov down`).
//
// How: where the file's lists and top level are in block style (what kubectl writes), it is
// edited as text, not re-emitted. yaml-cpp parses it and gives the line of every entry of
// `clusters`, `users` and `contexts`; gpuprov replaces, inserts or deletes only the lines of the
// entries named gpuprov-<name> (and the `current-context` line for --switch), so comments, key
// order, quoting and every other entry stay byte for byte as they were. A file kubectl reads
// in another layout (a flow-style list `clusters: [{...}]`, a flow or JSON top level) is
// re-emitted whole in block style instead, as kubectl itself rewrites a kubeconfig: values keep
// their quoting, comments are not kept, the old contents stay in the backup. Either way the
// result is parsed again and every other entry (and every other top-level key) must compare
// equal to the original's, else nothing is written. What kubectl cannot read either (not YAML,
// a list that is not a list) is refused.
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
/// file) when \a existing is not a kubeconfig. \a reemitted (when given) is set true when the
/// file was re-emitted whole rather than edited line by line (its comments are gone).
std::string MergeKubeconfigText(const std::string& existing, const std::string& ours,
                                const std::string& name, bool switch_context,
                                const std::string& display, bool* reemitted = nullptr);

/// \a existing without the cluster, user and context named \a name; a current-context naming
/// it becomes "". Returns \a existing unchanged when it holds none of them.
std::string RemoveKubeconfigEntries(const std::string& existing, const std::string& name,
                                    const std::string& display, bool* reemitted = nullptr);

/// The file `kubectl` writes to: the first entry of $KUBECONFIG, else $HOME/.kube/config.
/// Throws UsageError when neither KUBECONFIG nor HOME is set.
std::filesystem::path UserKubeconfigFile(const EnvLookup& env);

/// What a file edit did.
struct KubeconfigEdit {
  bool changed = false;
  std::filesystem::path file;    // the file edited (a symlink's target)
  std::filesystem::path backup;  // <file>.gpuprov-backup, the previous contents ("" if none)
  bool reemitted = false;        // re-emitted whole (not block style): comments not kept
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
