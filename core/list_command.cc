#include "list_command.h"

#include <Poco/JSON/Array.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "cluster_nodes.h"
#include "console.h"
#include "state_store.h"
#include "vm_records.h"

namespace gpuprov {
namespace {

/// What the user sees as the VM's state: the cloud's word when we asked, else the record's phase.
struct ListedVm {
  VmRecord record;
  std::string state;
  std::string preempted_reason;  // the cloud's reason when state is "preempted"
};

}  // namespace

int RunList(const AppContext& app, bool refresh) {
  Console& console = Console::Get();
  StateStore store(app.paths);
  std::vector<std::string> problems;
  std::vector<VmRecord> records = store.List(&problems);
  for (const auto& p : problems) console.Warning(p);

  const LiveStates live = refresh ? AskLiveStates(app, records) : LiveStates{};
  std::vector<ListedVm> rows;
  for (const auto& r : records) {
    rows.push_back({r, live.StateOf(r).value_or(r.phase), live.PreemptedReasonOf(r)});
  }
  if (app.json_output) {
    // A cluster is its server's object with a `nodes` array: the server, then its agents. An
    // agent whose server has no record is listed on its own.
    Poco::JSON::Array::Ptr arr = new Poco::JSON::Array;
    std::map<std::string, Poco::JSON::Array::Ptr> nodes_of;
    for (const auto& row : rows) {
      if (row.record.role == "server" && !row.record.cluster.empty()) {
        nodes_of[row.record.cluster] = new Poco::JSON::Array;
      }
    }
    for (const auto& row : rows) {
      Poco::JSON::Object::Ptr o = VmRecordObject(row.record, row.state);
      if (row.state == "preempted") o->set("preempted_reason", row.preempted_reason);
      auto cluster = nodes_of.find(row.record.cluster);
      if (cluster == nodes_of.end()) {
        arr->add(o);
        continue;
      }
      if (row.record.role == "server") {
        Poco::JSON::Object::Ptr top = VmRecordObject(row.record, row.state);
        top->set("cluster_nodes", std::max(row.record.cluster_nodes, 1));
        top->set("nodes", cluster->second);
        arr->add(top);
      }
      cluster->second->add(o);
    }
    for (auto& [name, nodes] : nodes_of) {
      // The server first, the agents by index (rows are sorted by name).
      std::vector<Poco::JSON::Object::Ptr> sorted;
      for (std::size_t i = 0; i < nodes->size(); ++i) sorted.push_back(nodes->getObject(i));
      std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
        return a->template getValue<int>("node_index") < b->template getValue<int>("node_index");
      });
      nodes->clear();
      for (const auto& o : sorted) nodes->add(o);
    }
    app.Print(arr);
    return 0;
  }
  if (rows.empty()) {
    console.Result("no VMs; create one with `gpuprov provision --name NAME`\n");
    return 0;
  }
  std::vector<VmRecord> shown;
  std::vector<std::string> states;
  std::vector<std::string> reasons;
  std::vector<long> ages;
  for (const auto& row : rows) {
    shown.push_back(row.record);
    states.push_back(row.state);
    reasons.push_back(row.preempted_reason);
    ages.push_back(RecordAgeSeconds(row.record.created_at));
  }
  std::string table = ListTable(shown, states, ages) + PreemptedNotes(shown, states, reasons);
  for (const std::string& line : ClusterLines(records)) table += line + "\n";
  console.Result(table);
  return 0;
}

}  // namespace gpuprov
