#!/usr/bin/env bats
# Prime Intellect offers that are containers (plugins/primeintellect/REFERENCE.md: a pod lands on an
# upstream provider, and RunPod gives a container where systemd is not PID 1). The emulator's
# docker backend gives its RunPod offers exactly that: the test image with sshd as PID 1. With
# Kubernetes on, the driver skips them even when cheapest; with --no-k8s the cheapest is taken
# and SSH works; a container let through by vm_providers is named by the first cluster probe.

load helpers

setup_file() {
  export PRIME_API_KEY="pit_containers_$$_secret_key"
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  start_emulator emu --backend docker --clouds primeintellect
}

teardown_file() {
  stop_emulators
}

setup() {
  use_emulator emu
  # A boot install wait far longer than any test here: a test that waited would time out.
  config ''
}

teardown() {
  end_docker_test
}

# config TEXT: config.toml with the test timeouts and TEXT after them.
config() {
  printf '[defaults.timeouts]\nssh_wait_seconds = 180\nboot_install_wait_seconds = 900\napi_wait_seconds = 60\n%s\n' \
    "$1" >"$GPUPROV_HOME/config.toml"
}

@test "k8s on: the cheapest A100 is a RunPod container; it is skipped, said so, and the cluster is on a VM" {
  run "$GPUPROV" -v provision --name pic-k8s --cloud primeintellect --gpus A100:1
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"skipping 1 offer not from a VM provider (k3s needs systemd as PID 1"* ]]
  [[ "$output" == *"NVIDIA A100 80GB PCIe@runpod in US-KS-2 \$1.19/h (container)"* ]]
  [[ "$output" == *"offer: 1A100.22V in FIN-01"* ]]
  [[ "$output" == *"on datacrunch in FIN-01"* ]]
  [ "$(field pic-k8s probe.pid1)" = systemd ]
  run "$GPUPROV" ssh pic-k8s -- cat /proc/1/comm
  [ "$output" = systemd ]
  # A validated cluster (tunnel mode: kubectl needs `gpuprov tunnel`, see cluster.bats).
  [ "$(field pic-k8s phase)" = ready ]
  [ -e "$GPUPROV_HOME/kube/pic-k8s.yaml" ]
  run "$GPUPROV" down pic-k8s
  [ "$status" -eq 0 ]
  expect_nothing_left primeintellect
}

@test "--no-k8s: the cheapest offer, a RunPod container without systemd, is taken and gpuprov ssh works" {
  run "$GPUPROV" provision --name pic-plain --cloud primeintellect --gpus A100:1 --no-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"offer: NVIDIA A100 80GB PCIe in US-KS-2"* ]]
  [[ "$output" != *"skipping"* ]]
  run "$GPUPROV" ssh pic-plain -- 'cat /proc/1/comm; test -d /run/systemd/system || echo no-systemd; nvidia-smi -L'
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == "sshd"* ]]
  [[ "$output" == *"no-systemd"* ]]
  [[ "$output" == *"NVIDIA A100"* ]]
  run "$GPUPROV" down pic-plain
  [ "$status" -eq 0 ]
  expect_nothing_left primeintellect
}

@test "k8s on: a GPU only containers offer is refused before anything is created, naming them and the fix" {
  run "$GPUPROV" provision --name pic-a6000 --cloud primeintellect --gpus RTX-A6000:1
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"NVIDIA RTX A6000@runpod in EU-RO-1 \$0.49/h (container)"* ]]
  [[ "$output" == *"--no-k8s"* ]]
  [[ "$output" == *"vm_providers in [clouds.primeintellect]"* ]]
  [ ! -e "$GPUPROV_HOME/state/pic-a6000.json" ]
  [ "$(count primeintellect instances)" -eq 0 ]
  [ "$(count primeintellect ssh_keys)" -eq 0 ]
}

@test "a container let through by vm_providers is named after one probe with the fix; down leaves nothing" {
  config $'[clouds.primeintellect]\nvm_providers = "runpod"'
  local start=$SECONDS
  run "$GPUPROV" -v provision --name pic-forced --cloud primeintellect --gpus A100:1
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"offer: NVIDIA A100 80GB PCIe in US-KS-2"* ]]
  [[ "$output" == *"error: pic-forced: this node cannot host k3s: systemd is not PID 1 (PID 1 is sshd; a docker container, not a VM)"* ]]
  [[ "$output" == *"--no-k8s"* ]]
  [[ "$output" == *"vm_providers"* ]]
  [[ "$output" == *"gpuprov down pic-forced"* ]]
  # One probe, nothing pushed, no wait: far below the 900 s boot install wait.
  [ "$(round_trips "$output" probe)" -eq 1 ]
  [ "$(round_trips "$output" "push installer")" -eq 0 ]
  [ $((SECONDS - start)) -lt 120 ]
  [[ "$(field pic-forced probe.decision)" == "fail: this node cannot host k3s"* ]]
  [ "$(field pic-forced probe.container)" = docker ]
  [ "$(field pic-forced phase)" = failed ]
  run "$GPUPROV" down pic-forced
  echo "$output"
  [ "$status" -eq 0 ]
  expect_nothing_left primeintellect
  [ ! -e "$GPUPROV_HOME/state/pic-forced.json" ]
}
