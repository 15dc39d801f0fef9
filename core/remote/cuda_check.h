// The CUDA check: the last phase of a GPU node's bring-up. `nvidia-smi` and an allocatable
// `nvidia.com/gpu` do not prove that CUDA works (an NVSwitch machine without fabric manager, a
// driver upgraded under the running node, an image too new for the driver all pass them), so a
// pod that requests the node's GPUs, with no runtimeClassName (containerd's default runtime
// must be nvidia, as for the device plugin), runs a short CUDA program through the Kubernetes
// API. A failure names its cause from the pod's status, events and log.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "provision_options.h"

namespace gpuprov {

class NodeShell;

inline constexpr const char* kCudaCheckPod = "gpuprov-cuda-check";
inline constexpr const char* kCudaCheckNamespace = "kube-system";

/// A known way a GPU container fails, found in a message of the runtime, kubelet or program.
struct CudaFailure {
  std::string cause;  // "" when the message names none of them
  std::string hint;   // what to do, without the VM-is-kept tail
};

/// The cause \a message names (case-insensitive): the NVML driver/library version mismatch,
/// CUDA error 802 (fabric manager), an unsatisfied NVIDIA_REQUIRE_CUDA, an image pull failure
/// (\a message from ErrImagePull/ImagePullBackOff), a runtime handler containerd lacks.
CudaFailure CudaFailureIn(const std::string& message, const std::string& vm,
                          const std::string& image);

enum class CudaCheckState { kRunning, kPassed, kFailed };

struct CudaCheckVerdict {
  CudaCheckState state = CudaCheckState::kRunning;
  std::string detail;  // kRunning: what the pod waits on; kFailed: the message quoted
  CudaFailure failure;  // kFailed: the cause named ("" cause: the program failed otherwise)
};

/// What the check pod's state says: \a pod_json (GET pod), \a events_json (its events, an
/// EventList), \a log (its container's log, "" when none). A pod still Pending that already
/// shows a failure that does not pass by waiting (a pull failure, a sandbox without its runtime)
/// is kFailed.
CudaCheckVerdict JudgeCudaCheck(const std::string& pod_json, const std::string& events_json,
                                const std::string& log, const std::string& vm,
                                const std::string& image);

/// The check pod as JSON: \a gpus GPUs in limits, restartPolicy Never, no runtimeClassName,
/// tolerating the nvidia.com/gpu taint. \a pod_name (default kCudaCheckPod); with \a node_name
/// the pod is bound to that node (spec.nodeName: its kubelet runs it, no scheduler).
std::string CudaCheckPodJson(const std::string& image, int gpus,
                             const std::string& pod_name = kCudaCheckPod,
                             const std::string& node_name = "");

struct CudaCheckInputs {
  std::string vm_name;
  std::string image = kDefaultSmokeTestImage;
  int gpus = 1;
  std::chrono::seconds wait{300};  // the image pull included
  std::chrono::milliseconds poll_interval{1000};
  /// A node of a multi-node cluster: the Kubernetes node the pod is bound to, and the VM whose
  /// API runs it (the cluster's server). "" : the pod kCudaCheckPod goes where the scheduler
  /// puts it, through \a vm_name's own API (a single node).
  std::string node_name;
  std::string api_vm;
};

/// The check pod's name: kCudaCheckPod for a single node, "gpuprov-cuda-check-<vm>" for a
/// node of a cluster (one pod per node, all at once).
std::string CudaCheckPodName(const CudaCheckInputs& in);

/// Deletes any earlier check pod, creates the pod, waits for its verdict and deletes it again
/// (also on failure). Returns the log's last line on success; throws Error(message, hint) naming
/// the cause on failure or when \a in.wait runs out.
std::string RunCudaCheck(NodeShell& shell, const CudaCheckInputs& in);

/// One node's CUDA check in a cluster: passed with the log's last line, or the Error
/// RunCudaCheck would have thrown (message and hint).
struct CudaCheckOutcome {
  std::string vm_name;
  bool passed = false;
  std::string last_line;
  std::string error;
  std::string hint;
};

/// The CUDA check on several nodes at once through one API (\a shell: the cluster's server):
/// every pod is created, then all are polled in one round trip each time until each has its
/// verdict or the longest wait runs out, then all are deleted. One outcome per check, in
/// order. Throws Error only when the pods cannot be created or the API cannot be reached.
std::vector<CudaCheckOutcome> RunCudaChecks(NodeShell& shell,
                                            const std::vector<CudaCheckInputs>& checks);

}  // namespace gpuprov
