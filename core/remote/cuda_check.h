// The CUDA check: the last phase of a GPU node's bring-up. `nvidia-smi` and an allocatable
// `nvidia.com/gpu` do not prove that CUDA works (an NVSwitch machine without fabric manager, a
// driver upgraded under the running node, an image too new for the driver all pass them), so a
// pod that requests the node's GPUs, with no runtimeClassName (containerd's default runtime
// must be nvidia, as for the device plugin), runs a short CUDA program through the Kubernetes
// API. A failure names its cause from the pod's status, events and log.
#pragma once

#include <chrono>
#include <string>

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
/// tolerating the nvidia.com/gpu taint.
std::string CudaCheckPodJson(const std::string& image, int gpus);

struct CudaCheckInputs {
  std::string vm_name;
  std::string image = kDefaultSmokeTestImage;
  int gpus = 1;
  std::chrono::seconds wait{300};  // the image pull included
  std::chrono::milliseconds poll_interval{1000};
};

/// Deletes any earlier check pod, creates the pod, waits for its verdict and deletes it again
/// (also on failure). Returns the log's last line on success; throws Error(message, hint) naming
/// the cause on failure or when \a in.wait runs out.
std::string RunCudaCheck(NodeShell& shell, const CudaCheckInputs& in);

}  // namespace gpuprov
