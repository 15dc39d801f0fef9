// The ports of a VM after create, by one mechanism (issue 11): `create` opens the request's
// ports only for a VM it creates now and returns an existing VM as it is; when the VM already
// existed and the run needs a port the record does not list as open (k8s turned on, direct
// access), the host calls the driver's `open_ports` (GPUPROV_CAP_OPEN_PORTS) with the whole
// needed set and records what is open. Messages state only what the record says is open.
#pragma once

#include <string>
#include <vector>

#include "cloud.h"

namespace gpuprov {

class Cloud;
struct CloudVm;

/// What to do about a VM's ports after create.
struct PortsPlan {
  bool call_open_ports = false;
  std::vector<int> open_after;  // ascending: what is open once the plan has run
  std::string reason;           // why open_ports is called, for the user ("" when it is not)
  PortSources sources_after;    // who may reach them once the plan has run
  std::vector<int> call_ports;  // the ports open_ports is called with: the needed set, or every
                                // open port when the sources change
};

/// The decision. \a vm_existed: create found the VM instead of creating it. \a recorded_open:
/// what the record says is open (empty: unknown, counted as SSH alone, which every create
/// opens). \a needed: what this run needs (PortsToOpen). \a can_open_ports: the driver has
/// GPUPROV_CAP_OPEN_PORTS.
PortsPlan PlanPorts(bool vm_existed, const std::vector<int>& recorded_open,
                    const std::vector<int>& needed, bool can_open_ports);

/// The same with sources: \a recorded_sources, what the record says (empty: open to
/// 0.0.0.0/0); \a wanted, what this run wants. An existing VM whose sources differ gets
/// open_ports with \a needed and \a wanted, which sets them (a different list updates the
/// rules).
PortsPlan PlanPorts(bool vm_existed, const std::vector<int>& recorded_open,
                    const PortSources& recorded_sources, const std::vector<int>& needed,
                    const PortSources& wanted, bool can_open_ports);

/// What a run wants: \a allow_from for 80, 443 and 6443 of \a needed (and 22 when \a ssh);
/// empty when \a allow_from is.
PortSources WantedSources(const std::vector<std::string>& allow_from, bool ssh,
                          const std::vector<int>& needed);

/// "6443, 80 and 443 open only to 10.0.0.0/8" or "… open to 0.0.0.0/0".
std::string SourcesText(const PortSources& sources);

/// Runs PlanPorts' decision on \a cloud for \a vm: calls open_ports with \a needed when the
/// plan says so. Returns the plan (open_after: what is open afterwards).
PortsPlan EnsurePortsOpen(Cloud& cloud, const CloudVm& vm, bool vm_existed,
                          const std::vector<int>& recorded_open, const std::vector<int>& needed,
                          const PortSources& recorded_sources = {},
                          const PortSources& wanted = {});

/// "22, 6443, 80 and 443".
std::string PortsText(const std::vector<int>& ports);

}  // namespace gpuprov
