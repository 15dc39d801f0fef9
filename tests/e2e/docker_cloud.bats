#!/usr/bin/env bats
# End to end on the Docker test cloud: the real gpuprov binary, the real docker driver .so, real
# test VMs (systemd, OpenSSH, cloud-init) and real SSH.

load helpers

setup_file() {
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  export E2E_NAME="e2e-$$"
  remove_vm_containers "$E2E_NAME"
}

teardown_file() {
  remove_vm_containers "$E2E_NAME" "e2e-k8s-$$" "e2e-bad-$$" "e2e-spec-$$"
}

@test "provision creates a VM, skips Kubernetes with a note, pins the host key and says how to get in" {
  run "$GPUPROV" provision --name "$E2E_NAME" --cloud docker
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"Kubernetes skipped"* ]]
  [[ "$output" == *"gpuprov ssh $E2E_NAME"* ]]
  [ "$(count_vm_containers "$E2E_NAME")" -eq 1 ]
  [ "$(file_mode "$GPUPROV_HOME")" = 700 ]
  [ "$(file_mode "$GPUPROV_HOME/state/$E2E_NAME.json")" = 600 ]
  [ "$(file_mode "$GPUPROV_HOME/known_hosts")" = 600 ]
  [ "$(file_mode "$GPUPROV_HOME/keys/id_ed25519")" = 600 ]
  grep -q '"version"' "$GPUPROV_HOME/state/$E2E_NAME.json"
  grep -q '"phase": *"ready"' "$GPUPROV_HOME/state/$E2E_NAME.json"
  grep -Eq '^\[?127\.77\.' "$GPUPROV_HOME/known_hosts"
}

@test "a second provision of the same name reuses the VM and says so" {
  run "$GPUPROV" provision --name "$E2E_NAME" --cloud docker
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"reusing"* ]]
  [ "$(count_vm_containers "$E2E_NAME")" -eq 1 ]
}

@test "ssh runs one command and exits with its status" {
  run "$GPUPROV" ssh "$E2E_NAME" -- uname -s
  [ "$status" -eq 0 ]
  [ "$output" = "Linux" ]
  run "$GPUPROV" ssh "$E2E_NAME" -- 'echo to-stderr >&2; exit 7'
  [ "$status" -eq 7 ]
  [[ "$output" == *"to-stderr"* ]]
}

@test "ssh opens an interactive shell through OpenSSH with the pinned host key" {
  run bash -c "printf 'echo interactive-ok; exit 0\n' | script -qec '$GPUPROV ssh $E2E_NAME' /dev/null"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"interactive-ok"* ]]
}

@test "list shows the VM as text and as JSON" {
  run "$GPUPROV" list
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"$E2E_NAME"*"docker"*"local"*"running"*"127.77."*"off"* ]]
  run "$GPUPROV" list --output json
  [ "$status" -eq 0 ]
  echo "$output" | python3 -c '
import json, sys
vms = json.load(sys.stdin)
vm = [v for v in vms if v["name"] == sys.argv[1]][0]
assert vm["cloud"] == "docker" and vm["kubernetes"] is False, vm
assert vm["state"] == "running" and vm["address"].startswith("127.77."), vm
assert isinstance(vm["age_seconds"], int), vm
' "$E2E_NAME"
}

@test "--k8s on the docker cloud exits 2 before anything is created" {
  before=$(count_all_gpuprov_containers)
  run "$GPUPROV" provision --name "e2e-k8s-$$" --cloud docker --k8s
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"cannot host Kubernetes"* ]]
  [ "$(count_all_gpuprov_containers)" -eq "$before" ]
  [ ! -e "$GPUPROV_HOME/state/e2e-k8s-$$.json" ]
}

@test "kubernetes: true in a spec file on docker is refused; flags override the file" {
  spec="$BATS_TEST_TMPDIR/spec.yaml"
  printf 'name: e2e-spec-%s\ncloud: docker\nkubernetes: true\n' "$$" > "$spec"
  before=$(count_all_gpuprov_containers)
  run "$GPUPROV" provision -f "$spec"
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"cannot host Kubernetes"* ]]
  [ "$(count_all_gpuprov_containers)" -eq "$before" ]
}

@test "bad --gpus values exit 2 naming the field, and create nothing" {
  before=$(count_all_gpuprov_containers)
  for bad in L4:0 L4:x :1; do
    run "$GPUPROV" provision --name "e2e-bad-$$" --cloud docker --gpus "$bad"
    echo "$output"
    [ "$status" -eq 2 ]
    [[ "$output" == *"--gpus"* ]]
  done
  [ "$(count_all_gpuprov_containers)" -eq "$before" ]
}

@test "a GPU the cloud does not offer is refused before anything is created" {
  before=$(count_all_gpuprov_containers)
  run "$GPUPROV" provision --name "e2e-bad-$$" --cloud docker --gpus MI300X:1
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"MI300X"* ]]
  [ "$(count_all_gpuprov_containers)" -eq "$before" ]
  [ ! -e "$GPUPROV_HOME/state/e2e-bad-$$.json" ]
}

@test "down removes the container and the local files; a second down has nothing to do" {
  run "$GPUPROV" down "$E2E_NAME"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(count_vm_containers "$E2E_NAME")" -eq 0 ]
  [ ! -e "$GPUPROV_HOME/state/$E2E_NAME.json" ]
  ! grep -q '^\[\?127\.77\.' "$GPUPROV_HOME/known_hosts"
  run "$GPUPROV" down "$E2E_NAME"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"nothing to remove"* ]]
}
