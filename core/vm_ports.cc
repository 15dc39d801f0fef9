#include "vm_ports.h"

#include <algorithm>
#include <set>

#include "cloud.h"
#include "console.h"

namespace gpuprov {

PortsPlan PlanPorts(bool vm_existed, const std::vector<int>& recorded_open,
                    const std::vector<int>& needed, bool can_open_ports) {
  PortsPlan plan;
  std::set<int> open;
  if (!vm_existed) {
    open.insert(needed.begin(), needed.end());  // create opened them for the VM it made
  } else if (recorded_open.empty()) {
    open.insert(22);
  } else {
    open.insert(recorded_open.begin(), recorded_open.end());
  }
  std::vector<int> missing;
  for (int p : needed) {
    if (!open.count(p)) missing.push_back(p);
  }
  if (!missing.empty() && can_open_ports) {
    plan.call_open_ports = true;
    plan.reason = "the VM existed and its record does not list " + PortsText(missing) +
                  " as open";
    open.insert(missing.begin(), missing.end());
  }
  plan.open_after.assign(open.begin(), open.end());
  return plan;
}

PortsPlan EnsurePortsOpen(Cloud& cloud, const CloudVm& vm, bool vm_existed,
                          const std::vector<int>& recorded_open, const std::vector<int>& needed) {
  PortsPlan plan = PlanPorts(vm_existed, recorded_open, needed,
                             cloud.info().has(GPUPROV_CAP_OPEN_PORTS));
  if (plan.call_open_ports) {
    Console::Get().Step("opening ports " + PortsText(needed) + " of " + vm.name + " (" +
                        plan.reason + ")");
    cloud.OpenPorts(vm.id, vm.name, needed);
  }
  return plan;
}

std::string PortsText(const std::vector<int>& ports) {
  std::string out;
  for (size_t i = 0; i < ports.size(); ++i) {
    if (i > 0) out += i + 1 == ports.size() ? " and " : ", ";
    out += std::to_string(ports[i]);
  }
  return out;
}

}  // namespace gpuprov
