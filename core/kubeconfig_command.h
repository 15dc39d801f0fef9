// `gpuprov kubeconfig NAME [--merge [--switch]]`: prints the kubeconfig gpuprov wrote for a VM,
// or merges its cluster, user and context into the user's kubeconfig (kubeconfig_merge.h),
// optionally making that context current.
#pragma once

#include <string>

#include "app_context.h"

namespace gpuprov {

struct KubeconfigCommandOptions {
  bool merge = false;
  bool switch_context = false;  // implies merge
};

int RunKubeconfig(const AppContext& app, const std::string& name,
                  const KubeconfigCommandOptions& options);

}  // namespace gpuprov
