#include "remote.h"

namespace gpuprov {

const RemoteCommands& Remote() { return *gpuprov_remote_commands(); }

}  // namespace gpuprov
