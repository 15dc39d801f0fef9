#include "completion_command.h"

#include "completion.h"
#include "console.h"
#include "driver_host.h"
#include "offer_cache.h"
#include "state_store.h"

namespace gpuprov {
namespace {

/// Names for completion: working drivers (from the driver list cache) and VM records. Errors
/// give no names: a Tab must never print an error.
class MachineCompletionSources : public CompletionSources {
 public:
  explicit MachineCompletionSources(const AppContext& app) : app_(app) {}
  std::vector<std::string> Clouds() override {
    std::vector<std::string> names;
    try {
      DriverHost host = app_.MakeDriverHost();
      for (const auto& d : host.ListAll()) {
        if (d.ok() && d.shadowed_by.empty()) names.push_back(d.name);
      }
    } catch (const std::exception&) {
    }
    return names;
  }
  std::vector<std::string> Vms() override {
    std::vector<std::string> names;
    try {
      std::vector<std::string> problems;
      for (const auto& r : StateStore(app_.paths).List(&problems)) names.push_back(r.name);
    } catch (const std::exception&) {
    }
    return names;
  }
  std::vector<std::string> GpuTypes(const std::string& cloud) override {
    return RememberedGpuTypes(app_.paths.home() / "cache", cloud);
  }

 private:
  const AppContext& app_;
};

}  // namespace

int RunCompletion(const std::string& shell) {
  Console::Get().Result(CompletionScript(shell));
  return 0;
}

int RunComplete(const AppContext& app, const std::vector<Command>& commands,
                const std::vector<OptionSpec>& globals, std::vector<std::string> words) {
  MachineCompletionSources sources(app);
  if (words.empty()) words.push_back("");
  Console::Get().Result(CompletionReply(Complete(commands, globals, words, sources)));
  return 0;
}

}  // namespace gpuprov
