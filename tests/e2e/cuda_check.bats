#!/usr/bin/env bats
# The CUDA check that ends a GPU node's bring-up, on a real test VM: the k3s simulator runs the
# check pod as the NVIDIA runtime would for the fake GPU's state (/etc/gpuprov-testvm/gpu-state)
# and its fault file (/etc/gpuprov-testvm/k3s-faults). Each cause of failure is named with what
# to do (exit 1, the VM kept, no check pod left behind), and the same provision passes once the
# node is healed. One VM (made by the first test) serves the file, which keeps it fast; each
# test leaves it healthy.

load helpers

setup_file() {
  start_docker_clouds cuda digitalocean
}

teardown_file() {
  use_emulator emu
  "$GPUPROV" down cu >/dev/null 2>&1 || true
  stop_emulators
}

setup() {
  use_emulator emu
}

provision_cu() {
  run "$GPUPROV" provision --name cu --cloud digitalocean --gpus H100:1 "$@"
  echo "$output"
}

# cuda_fails_then_heals BREAK HEAL MESSAGE HINT: with BREAK run on the node, a re-run of the same
# provision fails with "the CUDA check failed on cu: MESSAGE" and HINT, keeps the VM and leaves no
# check pod; after HEAL it passes again.
cuda_fails_then_heals() {
  run "$GPUPROV" ssh cu -- "$1"
  [ "$status" -eq 0 ]
  provision_cu
  [ "$status" -eq 1 ]
  [[ "$output" == *"the CUDA check failed on cu: $3"* ]]
  [[ "$output" == *"$4"* ]]
  [[ "$output" == *"the VM is kept"* ]]
  [[ "$output" == *"gpuprov down cu"* ]]
  [ "$(field cu phase)" = failed ]
  [[ "$(field cu probe.cuda_check)" == "failed: the CUDA check failed on cu: $3"* ]]
  [ "$(count digitalocean instances)" -eq 1 ]
  no_check_pod_left "$GPUPROV_HOME/kube/cu.yaml"
  run "$GPUPROV" ssh cu -- "$2"
  [ "$status" -eq 0 ]
  provision_cu
  [ "$status" -eq 0 ]
  assert_cuda_check
}

@test "a GPU node's phases end with the CUDA check; a re-run checks again and leaves no pod" {
  provision_cu
  [ "$status" -eq 0 ]
  assert_cuda_check
  [ "$(field cu probe.cuda_check)" = "passed: Done" ]
  field cu phase_seconds.cuda
  no_check_pod_left "$GPUPROV_HOME/kube/cu.yaml"
  provision_cu
  [ "$status" -eq 0 ]
  assert_cuda_check
  no_check_pod_left "$GPUPROV_HOME/kube/cu.yaml"
}

@test "--no-smoke-test skips the CUDA check, and says so in the record" {
  provision_cu --no-smoke-test
  [ "$status" -eq 0 ]
  [[ "$output" != *"running a CUDA program"* ]]
  [[ "$output" != *"CUDA check passed"* ]]
  [ "$(field cu probe.cuda_check)" = "skipped (smoke test off)" ]
}

@test "a driver upgraded under the running node: the NVML mismatch is named, reboot advised" {
  cuda_fails_then_heals \
    "printf 'kernel_module=535.183.01\nuserspace=550.54.15\n' >/etc/gpuprov-testvm/gpu-state" \
    "rm -f /etc/gpuprov-testvm/gpu-state" \
    "NVIDIA driver/library version mismatch" "sudo reboot"
}

@test "an NVSwitch machine without fabric manager: CUDA error 802 is named, fabric manager advised" {
  cuda_fails_then_heals \
    "printf 'nvswitch=1\nfabricmanager=inactive\n' >/etc/gpuprov-testvm/gpu-state" \
    "rm -f /etc/gpuprov-testvm/gpu-state" \
    'CUDA error 802 "system not yet initialized"' "systemctl enable --now nvidia-fabricmanager"
}

@test "an image too new for the driver: its unsatisfied NVIDIA_REQUIRE_CUDA is named" {
  cuda_fails_then_heals \
    "printf 'cuda=11.4\n' >/etc/gpuprov-testvm/gpu-state" \
    "rm -f /etc/gpuprov-testvm/gpu-state" \
    "the image nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda11.7.1-ubuntu20.04 is too new for the node's driver" \
    "unsatisfied condition: cuda>=11.7"
}

@test "an image the node cannot pull: the registry's answer is quoted" {
  cuda_fails_then_heals \
    "echo 'image-unpullable nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda11.7.1-ubuntu20.04' >/etc/gpuprov-testvm/k3s-faults" \
    "rm -f /etc/gpuprov-testvm/k3s-faults" \
    "the node could not pull the image" "crictl pull"
}

@test "a default runtime containerd does not have: the sandbox error is named" {
  cuda_fails_then_heals \
    "mv /usr/bin/nvidia-container-runtime /usr/bin/nvidia-container-runtime.off && systemctl restart k3s" \
    "mv /usr/bin/nvidia-container-runtime.off /usr/bin/nvidia-container-runtime && systemctl restart k3s" \
    'containerd has no runtime for the default runtime k3s was given (no runtime for "nvidia" is configured)' \
    "k3s did not find nvidia-container-runtime"
}
