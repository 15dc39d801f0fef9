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
  for (const auto& r : records) rows.push_back({r, live.StateOf(r).value_or(r.phase)});
  if (app.json_output) {
    Poco::JSON::Array::Ptr arr = new Poco::JSON::Array;
    for (const auto& row : rows) arr->add(VmRecordObject(row.record, row.state));
    app.Print(arr);
    return 0;
  }
  if (rows.empty()) {
    console.Result("no VMs; create one with `gpuprov provision --name NAME`\n");
    return 0;
  }
  std::vector<VmRecord> shown;
  std::vector<std::string> states;
  std::vector<long> ages;
  for (const auto& row : rows) {
    shown.push_back(row.record);
    states.push_back(row.state);
    ages.push_back(RecordAgeSeconds(row.record.created_at));
  }
  console.Result(ListTable(shown, states, ages));
  return 0;
}

}  // namespace gpuprov
