#!/usr/bin/env bats
# gpuprov on Nebius AI Cloud through the gRPC emulator (tests/emulators/nebius_api.cc), the
# driver authenticating as a service account (JWT exchanged at the token exchange).
# - docker backend: a k3s cluster by the boot route (cloud-init in the test VM runs the
#   multipart user data: the SSH key for ubuntu, then the installer), direct access through the
#   driver's security group, the real kubectl, down; a re-run reuses; a gpuprov killed while
#   creating, re-run, finds what it made by name.
#   The Kubernetes test also crashes the cluster's points (issue 15, cluster_crash_chain of
#   crash_points.bash): its VM is made by runs killed at each point the route reaches.
# - memory backend: the faults (no capacity, quota, throttling, a refused token, a GPU Nebius
#   does not have), each with a clear message and nothing left: no instance, boot disk,
#   security group or rule; a spot (preemptible) VM preempted and replaced.

load helpers
load crash_points
bats_require_minimum_version 1.5.0

setup_file() {
  export HOME="$BATS_FILE_TMPDIR/userhome" # no ~/.nebius of the machine's user
  mkdir -p "$HOME"
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  # A missing file: the emulator writes the service-account credentials it accepts there.
  export NEBIUS_CREDENTIALS_FILE="$BATS_FILE_TMPDIR/nebius-credentials.json"
  export NEBIUS_PROJECT_ID=project-e00test
  unset NEBIUS_IAM_TOKEN
  start_emulator docker --clouds nebius --backend docker
  start_emulator memory --clouds nebius --backend memory --boot-seconds 1
}

teardown_file() {
  stop_emulators
}

setup() {
  printf '[defaults.timeouts]\nssh_wait_seconds = 180\napi_wait_seconds = 120\n[clouds.nebius]\npoll_interval_ms = 200\n' \
    >"$GPUPROV_HOME/config.toml"
}

teardown() {
  reset_emulators
  rm -f "$GPUPROV_HOME"/state/*.json
}

# expect_nebius_clean: no instance (API or backend), boot disk, security group or rule left.
expect_nebius_clean() {
  expect_nothing_left nebius disks security_groups security_rules
}

# quick_ssh_wait: the memory backend's addresses never answer SSH; a provision there ends soon
# after the VM runs.
quick_ssh_wait() {
  printf '[defaults.timeouts]\nssh_wait_seconds = 3\n[clouds.nebius]\npoll_interval_ms = 200\n' \
    >"$GPUPROV_HOME/config.toml"
}

@test "nebius: k3s by the boot route, direct access, kubectl works; a re-run reuses; down leaves nothing" {
  use_emulator docker
  # The cluster's crash points (issue 15): the VM is made by runs killed after the host key is
  # pinned and after the kubeconfig is written; the run below is their re-run. The boot install
  # learns the public address from Nebius IMDS network-data (plugins/nebius/REFERENCE.md §6), so the
  # certificate covers it: no SAN re-run.
  cluster_crash_chain nebius nb-k8s "host-key-pinned kubeconfig-written" --gpus H100:1
  run "$GPUPROV" -v provision --name nb-k8s --cloud nebius --gpus H100:1
  echo "$output"
  [ "$status" -eq 0 ]
  assert_cuda_check
  cluster_crash_converged nebius nb-k8s "$output"
  expect_k8s_by_boot_route "$output"
  expect_address_learned_at_boot nb-k8s "$CHAIN_OUTPUT$output"
  [[ "$CHAIN_OUTPUT$output" == *"gpu-h100-sxm/1gpu-16vcpu-200gb"* ]]
  [[ "$output" == *"nvidia.com/gpu: 1"* ]]
  # Neither the service account's key nor an access token (the emulator's start "v1.emu") is
  # in the output or gpuprov's files.
  key_line=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["subject-credentials"]["private-key"].splitlines()[1])' "$NEBIUS_CREDENTIALS_FILE")
  [ -n "$key_line" ]
  [[ "$CHAIN_OUTPUT$output" != *"$key_line"* ]]
  [[ "$CHAIN_OUTPUT$output" != *"v1.emu"* ]]
  run ! grep -rqF "$key_line" "$GPUPROV_HOME"
  run ! grep -rqF "v1.emu" "$GPUPROV_HOME"
  [ "$(count nebius instances)" -eq 1 ]
  [ "$(count nebius disks)" -eq 1 ]
  [ "$(count nebius security_groups)" -eq 1 ]
  # Direct mode: the kubeconfig names the VM's public address, and kubectl works.
  grep -q 'server: https://127\.' "$GPUPROV_HOME/kube/nb-k8s.yaml"
  expect_cluster_ready nb-k8s
  run "$GPUPROV" ssh nb-k8s -- 'whoami; nvidia-smi -L'
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"ubuntu"* ]]
  [[ "$output" == *"H100"* ]]
  # A re-run reuses the VM, its disk and its group.
  run "$GPUPROV" provision --name nb-k8s --cloud nebius --gpus H100:1
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"reusing"* ]]
  [ "$(count nebius instances)" -eq 1 ]
  [ "$(count nebius disks)" -eq 1 ]
  [ "$(count nebius security_groups)" -eq 1 ]
  run "$GPUPROV" down nb-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  [ ! -e "$GPUPROV_HOME/kube/nb-k8s.yaml" ]
  expect_nebius_clean
  cluster_crash_passed nebius "boot, direct"
}

@test "nebius: a re-run after gpuprov was killed while creating finds what it made by name" {
  use_emulator docker
  "$GPUPROV" provision --name nb-rerun --cloud nebius --gpus H100:1 --no-k8s 3>&- &
  pid=$!
  # Killed once the boot disk exists (the group is made before it; the instance after it).
  for _ in $(seq 1 300); do
    [ "$(count nebius disks)" -eq 1 ] && break
    sleep 0.1
  done
  stop_child KILL "$pid"
  wait "$pid" || true
  [ "$(count nebius security_groups)" -eq 1 ]
  run "$GPUPROV" provision --name nb-rerun --cloud nebius --gpus H100:1 --no-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(count nebius instances)" -eq 1 ]
  [ "$(count nebius disks)" -eq 1 ]
  [ "$(count nebius security_groups)" -eq 1 ]
  run "$GPUPROV" ssh nb-rerun -- whoami
  [ "$status" -eq 0 ]
  run "$GPUPROV" down nb-rerun
  echo "$output"
  [ "$status" -eq 0 ]
  expect_nebius_clean
}

@test "nebius: no capacity (NotEnoughResources) is said plainly, nothing left" {
  use_emulator memory
  fault '{"cloud":"nebius","fault":"capacity"}'
  run "$GPUPROV" provision --name nb-cap --cloud nebius --gpus H100:1 --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"RESOURCE_EXHAUSTED"* ]]
  [[ "$output" == *"Try again later"* ]]
  [ ! -e "$GPUPROV_HOME/state/nb-cap.json" ]
  expect_nebius_clean
}

# The create operation succeeds, then the start fails for want of capacity (STOPPED, not
# reconciling, a failed operation on the instance: what SkyPilot's provisioner watches for).
@test "nebius: a start that fails for capacity after its create succeeded says why, nothing left" {
  use_emulator memory
  fault '{"cloud":"nebius","fault":"capacity","value":"after_start"}'
  run "$GPUPROV" provision --name nb-nostart --cloud nebius --gpus H100:1 --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"did not start after its create"* ]]
  [[ "$output" == *"Start instance nb-nostart"*"not enough resources"* ]]
  [[ "$output" == *"try again later"* ]]
  [ ! -e "$GPUPROV_HOME/state/nb-nostart.json" ]
  expect_nebius_clean
}

@test "nebius: a quota failure in the create operation names the quota, nothing left" {
  use_emulator memory
  fault '{"cloud":"nebius","fault":"quota","value":"operation"}'
  run "$GPUPROV" provision --name nb-quota --cloud nebius --gpus H100:1 --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"Quota limit exceeded"* ]]
  [[ "$output" == *"larger quota"* ]]
  [ ! -e "$GPUPROV_HOME/state/nb-quota.json" ]
  expect_nebius_clean
}

@test "nebius: throttling and an unavailable service are retried; the VM comes up once" {
  use_emulator memory
  quick_ssh_wait
  fault '{"cloud":"nebius","fault":"throttle","times":2}'
  fault '{"cloud":"nebius","fault":"server_error","times":2}'
  run "$GPUPROV" -v provision --name nb-thr --cloud nebius --no-k8s
  echo "$output"
  # Four failed calls before the first success: without retries nothing would exist.
  [ "$(count nebius instances)" -eq 1 ]
  run "$GPUPROV" down nb-thr
  [ "$status" -eq 0 ]
  expect_nebius_clean
}

@test "nebius: a refused token is AUTH, names where tokens come from, leaks nothing" {
  use_emulator memory
  NEBIUS_IAM_TOKEN=secret_wrong_nebius_token run "$GPUPROV" provision --name nb-auth --cloud nebius --gpus H100:1 --no-k8s
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" == *"UNAUTHENTICATED"* ]]
  [[ "$output" == *"NEBIUS_IAM_TOKEN"* ]]
  [[ "$output" != *"secret_wrong_nebius_token"* ]]
  [ ! -e "$GPUPROV_HOME/state/nb-auth.json" ]
  expect_nebius_clean
}

@test "nebius: A100 is not a Nebius platform: refused before anything is created, naming what exists" {
  use_emulator memory
  run "$GPUPROV" provision --name nb-a100 --cloud nebius --gpus A100:1 --no-k8s
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"Nebius does not offer A100:1"* ]]
  [[ "$output" == *"H100"* ]]
  expect_nebius_clean
}

@test "nebius: Ctrl-C while the instance is being made exits 130 within 2 s; down leaves nothing" {
  use_emulator memory
  fault '{"cloud":"nebius","fault":"slow_boot","seconds":20}'
  "$GPUPROV" provision --name nb-int --cloud nebius --gpus H100:1 --no-k8s \
    >"$BATS_TEST_TMPDIR/nb-int.out" 2>&1 3>&- &
  pid=$!
  for _ in $(seq 1 300); do
    grep -qF "creating instance nb-int" "$BATS_TEST_TMPDIR/nb-int.out" && break
    sleep 0.1
  done
  grep -qF "creating instance nb-int" "$BATS_TEST_TMPDIR/nb-int.out"
  sleep 1 # inside the operation or boot wait
  start=$(date +%s%N)
  kill -INT "$pid"
  rc=0
  wait "$pid" || rc=$?
  end=$(date +%s%N)
  cat "$BATS_TEST_TMPDIR/nb-int.out"
  echo "exit $rc after $(((end - start) / 1000000)) ms"
  [ "$rc" -eq 130 ]
  [ $((end - start)) -lt 2000000000 ]
  [ "$(count nebius security_groups)" -eq 1 ]
  run "$GPUPROV" down nb-int
  echo "$output"
  [ "$status" -eq 0 ]
  expect_nebius_clean
}

@test "nebius: an instance that fails to start fails its create operation, said plainly; nothing left" {
  use_emulator memory
  fault '{"cloud":"nebius","fault":"error_during_boot"}'
  run "$GPUPROV" provision --name nb-stop --cloud nebius --gpus H100:1 --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"create instance nb-stop: operation "*" failed: INTERNAL"* ]]
  [[ "$output" == *"re-run to try again"* ]]
  [ ! -e "$GPUPROV_HOME/state/nb-stop.json" ]
  expect_nebius_clean
}

# Spot (docs/driver-protocol.md "Spot VMs", plugins/nebius/REFERENCE.md §3.7): a preemptible
# instance; Nebius stops it on preemption (the emulator's POST /preempt); list shows PREEMPTED
# with the reason; a re-run replaces it with a new one of the same name and spec.
@test "nebius: --spot makes a preemptible VM; preempted it is PREEMPTED in list; a re-run replaces it" {
  use_emulator memory
  quick_ssh_wait
  # Sold as spot at a price the API does not give: listed by offers --spot, the price "-".
  run "$GPUPROV" offers --cloud nebius --gpus H100:1 --spot
  echo "$output"
  [ "$status" -eq 0 ]
  grep -Eq '^H100:1 +80 GB +nebius +eu-north1 +gpu-h100-sxm/1gpu-16vcpu-200gb +- +- ' <<<"$output"
  run "$GPUPROV" offers --cloud nebius --spot
  echo "$output"
  [[ "$output" == *"nebius"*"no spot offer for this request"* ]]
  # A CPU platform takes no preemptible VMs: refused before anything is made (by the host, its
  # offer carrying no spot price, or else by the driver, naming the platforms that take them).
  run "$GPUPROV" provision --name nb-spot-cpu --cloud nebius --no-k8s --spot
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" == *"not as a spot VM"* || "$output" == *"does not take preemptible (spot) VMs"*"gpu-h100-sxm"* ]]
  expect_nebius_clean

  # The memory backend's addresses never answer SSH: the run ends there with the VM kept.
  run "$GPUPROV" provision --name nb-spot --cloud nebius --gpus H100:1 --no-k8s --spot
  echo "$output"
  [[ "$output" == *"spot (price unknown)"* ]]
  [ "$(count nebius instances)" -eq 1 ]
  [ "$(field nb-spot spot)" = True ]
  first_id=$(field nb-spot vm_id)
  [ -n "$first_id" ]

  curl -fsS -X POST "$CONTROL/preempt" -d '{"cloud":"nebius","name":"nb-spot"}' >/dev/null
  run "$GPUPROV" list
  echo "$output"
  [[ "$output" == *"PREEMPTED"* ]]
  [[ "$output" == *"nb-spot: preempted by nebius (STOPPED by Compute: a preemptible VM"* ]]

  run "$GPUPROV" provision --name nb-spot --cloud nebius --gpus H100:1 --no-k8s
  echo "$output"
  [[ "$output" == *"VM nb-spot was preempted by nebius (STOPPED by Compute"*"replacing it with a new one of the same name and spec"* ]]
  [ "$(count nebius instances)" -eq 1 ]
  [ "$(count nebius disks)" -eq 1 ]
  [ "$(field nb-spot vm_id)" != "$first_id" ]
  [ "$(field nb-spot spot)" = True ]
  run "$GPUPROV" down nb-spot
  [ "$status" -eq 0 ]
  expect_nebius_clean
}

@test "nebius: an instance that vanishes: down removes its boot disk and security group" {
  use_emulator memory
  quick_ssh_wait
  run "$GPUPROV" provision --name nb-lost --cloud nebius --gpus H100:1 --no-k8s
  echo "$output"
  [ "$(count nebius instances)" -eq 1 ]
  curl -fsS -X POST "$CONTROL/settings" -d '{"cloud":"nebius","vanish_instance":"nb-lost"}' >/dev/null
  [ "$(count nebius instances)" -eq 0 ]
  [ "$(count nebius disks)" -eq 1 ]
  [ "$(count nebius security_groups)" -eq 1 ]
  run "$GPUPROV" down nb-lost
  echo "$output"
  [ "$status" -eq 0 ]
  expect_nebius_clean
}
