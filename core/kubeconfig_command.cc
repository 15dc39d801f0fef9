#include "kubeconfig_command.h"

#include <Poco/JSON/Object.h>

#include <filesystem>

#include "console.h"
#include "error.h"
#include "file_util.h"
#include "kubeconfig.h"
#include "kubeconfig_merge.h"
#include "remote.h"
#include "spec.h"
#include "state_store.h"
#include "vm_records.h"

namespace gpuprov {

int RunKubeconfig(const AppContext& app, const std::string& name,
                  const KubeconfigCommandOptions& options) {
  ValidateVmName(name, "VM name");
  Console& console = Console::Get();
  StateStore store(app.paths);
  VmRecord rec = LoadVmRecord(store, name);
  if (!rec.kubernetes) {
    throw UsageError("VM '" + name + "' has Kubernetes off: it has no kubeconfig",
                     "provision a VM with Kubernetes on (the default, or --k8s)");
  }
  if (rec.access_mode == "direct") {
    // The server is the VM's public address: follow it if a stop and start changed it.
    try {
      rec = Remote().follow_address(app, name);
    } catch (const Error& e) {
      console.Warning(std::string(e.what()) + " (the kubeconfig below names " + rec.public_ip +
                      ")");
    }
  }
  const std::filesystem::path own = app.paths.kubeconfig(name);
  const std::optional<std::string> text = ReadFileIfExists(own, kKubeconfigKind);
  if (!text) {
    throw Error("VM '" + name + "' has no kubeconfig yet (phase " + rec.phase + ")",
                "re-run `gpuprov provision --name " + name + "` to finish it");
  }
  const std::string context = KubeContextName(name);
  if (!options.merge && !options.switch_context) {
    if (app.json_output) {
      Poco::JSON::Object::Ptr o = new Poco::JSON::Object(Poco::JSON_PRESERVE_KEY_ORDER);
      o->set("name", name);
      o->set("context", context);
      o->set("file", own.string());
      o->set("server", ParseKubeconfig(*text).server);
      o->set("kubeconfig", *text);
      app.Print(o);
    } else {
      console.Result(*text);
    }
    return 0;
  }
  // The record names the file, so `down` removes exactly these entries; the VM lock keeps a
  // concurrent provision or down of the same VM from losing that line.
  FileLock lock = store.LockVm(name, 60 * 1000);
  rec = LoadVmRecord(store, name);
  const std::filesystem::path file = UserKubeconfigFile(ProcessEnv());
  const KubeconfigEdit edit = MergeKubeconfigFile(file, *text, context, options.switch_context,
                                                  app.paths.lock_dir() / "kubeconfig.lock");
  rec.extra[kKubeconfigMergedKey] = edit.file.string();
  store.Save(rec);
  if (app.json_output) {
    Poco::JSON::Object::Ptr o = new Poco::JSON::Object(Poco::JSON_PRESERVE_KEY_ORDER);
    o->set("name", name);
    o->set("context", context);
    o->set("file", edit.file.string());
    o->set("changed", edit.changed);
    o->set("backup", edit.backup.string());
    o->set("reemitted", edit.reemitted);
    o->set("current_context", options.switch_context);
    app.Print(o);
    return 0;
  }
  std::string out =
      (edit.changed ? "merged cluster, user and context " + context + " into "
                    : "cluster, user and context " + context + " already in ") +
      edit.file.string() +
      (edit.backup.empty() ? "" : " (previous contents in " + edit.backup.string() + ")") + "\n";
  if (edit.reemitted) {
    out += "the file was not in block style (a flow-style list or mapping), so it was rewritten "
           "whole as kubectl does: values and entries are as before, comments are not kept\n";
  }
  out += options.switch_context ? "current context: " + context + "; kubectl get nodes\n"
                                : "use it: kubectl --context " + context +
                                      " get nodes (or --switch to make it current)\n";
  console.Result(out);
  return 0;
}

}  // namespace gpuprov
