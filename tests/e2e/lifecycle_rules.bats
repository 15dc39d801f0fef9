#!/usr/bin/env bats
# Lifecycle rules that need no VM to boot: intent recorded before create, concurrent provisions
# of one name, bad images, and the CLI's usage errors. Uses the fixture driver "good" (an
# in-memory cloud) and the real docker driver where Docker is needed.

load helpers

setup() {
  export GPUPROV_HOME="$BATS_TEST_TMPDIR/home"
  FIXTURES="$BUILD_DIR/tests/fixture-drivers"
}

@test "the intent is recorded before the driver's create is called" {
  probe="$BATS_TEST_TMPDIR/probe"
  export GPUPROV_FIXTURE_CREATE_PROBE="$probe:$GPUPROV_HOME/state/intent-1.json"
  run "$GPUPROV" --driver-path "$FIXTURES" provision --name intent-1 --cloud good --no-k8s
  echo "$output"
  [ "$(cat "$probe")" = "present" ]
}

@test "a driver error before anything exists leaves no state record behind" {
  run "$GPUPROV" provision --name e2e-noimage-$$ --cloud docker --image gpuprov-testvm:does-not-exist
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"does-not-exist"* ]]
  [ ! -e "$GPUPROV_HOME/state/e2e-noimage-$$.json" ]
  [ "$(count_vm_containers "e2e-noimage-$$")" -eq 0 ]
}

@test "two provisions of one name at the same time create one VM" {
  name="e2e-race-$$"
  "$GPUPROV" provision --name "$name" --cloud docker >"$BATS_TEST_TMPDIR/a.log" 2>&1 &
  a=$!
  "$GPUPROV" provision --name "$name" --cloud docker >"$BATS_TEST_TMPDIR/b.log" 2>&1 &
  b=$!
  wait "$a"; sa=$?
  wait "$b"; sb=$?
  cat "$BATS_TEST_TMPDIR/a.log" "$BATS_TEST_TMPDIR/b.log"
  count=$(count_vm_containers "$name")
  remove_vm_containers "$name"
  [ "$sa" -eq 0 ]
  [ "$sb" -eq 0 ]
  [ "$count" -eq 1 ]
  grep -q "reusing" "$BATS_TEST_TMPDIR/a.log" "$BATS_TEST_TMPDIR/b.log"
}

@test "a spec file supplies the fields and flags override them" {
  spec="$BATS_TEST_TMPDIR/spec.yaml"
  printf 'name: from-spec\ncloud: docker\ngpus: MI300X:1\n' >"$spec"
  run "$GPUPROV" provision -f "$spec"
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"does not offer MI300X:1"* ]]
  printf 'name: bad name\n' >"$spec"
  run "$GPUPROV" provision -f "$spec"
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"spec.yaml:1"* ]]
  [[ "$output" == *"name"* ]]
}

@test "config.toml kubernetes = false turns Kubernetes off; --k8s opts back in" {
  mkdir -p "$GPUPROV_HOME"
  printf '[defaults]\nkubernetes = false\n' >"$GPUPROV_HOME/config.toml"
  # The fixture cloud "good" can host Kubernetes; with k8s off it goes on to create.
  # -v prints the cluster plan (route and access) only when Kubernetes is on.
  run "$GPUPROV" -v --driver-path "$FIXTURES" provision --name cfg-off --cloud good
  echo "$output"
  [[ "$output" == *"creating VM cfg-off"* ]]
  [[ "$output" != *"cluster plan:"* ]]
  run "$GPUPROV" -v --driver-path "$FIXTURES" provision --name cfg-on --cloud good --k8s
  echo "$output"
  [[ "$output" == *"cluster plan: route "* ]]
}

@test "bad config.toml fields name the file, line and field" {
  mkdir -p "$GPUPROV_HOME"
  printf '[defaults]\nkubernetes = "maybe"\n' >"$GPUPROV_HOME/config.toml"
  run "$GPUPROV" provision --name cfg-bad --cloud docker
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"config.toml"* ]]
  [[ "$output" == *"kubernetes"* ]]
}

@test "usage errors exit 2 and say what to do" {
  run "$GPUPROV" provision --cloud docker
  [ "$status" -eq 2 ]
  [[ "$output" == *"--name"* ]]
  run "$GPUPROV" provision --name x --bogus
  [ "$status" -eq 2 ]
  [[ "$output" == *"unknown option --bogus"* ]]
  run "$GPUPROV" nosuchcommand
  [ "$status" -eq 2 ]
  run "$GPUPROV" provision --name x --cloud nosuchcloud
  [ "$status" -eq 2 ]
  [[ "$output" == *"no driver for cloud 'nosuchcloud'"* ]]
  run "$GPUPROV" ssh nosuchvm -- true
  [ "$status" -eq 2 ]
  [[ "$output" == *"no VM named 'nosuchvm'"* ]]
}

@test "drivers lists good and broken drivers without initialising any" {
  export GPUPROV_FIXTURE_INIT_MARKER="$BATS_TEST_TMPDIR/init-marker"
  run "$GPUPROV" --driver-path "$FIXTURES" drivers
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"docker  0.1.0  ABI 1.0"* ]]
  [[ "$output" == *"newmajor  BROKEN: needs driver ABI 2.0"* ]]
  [ ! -e "$GPUPROV_FIXTURE_INIT_MARKER" ]
  run "$GPUPROV" --driver-path "$FIXTURES" drivers --output json
  [ "$status" -eq 0 ]
  echo "$output" | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); assert any(x["name"]=="good" and x["ok"] for x in d)'
}
