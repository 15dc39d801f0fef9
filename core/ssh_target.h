// Where gpuprov reaches a VM over SSH. Base code (ssh-config, the records) names a target;
// connecting to it is libgpuprov-remote.so's (remote/ssh_client.h).
#pragma once

#include <string>

namespace gpuprov {

struct SshTarget {
  std::string host;  // IP address or DNS name
  int port = 22;
  std::string user;
  std::string private_key_path;
  std::string known_hosts_path;  // gpuprov's own, e.g. ~/.gpu-provisioner/known_hosts
};

}  // namespace gpuprov
