#include "vm_ports.h"

#include <algorithm>
#include <set>

#include "cloud.h"
#include "console.h"

namespace gpuprov {

namespace {

bool SameSources(const PortSources& a, const PortSources& b) {
  if (!a.narrows() && !b.narrows()) return true;
  std::vector<std::string> ca = a.allow_from, cb = b.allow_from;
  std::sort(ca.begin(), ca.end());
  std::sort(cb.begin(), cb.end());
  return ca == cb && a.narrowed_ports == b.narrowed_ports;
}

}  // namespace

PortsPlan PlanPorts(bool vm_existed, const std::vector<int>& recorded_open,
                    const std::vector<int>& needed, bool can_open_ports) {
  return PlanPorts(vm_existed, recorded_open, PortSources{}, needed, PortSources{},
                   can_open_ports);
}

PortSources WantedSources(const std::vector<std::string>& allow_from, bool ssh,
                          const std::vector<int>& needed) {
  PortSources s;
  if (allow_from.empty()) return s;
  std::set<int> narrowed;
  for (int p : needed) {
    if (p == 80 || p == 443 || p == 6443 || (p == 22 && ssh)) narrowed.insert(p);
  }
  if (narrowed.empty()) return s;
  s.allow_from = allow_from;
  s.narrowed_ports.assign(narrowed.begin(), narrowed.end());
  return s;
}

std::string SourcesText(const PortSources& sources) {
  if (!sources.narrows()) return "open to 0.0.0.0/0";
  std::string cidrs;
  for (size_t i = 0; i < sources.allow_from.size(); ++i) {
    if (i > 0) cidrs += i + 1 == sources.allow_from.size() ? " and " : ", ";
    cidrs += sources.allow_from[i];
  }
  return PortsText(sources.narrowed_ports) + " open only to " + cidrs;
}

PortsPlan PlanPorts(bool vm_existed, const std::vector<int>& recorded_open,
                    const PortSources& recorded_sources, const std::vector<int>& needed,
                    const PortSources& wanted, bool can_open_ports) {
  PortsPlan plan;
  plan.sources_after = vm_existed ? recorded_sources : wanted;
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
    plan.sources_after = wanted;
  }
  plan.open_after.assign(open.begin(), open.end());
  if (plan.call_open_ports) plan.call_ports = needed;
  if (vm_existed && can_open_ports && !SameSources(recorded_sources, wanted)) {
    plan.reason += std::string(plan.reason.empty() ? "" : "; ") + "its sources change from " +
                   SourcesText(recorded_sources) + " to " + SourcesText(wanted);
    plan.call_open_ports = true;
    plan.call_ports = plan.open_after;
    plan.sources_after = wanted;
  }
  return plan;
}

PortsPlan EnsurePortsOpen(Cloud& cloud, const CloudVm& vm, bool vm_existed,
                          const std::vector<int>& recorded_open, const std::vector<int>& needed,
                          const PortSources& recorded_sources, const PortSources& wanted) {
  PortsPlan plan = PlanPorts(vm_existed, recorded_open, recorded_sources, needed, wanted,
                             cloud.info().has(GPUPROV_CAP_OPEN_PORTS));
  if (plan.call_open_ports) {
    Console::Get().Step("ports", "opening ports " + PortsText(plan.call_ports) + " of " + vm.name + " (" +
                        plan.reason + ")");
    cloud.OpenPorts(vm.id, vm.name, plan.call_ports, wanted);
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
