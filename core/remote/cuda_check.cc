#include "cuda_check.h"

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Stringifier.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <vector>

#include "console.h"
#include "elapsed.h"
#include "error.h"
#include "interrupt.h"
#include "kube_api_client.h"
#include "node_shell.h"

namespace gpuprov {
namespace {

using Poco::JSON::Array;
using Poco::JSON::Object;

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool Has(const std::string& lower_text, const char* needle) {
  return lower_text.find(needle) != std::string::npos;
}

/// The last \a n non-empty lines of \a text, joined with " / ".
std::string LastLines(const std::string& text, size_t n) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    line = TrimSpace(line);
    if (!line.empty()) lines.push_back(line);
  }
  std::string out;
  for (size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i) {
    out += (out.empty() ? "" : " / ") + lines[i];
  }
  return out;
}

/// The words from "unsatisfied condition: " to the next comma: "cuda>=12.5".
std::string UnsatisfiedCondition(const std::string& message) {
  const std::string lead = "unsatisfied condition: ";
  const size_t at = Lower(message).find(lead);
  if (at == std::string::npos) return "";
  const size_t from = at + lead.size();
  return TrimSpace(message.substr(from, message.find_first_of(",\n", from) - from));
}

Object::Ptr ObjectAt(const Object::Ptr& o, const std::string& key) {
  return o && o->isObject(key) ? o->getObject(key) : nullptr;
}

std::string Str(const Object::Ptr& o, const std::string& key) {
  return o ? o->optValue<std::string>(key, "") : "";
}

const std::string kPodsPath =
    std::string("https://127.0.0.1:6443/api/v1/namespaces/") + kCudaCheckNamespace + "/pods";

std::string PodPath(const std::string& pod) { return kPodsPath + "/" + pod; }

/// Deletes the check pods at once (gracePeriodSeconds=0) and waits up to 30 s until the API no
/// longer has them, so the names are free for the next pods.
std::string DeleteCommand(const std::vector<std::string>& pods) {
  std::string out = std::string(kNodeApiFunction);
  for (const auto& pod : pods) {
    out += "api -o /dev/null -X DELETE '" + PodPath(pod) + "?gracePeriodSeconds=0' 2>/dev/null\n";
  }
  out += "i=0\n";
  for (const auto& pod : pods) {
    out += "while [ \"$(api -o /dev/null -w '%{http_code}' '" + PodPath(pod) +
           "' 2>/dev/null)\" = 200 ] && [ $i -lt 30 ]; do sleep 1; i=$((i+1)); done\n";
  }
  return out;
}

/// Creates the pods whose JSON comes on stdin, one line each in the order of \a pods; prints a
/// "@@created@@" section (the API's answer) and a "@@code@@" section (its HTTP status) for each.
std::string CreateCommand(const std::vector<std::string>& pods) {
  std::string out = DeleteCommand(pods);
  for (std::size_t i = 0; i < pods.size(); ++i) {
    out += "IFS= read -r body\necho '@@created@@'\n"
           "printf '%s' \"$body\" | api -X POST -H 'Content-Type: application/json' "
           "--data-binary @- -w '\\n@@code@@\\n%{http_code}\\n' '" + kPodsPath + "' 2>&1\n";
  }
  return out;
}

/// For each of \a pods: "@@pod@@" (the pod), "@@events@@" (its events), "@@log@@" (its log's
/// tail), "@@end@@".
std::string PollCommand(const std::vector<std::string>& pods) {
  std::string out = std::string(kNodeApiFunction);
  for (const auto& pod : pods) {
    out += "echo '@@pod@@'\napi '" + PodPath(pod) + "' 2>/dev/null\necho\n"
           "echo '@@events@@'\napi 'https://127.0.0.1:6443/api/v1/namespaces/" +
           kCudaCheckNamespace + "/events?fieldSelector=involvedObject.name%3D" + pod +
           "' 2>/dev/null\necho\n"
           "echo '@@log@@'\napi -f '" + PodPath(pod) + "/log?tailLines=20' 2>/dev/null\necho\n"
           "echo '@@end@@'\n";
  }
  return out;
}

using Sections = std::map<std::string, std::string>;

/// \a output cut before each line that is exactly \a marker (what precedes the first dropped),
/// each part parsed into sections (NodeOutputSections): one part per pod of a command above.
std::vector<Sections> PartsAt(const std::string& output, const std::string& marker) {
  std::vector<std::string> parts;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    if (line == marker) parts.emplace_back();
    if (!parts.empty()) parts.back() += line + "\n";
  }
  std::vector<Sections> out;
  for (const auto& part : parts) out.push_back(NodeOutputSections(part));
  return out;
}

/// The VM whose API holds the check pod: the cluster's server for a node of a cluster.
const std::string& ApiVm(const CudaCheckInputs& in) {
  return in.api_vm.empty() ? in.vm_name : in.api_vm;
}

/// The tail every failure hint ends with.
std::string KeptTail(const CudaCheckInputs& in) {
  const std::string& api_vm = ApiVm(in);
  return "the VM is kept: look with `gpuprov ssh " + api_vm + " -- sudo k3s kubectl -n " +
         kCudaCheckNamespace + " get events`; retry with the same `gpuprov provision` "
         "(--no-smoke-test skips this check); remove: `gpuprov down " + api_vm + "`";
}

/// What a verdict that is not kPassed means, as RunCudaCheck throws it.
Error VerdictError(const CudaCheckVerdict& v, const CudaCheckInputs& in) {
  const std::string& vm = in.vm_name;
  if (v.state == CudaCheckState::kRunning) {
    return Error("the CUDA check on " + vm + " did not finish within " +
                     std::to_string(in.wait.count()) + "s (" + v.detail + ")",
                 KeptTail(in));
  }
  if (v.failure.cause.empty()) {
    return Error("the CUDA check failed on " + vm + ": the CUDA program in " + in.image +
                     " failed (" + v.detail + ")",
                 KeptTail(in));
  }
  return Error("the CUDA check failed on " + vm + ": " + v.failure.cause + " (" + v.detail + ")",
               v.failure.hint + "; " + KeptTail(in));
}

}  // namespace

CudaFailure CudaFailureIn(const std::string& message, const std::string& vm,
                          const std::string& image) {
  const std::string m = Lower(message);
  const std::string ssh = "`gpuprov ssh " + vm + " -- ";
  if (Has(m, "driver/library version mismatch")) {
    return {"NVIDIA driver/library version mismatch (the loaded kernel module and the installed "
            "user-space libraries differ, as after a driver upgrade under the running node)",
            "reboot the node so the new kernel module loads (" + ssh + "sudo reboot`), then "
            "re-run the same `gpuprov provision`"};
  }
  if (Has(m, "system not yet initialized") || Has(m, "cudaerrorsystemnotready") ||
      Has(m, "error 802")) {
    return {"CUDA error 802 \"system not yet initialized\": the NVSwitch fabric manager is not "
            "running on this NVSwitch machine",
            "start it: " + ssh + "sudo systemctl enable --now nvidia-fabricmanager` (package "
            "nvidia-fabricmanager-<driver branch>, matching the driver exactly), then re-run "
            "the same `gpuprov provision`"};
  }
  if (Has(m, "unsatisfied condition: cuda")) {
    return {"the image " + image + " is too new for the node's driver (its NVIDIA_REQUIRE_CUDA "
            "is not met: unsatisfied condition: " + UnsatisfiedCondition(message) + ")",
            "use an image built for the CUDA version the driver supports (" + ssh +
                "nvidia-smi` shows it): smoke_test_image in config.toml [defaults]; or upgrade "
                "the node's driver"};
  }
  if (Has(m, "no runtime for")) {
    return {"containerd has no runtime for the default runtime k3s was given (" +
                TrimSpace(message.substr(m.find("no runtime for"))) + ")",
            "k3s did not find nvidia-container-runtime (in /usr/local/nvidia/toolkit or "
            "/usr/bin) when it started: check " + ssh + "ls -l /usr/bin/nvidia-container-runtime` "
            "and " + ssh + "sudo grep -A3 nvidia /var/lib/rancher/k3s/agent/etc/containerd/"
            "config.toml`; install the NVIDIA container toolkit, then " + ssh +
            "sudo systemctl restart k3s`"};
  }
  if (Has(m, "errimagepull") || Has(m, "imagepullbackoff") || Has(m, "failed to pull") ||
      Has(m, "pull access denied") || Has(m, "invalidimagename")) {
    return {"the node could not pull the image " + image,
            "check the image name and that the node reaches its registry (" + ssh +
                "sudo k3s crictl pull " + image + "`); set smoke_test_image in config.toml "
                "[defaults] to an image the node can pull"};
  }
  return {};
}

CudaCheckVerdict JudgeCudaCheck(const std::string& pod_json, const std::string& events_json,
                                const std::string& log, const std::string& vm,
                                const std::string& image) {
  CudaCheckVerdict v;
  Object::Ptr pod = ParseKubeObject(TrimSpace(pod_json));
  if (!pod || Str(pod, "kind") == "Status") {
    v.detail = pod ? "the API answers: " + Str(pod, "message") : "no answer from the API";
    return v;
  }
  const Object::Ptr status = ObjectAt(pod, "status");
  const std::string uid = Str(ObjectAt(pod, "metadata"), "uid");
  const std::string phase = Str(status, "phase");

  // Container states: a pull that failed, a container the runtime would not create or start.
  std::string waiting, terminated_message;
  if (status && status->isArray("containerStatuses")) {
    Array::Ptr css = status->getArray("containerStatuses");
    for (size_t i = 0; i < css->size(); ++i) {
      Object::Ptr state = ObjectAt(css->getObject(static_cast<unsigned>(i)), "state");
      if (Object::Ptr w = ObjectAt(state, "waiting")) {
        const std::string reason = Str(w, "reason");
        const std::string message = Str(w, "message");
        if (reason == "ErrImagePull" || reason == "ImagePullBackOff" ||
            reason == "InvalidImageName" || reason == "ErrImageNeverPull") {
          v.state = CudaCheckState::kFailed;
          v.detail = reason + ": " + message;
          v.failure = CudaFailureIn(v.detail, vm, image);
          if (v.failure.cause.empty()) v.failure = CudaFailureIn("ErrImagePull", vm, image);
          return v;
        }
        if (reason == "CreateContainerError" || reason == "RunContainerError" ||
            reason == "CreateContainerConfigError") {
          v.state = CudaCheckState::kFailed;
          v.detail = reason + ": " + message;
          v.failure = CudaFailureIn(message, vm, image);
          return v;
        }
        if (!reason.empty()) waiting = reason + (message.empty() ? "" : ": " + message);
      }
      if (Object::Ptr t = ObjectAt(state, "terminated"); t && terminated_message.empty()) {
        terminated_message = Str(t, "message");
        if (terminated_message.empty() && Str(t, "reason") != "Completed") {
          terminated_message = Str(t, "reason") + " (exit " +
                               std::to_string(t->optValue<int>("exitCode", 0)) + ")";
        }
      }
    }
  }

  // The pod's events: a sandbox containerd cannot make does not pass by waiting.
  std::string last_warning;
  if (Object::Ptr events = ParseKubeObject(TrimSpace(events_json));
      events && events->isArray("items")) {
    Array::Ptr items = events->getArray("items");
    for (size_t i = 0; i < items->size(); ++i) {
      Object::Ptr ev = items->getObject(static_cast<unsigned>(i));
      if (!uid.empty() && Str(ObjectAt(ev, "involvedObject"), "uid") != uid) continue;
      const std::string reason = Str(ev, "reason");
      const std::string message = Str(ev, "message");
      if (reason == "FailedCreatePodSandBox" &&
          message.find("no runtime for") != std::string::npos) {
        v.state = CudaCheckState::kFailed;
        v.detail = reason + ": " + message;
        v.failure = CudaFailureIn(message, vm, image);
        return v;
      }
      if (Str(ev, "type") == "Warning") last_warning = reason + ": " + message;
    }
  }

  if (phase == "Succeeded") {
    v.state = CudaCheckState::kPassed;
    v.detail = LastLines(log, 1);
    return v;
  }
  if (phase == "Failed") {
    v.state = CudaCheckState::kFailed;
    const std::string program = LastLines(log, 3);
    v.detail = !terminated_message.empty() && !program.empty()
                   ? terminated_message + "; log: " + program
                   : (terminated_message.empty() ? program : terminated_message);
    v.failure = CudaFailureIn(terminated_message + "\n" + log, vm, image);
    return v;
  }
  v.detail = phase.empty() ? "Pending" : phase;
  if (!waiting.empty()) v.detail += ", " + waiting;
  if (status && status->isArray("conditions")) {
    Array::Ptr conds = status->getArray("conditions");
    for (size_t i = 0; i < conds->size(); ++i) {
      Object::Ptr c = conds->getObject(static_cast<unsigned>(i));
      if (Str(c, "type") == "PodScheduled" && Str(c, "status") == "False") {
        v.detail += ", " + Str(c, "reason") + ": " + Str(c, "message");
      }
    }
  }
  if (!last_warning.empty()) v.detail += "; last warning " + last_warning;
  return v;
}

std::string CudaCheckPodJson(const std::string& image, int gpus, const std::string& pod_name,
                             const std::string& node_name) {
  Object limits;
  limits.set("nvidia.com/gpu", std::to_string(gpus));
  Object resources;
  resources.set("limits", limits);
  Object container;
  container.set("name", "cuda");
  container.set("image", image);
  container.set("resources", resources);
  Array containers;
  containers.add(container);
  Object toleration;
  toleration.set("key", "nvidia.com/gpu");
  toleration.set("operator", "Exists");
  toleration.set("effect", "NoSchedule");
  Array tolerations;
  tolerations.add(toleration);
  Object spec;
  spec.set("restartPolicy", "Never");
  spec.set("containers", containers);
  spec.set("tolerations", tolerations);
  if (!node_name.empty()) spec.set("nodeName", node_name);
  Object labels;
  labels.set("app.kubernetes.io/managed-by", "gpuprov");
  Object metadata;
  metadata.set("name", pod_name);
  metadata.set("namespace", kCudaCheckNamespace);
  metadata.set("labels", labels);
  Object pod;
  pod.set("apiVersion", "v1");
  pod.set("kind", "Pod");
  pod.set("metadata", metadata);
  pod.set("spec", spec);
  std::ostringstream out;
  Poco::JSON::Stringifier::stringify(pod, out);
  return out.str();
}

std::string CudaCheckPodName(const CudaCheckInputs& in) {
  return in.node_name.empty() ? std::string(kCudaCheckPod)
                              : std::string(kCudaCheckPod) + "-" + in.vm_name;
}

std::vector<CudaCheckOutcome> RunCudaChecks(NodeShell& shell,
                                            const std::vector<CudaCheckInputs>& checks) {
  Console& console = Console::Get();
  const auto timeout = std::chrono::seconds(60);
  const std::size_t n = checks.size();
  std::vector<CudaCheckOutcome> outcomes(n);
  std::vector<std::string> pods;
  std::string bodies;
  for (std::size_t i = 0; i < n; ++i) {
    outcomes[i].vm_name = checks[i].vm_name;
    pods.push_back(CudaCheckPodName(checks[i]));
    bodies += CudaCheckPodJson(checks[i].image, checks[i].gpus, pods[i], checks[i].node_name) +
              "\n";
  }
  if (n == 0) return outcomes;
  const std::string what = n == 1 ? "create CUDA check pod" : "create CUDA check pods";
  SshRunResult created = shell.RunAsRoot(what, CreateCommand(pods), bodies, timeout);
  std::vector<Sections> answers = PartsAt(created.stdout_text, "@@created@@");
  std::vector<std::size_t> running;  // the checks whose pod was made, by index
  for (std::size_t i = 0; i < n; ++i) {
    Sections a = i < answers.size() ? answers[i] : Sections{};
    const std::string code = TrimSpace(a["code"]);
    if (code == "201" || code == "200") {
      running.push_back(i);
      continue;
    }
    Object::Ptr answer = ParseKubeObject(TrimSpace(a["created"]));
    outcomes[i].error = "the CUDA check pod could not be created on " + checks[i].vm_name +
                        " (HTTP " + (code.empty() ? "none" : code) + "): " +
                        (answer ? Str(answer, "message") : LastLines(a["created"], 2));
    outcomes[i].hint = KeptTail(checks[i]);
  }
  if (running.empty()) return outcomes;

  std::vector<std::string> made;
  for (std::size_t i : running) made.push_back(pods[i]);
  const auto start = std::chrono::steady_clock::now();
  std::vector<CudaCheckVerdict> verdicts(n);
  try {
    std::vector<std::size_t> waiting = running;
    while (!waiting.empty()) {
      std::vector<std::string> polled;
      for (std::size_t i : waiting) polled.push_back(pods[i]);
      SshRunResult r = shell.RunAsRoot("CUDA check", PollCommand(polled), "", timeout);
      std::vector<Sections> parts = PartsAt(r.stdout_text, "@@pod@@");
      std::vector<std::size_t> still;
      for (std::size_t k = 0; k < waiting.size(); ++k) {
        const std::size_t i = waiting[k];
        Sections p = k < parts.size() ? parts[k] : Sections{};
        verdicts[i] = JudgeCudaCheck(p["pod"], p["events"], p["log"], checks[i].vm_name,
                                     checks[i].image);
        if (verdicts[i].state == CudaCheckState::kRunning && Since(start) < checks[i].wait) {
          still.push_back(i);
        }
      }
      waiting = still;
      if (waiting.empty()) break;
      const CudaCheckInputs& first = checks[waiting.front()];
      console.Progress("CUDA check" + (n == 1 ? "" : " on " + first.vm_name) + ": " +
                           verdicts[waiting.front()].detail +
                           (waiting.size() > 1
                                ? " (" + std::to_string(waiting.size()) + " nodes running)"
                                : ""),
                       Since(start));
      PauseUnlessInterrupted(first.poll_interval, "running the CUDA check");
    }
  } catch (const Error&) {
    shell.RunAsRoot(n == 1 ? "delete CUDA check pod" : "delete CUDA check pods",
                    DeleteCommand(made), "", timeout);
    throw;
  }
  shell.RunAsRoot(n == 1 ? "delete CUDA check pod" : "delete CUDA check pods",
                  DeleteCommand(made), "", timeout);
  for (std::size_t i : running) {
    if (verdicts[i].state == CudaCheckState::kPassed) {
      outcomes[i].passed = true;
      outcomes[i].last_line = verdicts[i].detail;
      continue;
    }
    const Error e = VerdictError(verdicts[i], checks[i]);
    outcomes[i].error = e.what();
    outcomes[i].hint = e.hint();
  }
  return outcomes;
}

std::string RunCudaCheck(NodeShell& shell, const CudaCheckInputs& in) {
  const CudaCheckOutcome o = RunCudaChecks(shell, {in}).front();
  if (!o.passed) throw Error(o.error, o.hint);
  return o.last_line;
}

}  // namespace gpuprov
