#!/usr/bin/env bats
# gpuprov on Hyperstack through the emulator (tests/emulators/hyperstack_api.cc):
# - docker backend: Kubernetes by the boot route (cloud-init in the test VM runs the installer),
#   direct access through the VM's security rules, the real kubectl, a re-run that reuses, down;
#   a gpuprov killed while creating, found by name on re-run (through a floating IP that comes
#   late: ACTIVE without an address for a while).
#   The Kubernetes test also crashes the cluster's points (issue 15, cluster_crash_chain of
#   crash_points.bash): its VM is made by runs killed at each point the route reaches.
# - memory backend: the faults that end before SSH (capacity, 429, 5xx, a refused key, a VM
#   vanishing, ERROR, a floating IP that never comes), each with a clear message and nothing
#   left behind: the emulator's counts
#   of VMs, key pairs, security rules and environments are back to zero.

load helpers
load crash_points
bats_require_minimum_version 1.5.0

setup_file() {
  export HYPERSTACK_API_KEY="hs-e2e-$$-api-key"
  export HOME="$BATS_FILE_TMPDIR/userhome" # no ~/.hyperstack of the machine's user
  mkdir -p "$HOME"
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  start_emulator docker --clouds hyperstack --backend docker
  start_emulator memory --clouds hyperstack --backend memory --boot-seconds 1
}

teardown_file() {
  stop_emulators
}

setup() {
  # Deletes are polled fast. (Retries keep the kit's defaults: config.toml takes no nested
  # table in [clouds.<name>]; six attempts end within seconds.)
  cat >"$GPUPROV_HOME/config.toml" <<'EOF'
[defaults.timeouts]
ssh_wait_seconds = 180
api_wait_seconds = 120

[clouds.hyperstack]
poll_interval_ms = 500
delete_retry_ms = 1000
EOF
}

teardown() {
  reset_emulators
  rm -f "$GPUPROV_HOME"/state/*.json
}

# nothing_left: no VM (in the API or behind it), key pair, security rule or environment.
nothing_left() {
  expect_nothing_left hyperstack ssh_keys security_rules environments
}

@test "hyperstack: Kubernetes by the boot route, direct access, kubectl works; a re-run reuses; down leaves nothing" {
  use_emulator docker
  # The cluster's crash points (issue 15): the VM is made by runs killed after the host key is
  # pinned and after the kubeconfig is written; the run below is their re-run. The boot install
  # learns the floating IP from OpenStack's EC2-compatible metadata (plugins/hyperstack/REFERENCE.md §6), so the
  # certificate covers it: no SAN re-run.
  cluster_crash_chain hyperstack hs-k8s "host-key-pinned kubeconfig-written" --gpus A100:1
  run "$GPUPROV" -v provision --name hs-k8s --cloud hyperstack --gpus A100:1
  echo "$output"
  [ "$status" -eq 0 ]
  assert_cuda_check
  cluster_crash_converged hyperstack hs-k8s "$output"
  expect_k8s_by_boot_route "$output"
  expect_address_learned_at_boot hs-k8s "$CHAIN_OUTPUT$output"
  [[ "$CHAIN_OUTPUT$output" == *"n3-A100x1"* ]]
  [[ "$output" == *"nvidia.com/gpu: 1"* ]]
  [[ "$output" != *"$HYPERSTACK_API_KEY"* ]]
  run ! grep -rqF "$HYPERSTACK_API_KEY" "$GPUPROV_HOME"
  # One VM with the four rules of direct access, one key pair, gpuprov's environment.
  [ "$(count hyperstack instances)" -eq 1 ]
  [ "$(count hyperstack security_rules)" -eq 4 ]
  [ "$(count hyperstack ssh_keys)" -eq 1 ]
  [ "$(count hyperstack environments)" -eq 1 ]
  # The boot script went in as raw cloud-init text, not base64.
  curl -fsS "$CONTROL/instances?cloud=hyperstack" | /usr/bin/python3 -c '
import json, sys
vm = json.load(sys.stdin)["instances"][0]
assert vm["user_data"].startswith("#!/bin/bash"), vm["user_data"][:40]
assert sorted(vm["allowed_ports"]) == [22, 80, 443, 6443], vm["allowed_ports"]'
  kc="$GPUPROV_HOME/kube/hs-k8s.yaml"
  grep -q "server: https://127\.90\.[0-9.]*:6443" "$kc"
  expect_cluster_ready hs-k8s

  run "$GPUPROV" provision --name hs-k8s --cloud hyperstack --gpus A100:1
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"reusing"* ]]
  [ "$(count hyperstack instances)" -eq 1 ]
  [ "$(count hyperstack ssh_keys)" -eq 1 ]
  [ "$(count hyperstack environments)" -eq 1 ]
  expect_cluster_ready hs-k8s

  run "$GPUPROV" down hs-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  [ ! -e "$kc" ]
  nothing_left
  cluster_crash_passed hyperstack "boot, direct"
}

@test "hyperstack: a killed provision is found by name on re-run, through a floating IP that comes late" {
  use_emulator docker
  fault '{"cloud":"hyperstack","fault":"ip_after_boot","seconds":6}'
  "$GPUPROV" provision --name hs-rerun --cloud hyperstack --no-k8s 3>&- &
  pid=$!
  for _ in $(seq 1 100); do
    [ "$(count hyperstack instances)" -eq 1 ] && break
    sleep 0.1
  done
  stop_child KILL "$pid"
  wait "$pid" || true
  run "$GPUPROV" -v provision --name hs-rerun --cloud hyperstack --no-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"reusing"* ]]
  [ "$(count hyperstack instances)" -eq 1 ]
  [ "$(count hyperstack security_rules)" -eq 1 ] # a plain VM: SSH alone
  [ "$(count hyperstack ssh_keys)" -eq 1 ]
  run "$GPUPROV" ssh hs-rerun -- whoami
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"ubuntu"* ]]
  run "$GPUPROV" down hs-rerun
  [ "$status" -eq 0 ]
  nothing_left
}

@test "hyperstack: no stock is said plainly, nothing is left and no state is kept" {
  use_emulator memory
  fault '{"cloud":"hyperstack","fault":"capacity"}'
  run "$GPUPROV" provision --name hs-cap --cloud hyperstack --gpus H100:1 --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"Not enough stock available for flavor n3-H100x1"* ]]
  [[ "$output" == *"another flavor or region"* ]]
  [ ! -e "$GPUPROV_HOME/state/hs-cap.json" ]
  nothing_left
}

@test "hyperstack: endless 429s (no Retry-After) end with a clear message and nothing is left" {
  use_emulator memory
  fault '{"cloud":"hyperstack","fault":"throttle","times":-1,"retry_after":0}'
  run "$GPUPROV" provision --name hs-429 --cloud hyperstack --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"429"* ]]
  [[ "$output" == *"Too Many Requests"* ]]
  [[ "$output" == *"Try again in a few minutes"* ]]
  curl -fsS -X DELETE "$CONTROL/faults" >/dev/null
  [ ! -e "$GPUPROV_HOME/state/hs-429.json" ]
  nothing_left
}

@test "hyperstack: a create that answers 5xx every time ends with the message and makes no VM" {
  use_emulator memory
  fault '{"cloud":"hyperstack","fault":"server_error","times":-1,"value":"legacy","method":"POST","path":"/v1/core/virtual-machines"}'
  run "$GPUPROV" provision --name hs-5xx --cloud hyperstack --gpus A100:1 --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"Internal Server Error"* ]]
  [[ "$output" == *"Try again in a few minutes"* ]]
  curl -fsS -X DELETE "$CONTROL/faults" >/dev/null
  [ ! -e "$GPUPROV_HOME/state/hs-5xx.json" ]
  nothing_left
}

@test "hyperstack: a refused API key names where keys come from and leaks nothing" {
  use_emulator memory
  HYPERSTACK_API_KEY=hs-wrong-e2e-key run "$GPUPROV" -v provision --name hs-auth --cloud hyperstack --no-k8s
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" == *"401"* ]]
  [[ "$output" == *"HYPERSTACK_API_KEY"* ]]
  [[ "$output" == *"~/.hyperstack/api_key"* ]]
  [[ "$output" != *"hs-wrong-e2e-key"* ]]
  [ ! -e "$GPUPROV_HOME/state/hs-auth.json" ]
  nothing_left
}

@test "hyperstack: a VM that vanishes while booting: a clear message, and down leaves nothing" {
  use_emulator memory
  fault '{"cloud":"hyperstack","fault":"vanish_during_boot"}'
  run "$GPUPROV" provision --name hs-gone --cloud hyperstack --gpus A100:1 --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"disappeared"* ]]
  [[ "$output" == *"gpuprov"* ]]
  run "$GPUPROV" down hs-gone
  echo "$output"
  [ "$status" -eq 0 ]
  nothing_left
}

@test "hyperstack: a VM in ERROR says so in Hyperstack's words, and down leaves nothing" {
  use_emulator memory
  fault '{"cloud":"hyperstack","fault":"error_during_boot"}'
  run "$GPUPROV" provision --name hs-err --cloud hyperstack --gpus A100:1 --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"state 'error'"* ]]
  [[ "$output" == *"Hyperstack status ERROR"* ]]
  [[ "$output" == *"gpuprov down hs-err"* ]]
  run "$GPUPROV" down hs-err
  echo "$output"
  [ "$status" -eq 0 ]
  nothing_left
}

@test "hyperstack: a floating IP that never comes ends the wait with a message, and down leaves nothing" {
  use_emulator memory
  printf '[defaults.timeouts]\nboot_wait_seconds = 8\n' >"$GPUPROV_HOME/config.toml"
  fault '{"cloud":"hyperstack","fault":"ip_after_boot","seconds":600}'
  run "$GPUPROV" provision --name hs-noip --cloud hyperstack --gpus A100:1 --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"still 'pending' after 8s"* ]]
  [[ "$output" == *"gpuprov down hs-noip"* ]]
  run "$GPUPROV" down hs-noip
  echo "$output"
  [ "$status" -eq 0 ]
  nothing_left
}

@test "hyperstack: a GPU Hyperstack does not have is refused before anything is made" {
  use_emulator memory
  run "$GPUPROV" provision --name hs-l40s --cloud hyperstack --gpus L40S:1 --no-k8s
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"does not offer L40S:1"* ]]
  [[ "$output" == *"L40:1"* ]]
  nothing_left
}

# Issue 30 (plugins/hyperstack/REFERENCE.md §H2): offers carry the pricebook's price, so
# --max-price below it refuses the offer before anything is made (it created an H100 VM at
# "$0" before), and the offer line says the price.
@test "hyperstack: prices come from the pricebook; --max-price below it makes nothing" {
  use_emulator memory
  run "$GPUPROV" provision --name hs-cheap --cloud hyperstack --gpus H100:1 --no-k8s --max-price 0.01
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"n3-H100x1"* ]]
  [[ "$output" == *"1.90"* ]]
  [ ! -e "$GPUPROV_HOME/state/hs-cheap.json" ]
  nothing_left
}
