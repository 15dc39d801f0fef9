#include "ssh_config_command.h"

#include "console.h"
#include "openssh.h"
#include "spec.h"
#include "state_store.h"
#include "vm_records.h"

namespace gpuprov {

int RunSshConfig(const AppContext& app, const std::string& name) {
  ValidateVmName(name, "VM name");
  const VmRecord rec = LoadVmRecord(StateStore(app.paths), name);
  const SshTarget target = SshTargetOf(app, rec);
  Console::Get().Result(SshConfigBlock(SshHostAlias(name), target));
  return 0;
}

}  // namespace gpuprov
