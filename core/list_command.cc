#include "list_command.h"

#include <Poco/JSON/Array.h>

#include <string>
#include <vector>

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
    Poco::JSON::Array::Ptr arr = new Poco::JSON::Array;
    for (const auto& row : rows) {
      Poco::JSON::Object::Ptr o = VmRecordObject(row.record, row.state);
      if (row.state == "preempted") o->set("preempted_reason", row.preempted_reason);
      arr->add(o);
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
  console.Result(ListTable(shown, states, ages) + PreemptedNotes(shown, states, reasons));
  return 0;
}

}  // namespace gpuprov
