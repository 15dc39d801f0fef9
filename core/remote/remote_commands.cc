#include "address_follow.h"
#include "provision.h"
#include "remote.h"
#include "ssh_client.h"
#include "scale_command.h"
#include "ttl_command.h"
#include "tunnel_command.h"
#include "watch_command.h"
#include "ssh_command.h"

#ifndef GPUPROV_VERSION
#define GPUPROV_VERSION "0.0.0"
#endif

extern "C" __attribute__((visibility("default"))) const gpuprov::RemoteCommands*
gpuprov_remote_commands() {
  static const gpuprov::RemoteCommands kCommands = {
      GPUPROV_VERSION, &gpuprov::RunProvision, &gpuprov::RunSsh, &gpuprov::RunTunnel,
      &gpuprov::ForgetHostKey, &gpuprov::RunTtl, &gpuprov::FollowVmAddress, &gpuprov::RunWatch,
      [](const gpuprov::AppContext& app, const std::string& name, int nodes, bool yes) {
        return gpuprov::RunScale(app, gpuprov::ScaleOptions{name, nodes, yes});
      },
  };
  return &kCommands;
}
