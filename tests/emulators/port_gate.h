// SPDX-License-Identifier: Apache-2.0
//
// The docker backend's firewall: TCP forwarders that make exactly the ports a
// cloud's rules allow reachable on an instance's loopback address. For each
// (listen address, port) one listener runs while the port is allowed; each
// connection it accepts is copied both ways to the instance's container at its
// Docker bridge address. A port not forwarded is refused by the kernel; one
// whose container side refuses is reset, as Docker's own port proxy does.
// Removing a port stops new connections at once; connections already made keep
// running (a stateful firewall keeps tracked flows) until the address is closed.
// Written here because Poco has sockets but no proxy, and Docker cannot add or
// remove a running container's published ports.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace gpuprov::emulator {

class PortGate {
 public:
  PortGate() = default;
  ~PortGate();
  PortGate(const PortGate&) = delete;
  PortGate& operator=(const PortGate&) = delete;

  /// Makes the forwards of listen_address exactly `forwards` (port on listen_address ->
  /// port on target_address): new ones are listening when this returns, dropped ones no
  /// longer accept. listen_address must be in 127.0.0.0/8 and target_address in a private
  /// IPv4 range (Docker's bridge networks); else std::invalid_argument. Returns one line
  /// per port that could not be bound (the rest are set).
  std::vector<std::string> Set(const std::string& listen_address,
                               const std::string& target_address,
                               const std::map<int, int>& forwards);
  /// Stops every listener and connection of listen_address.
  void Close(const std::string& listen_address);
  /// The forwards of listen_address now (port -> target port).
  std::map<int, int> Forwards(const std::string& listen_address) const;

 private:
  class Connections;
  class Listener;
  struct Address {
    Address();
    ~Address();
    Address(Address&&) noexcept;
    std::string target;
    std::shared_ptr<Connections> connections;            // outlive a dropped listener
    std::map<int, std::unique_ptr<Listener>> listeners;  // by listen port; destroyed first
  };
  mutable std::mutex mu_;
  std::map<std::string, Address> addresses_;
};

}  // namespace gpuprov::emulator
