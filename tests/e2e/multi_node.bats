#!/usr/bin/env bats
# Multi-node clusters (`--nodes N`, docs/multi-node.md) end to end with the real gpuprov binary
# and drivers. Bad input is refused with exit 2 before anything is made: no container, no
# record, no cloud call that creates.

load helpers

setup_file() {
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  export E2E_NAME="e2e-mn-$$"
  remove_vm_containers "$E2E_NAME"
}

teardown_file() {
  remove_vm_containers "$E2E_NAME"
}

# Nothing of NAME exists: no record, no container.
nothing_made() {
  [ ! -e "$GPUPROV_HOME/state/$1.json" ]
  [ "$(count_vm_containers "$1")" -eq 0 ]
}

@test "--nodes 0 is refused with exit 2 before anything is made" {
  run "$GPUPROV" provision --name "$E2E_NAME" --cloud docker --nodes 0
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"a cluster has at least one node (--nodes 0 from the command line)"* ]]
  nothing_made "$E2E_NAME"
}

@test "--nodes that is not a whole number is refused with exit 2" {
  for bad in two 1.5 -3 ""; do
    run "$GPUPROV" provision --name "$E2E_NAME" --cloud docker --nodes "$bad"
    echo "$bad: $output"
    [ "$status" -eq 2 ]
  done
  run "$GPUPROV" provision --name "$E2E_NAME" --cloud docker --nodes two
  [[ "$output" == *'--nodes: "two" is not a whole number of nodes'* ]]
  nothing_made "$E2E_NAME"
}

@test "--nodes on the Docker test cloud is refused with exit 2, naming the clouds that can" {
  run "$GPUPROV" provision --name "$E2E_NAME" --cloud docker --nodes 3
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"the docker cloud is a test cloud of single VMs"* ]]
  [[ "$output" == *"nothing was created"* ]]
  nothing_made "$E2E_NAME"
}

@test "nodes: in a spec on the Docker test cloud is refused the same way" {
  printf 'name: %s\ncloud: docker\nnodes: 2\n' "$E2E_NAME" >"$BATS_TEST_TMPDIR/spec.yaml"
  run "$GPUPROV" provision -f "$BATS_TEST_TMPDIR/spec.yaml"
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"nodes: 2 in "*"spec.yaml"* ]]
  nothing_made "$E2E_NAME"
}

@test "--nodes with several candidate clouds is refused with exit 2" {
  run "$GPUPROV" provision --name "$E2E_NAME" --cloud docker,aws --nodes 2
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"share one cloud and region"* ]]
  nothing_made "$E2E_NAME"
}

@test "--nodes 1 on the Docker test cloud is one plain VM, as without --nodes" {
  run "$GPUPROV" provision --name "$E2E_NAME" --cloud docker --nodes 1
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(count_vm_containers "$E2E_NAME")" -eq 1 ]
  ! grep -q '"cluster"' "$GPUPROV_HOME/state/$E2E_NAME.json"
  run "$GPUPROV" down "$E2E_NAME" --yes
  [ "$status" -eq 0 ]
}
