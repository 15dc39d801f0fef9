#!/usr/bin/env bats
# gpuprov against the cloud emulator with the Docker backend: DigitalOcean (boot script, cloud
# firewall, direct mode) and Prime Intellect (no boot script, SSH on a remapped port). Each VM is
# a real test VM; SSH reaches it on the address and port the emulated API returned. Kubernetes is
# off (--no-k8s) here: tests/e2e/cluster.bats covers Kubernetes.

load helpers

setup_file() {
  export DIGITALOCEAN_TOKEN="dop_v1_e2e_$$_secret_token"
  export PRIME_API_KEY="pit_e2e_$$_secret_key"
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  printf '[defaults.timeouts]\nssh_wait_seconds = 180\n' >"$GPUPROV_HOME/config.toml"
  start_emulator emu --backend docker --clouds digitalocean,primeintellect
}

teardown_file() {
  stop_emulators
}

setup() {
  use_emulator emu
}

# Each test asserts its own cleanup; this only keeps one failure from cascading into the next.
teardown() {
  reset_emulators
  rm -f "$GPUPROV_HOME"/state/*.json
}

@test "digitalocean: provision, ssh, list and down; firewall and key cleaned up" {
  run "$GPUPROV" provision --name do-vm --cloud digitalocean --gpus H100:1 --no-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(count digitalocean instances)" -eq 1 ]
  [ "$(count digitalocean firewalls)" -eq 1 ]
  [ "$(count digitalocean ssh_keys)" -eq 1 ]
  run "$GPUPROV" ssh do-vm -- nvidia-smi -L
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"NVIDIA H100"* ]]
  run "$GPUPROV" list --output json
  echo "$output" | /usr/bin/python3 -c '
import json, sys
vm = [v for v in json.load(sys.stdin) if v["name"] == "do-vm"][0]
assert vm["cloud"] == "digitalocean" and vm["state"] == "running", vm
assert vm["address"].startswith("127.90."), vm'
  # The token never reaches gpuprov's output or files, even with -v.
  run "$GPUPROV" -v list
  [[ "$output" != *"$DIGITALOCEAN_TOKEN"* ]]
  ! grep -rq "$DIGITALOCEAN_TOKEN" "$GPUPROV_HOME"
  run "$GPUPROV" down do-vm
  echo "$output"
  [ "$status" -eq 0 ]
  expect_nothing_left digitalocean
  [ "$(count digitalocean ssh_keys)" -eq 0 ]
}

@test "primeintellect: provision reaches SSH on the remapped port the API returned; down deletes the pod" {
  run "$GPUPROV" provision --name pi-vm --cloud primeintellect --gpus A100:1 --no-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  port=$("$GPUPROV" list --output json | /usr/bin/python3 -c '
import json, sys
print([v for v in json.load(sys.stdin) if v["name"] == "pi-vm"][0]["ssh_port"])')
  [ "$port" -ne 22 ]
  run "$GPUPROV" ssh pi-vm -- 'nvidia-smi -L; exit 4'
  echo "$output"
  [ "$status" -eq 4 ]
  [[ "$output" == *"NVIDIA A100"* ]]
  run "$GPUPROV" down pi-vm
  [ "$status" -eq 0 ]
  expect_nothing_left primeintellect
}

# Review P1: a pod whose installationStatus stays PENDING (as every P-DOC example shows it), or
# that sends no installation fields, is ready once ACTIVE with an sshConnection, as the prime CLI
# waits; provision must not wait for FINISHED until it times out.
@test "primeintellect: a pod that never says FINISHED, or says nothing of its installation, is provisioned" {
  for mode in status_stays_pending none; do
    curl -fsS -X POST "$CONTROL/settings" \
      -d "{\"cloud\":\"primeintellect\",\"installation_fields\":\"$mode\"}" >/dev/null
    run "$GPUPROV" provision --name pi-inst --cloud primeintellect --gpus A100:1 --no-k8s
    echo "$mode: $output"
    [ "$status" -eq 0 ]
    run "$GPUPROV" ssh pi-inst -- true
    [ "$status" -eq 0 ]
    run "$GPUPROV" down pi-inst
    [ "$status" -eq 0 ]
    expect_nothing_left primeintellect
  done
}

@test "digitalocean: a GPU it does not offer (L4) is refused before anything is created" {
  run "$GPUPROV" provision --name do-l4 --cloud digitalocean --gpus L4:1 --no-k8s
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"L4"* ]]
  [ "$(count digitalocean instances)" -eq 0 ]
}

@test "a wrong token fails with the cloud's auth error and names where the token comes from" {
  DIGITALOCEAN_TOKEN=dop_v1_wrong run "$GPUPROV" provision --name do-auth --cloud digitalocean --no-k8s
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" == *"DIGITALOCEAN_TOKEN"* ]]
  [ ! -e "$GPUPROV_HOME/state/do-auth.json" ]
  PRIME_API_KEY=pit_wrong run "$GPUPROV" provision --name pi-auth --cloud primeintellect --gpus A100:1 --no-k8s
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" == *"PRIME_API_KEY"* ]]
}

@test "capacity: a clear message, no VM, no state record, nothing leaked" {
  fault '{"cloud":"digitalocean","fault":"capacity","times":1}'
  run "$GPUPROV" provision --name do-cap --cloud digitalocean --gpus H100:1 --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"not available"* ]]
  [ ! -e "$GPUPROV_HOME/state/do-cap.json" ]
  expect_nothing_left digitalocean
  [ "$(count digitalocean ssh_keys)" -eq 0 ]
  fault '{"cloud":"primeintellect","fault":"capacity","times":1}'
  run "$GPUPROV" provision --name pi-cap --cloud primeintellect --gpus A100:1 --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"capacity"* || "$output" == *"stock"* ]]
  expect_nothing_left primeintellect
}

@test "throttling and 5xx bursts are retried and the VM comes up once" {
  fault '{"cloud":"digitalocean","fault":"throttle","times":2,"retry_after":1}'
  fault '{"cloud":"primeintellect","fault":"server_error","times":2,"status":503}'
  run "$GPUPROV" provision --name do-thr --cloud digitalocean --no-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  run "$GPUPROV" provision --name pi-5xx --cloud primeintellect --gpus A100:1 --no-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(count digitalocean instances)" -eq 1 ]
  [ "$(count primeintellect instances)" -eq 1 ]
  "$GPUPROV" down do-thr
  "$GPUPROV" down pi-5xx
  expect_nothing_left digitalocean
  expect_nothing_left primeintellect
}

@test "slow boot: gpuprov waits with progress and succeeds" {
  fault '{"cloud":"digitalocean","fault":"slow_boot","seconds":8}'
  run "$GPUPROV" provision --name do-slow --cloud digitalocean --no-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"waiting"* ]]
  "$GPUPROV" down do-slow
  expect_nothing_left digitalocean
}

@test "a VM that vanishes or errors while booting: a clear message, and down leaves nothing" {
  fault '{"cloud":"digitalocean","fault":"vanish_during_boot"}'
  run "$GPUPROV" provision --name do-gone --cloud digitalocean --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"disappeared"* || "$output" == *"error"* ]]
  run "$GPUPROV" down do-gone
  [ "$status" -eq 0 ]
  expect_nothing_left digitalocean
  [ "$(count digitalocean ssh_keys)" -eq 0 ]
  fault '{"cloud":"primeintellect","fault":"error_during_boot"}'
  run "$GPUPROV" provision --name pi-err --cloud primeintellect --gpus A100:1 --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"error"* ]]
  [[ "$output" == *"gpuprov down pi-err"* ]]
  run "$GPUPROV" down pi-err
  [ "$status" -eq 0 ]
  expect_nothing_left primeintellect
}

@test "a failing boot script or a GPU that appears late does not break a plain VM" {
  fault '{"cloud":"digitalocean","fault":"boot_script_fails"}'
  fault '{"cloud":"digitalocean","fault":"gpu_after_boot","seconds":5}'
  run "$GPUPROV" provision --name do-late --cloud digitalocean --gpus H100:1 --no-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  run "$GPUPROV" ssh do-late -- cloud-init status --wait
  echo "$output"
  [[ "$output" == *"error"* ]]
  sleep 6
  run "$GPUPROV" ssh do-late -- nvidia-smi -L
  [ "$status" -eq 0 ]
  [[ "$output" == *"NVIDIA H100"* ]]
  "$GPUPROV" down do-late
  expect_nothing_left digitalocean
}

@test "a re-run after gpuprov was killed finds the VM by name" {
  "$GPUPROV" provision --name do-rerun --cloud digitalocean --no-k8s &
  pid=$!
  for _ in $(seq 1 100); do
    [ "$(count digitalocean instances)" -eq 1 ] && break
    sleep 0.2
  done
  stop_child KILL "$pid"
  wait "$pid" || true
  run "$GPUPROV" provision --name do-rerun --cloud digitalocean --no-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"reusing"* ]]
  [ "$(count digitalocean instances)" -eq 1 ]
  "$GPUPROV" down do-rerun
  expect_nothing_left digitalocean
}
