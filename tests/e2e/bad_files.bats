#!/usr/bin/env bats
# Bad files, as a user's mistakes make them: every file gpuprov reads (config.toml, a spec, a
# state record, a kubeconfig, the SSH key, the driver folder's entries) is opened only if it is
# a regular file within a size bound fitting its kind; otherwise gpuprov refuses at once, naming
# the path and the reason, with exit 2 and nothing made. A symlink to /dev/zero once ran for
# 20 s into std::bad_alloc, and a FIFO hung until killed. No cloud is reached here: each run
# stops at the file, before any driver call (the fixture cloud `good` would make a VM record).

load helpers

setup() {
  export GPUPROV_HOME="$BATS_TEST_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME/state"
  chmod 700 "$GPUPROV_HOME"
  FIXTURES="$BUILD_DIR/tests/fixture-drivers"
}

# refused KIND-AND-PATH REASON: the last run exited 2 within its timeout, naming the file and
# why, and made no state record.
refused() {
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"refusing to read the $1"* || "$output" == *"$1"*"not a regular file"* ]]
  [[ "$output" == *"$2"* ]]
  # Nothing made: no state record.
  [ -z "$(ls -A "$GPUPROV_HOME/state")" ]
}

@test "config.toml that is a symlink to /dev/zero is refused at once" {
  ln -s /dev/zero "$GPUPROV_HOME/config.toml"
  run timeout 10 "$GPUPROV" --driver-path "$FIXTURES" provision --name z --cloud good --no-k8s
  refused "config file '$GPUPROV_HOME/config.toml'" "is a character device, not a regular file"
}

@test "config.toml that is a FIFO is refused at once, not waited on" {
  mkfifo "$GPUPROV_HOME/config.toml"
  run timeout 10 "$GPUPROV" --driver-path "$FIXTURES" provision --name f --cloud good --no-k8s
  refused "config file '$GPUPROV_HOME/config.toml'" "is a FIFO (named pipe), not a regular file"
}

@test "config.toml larger than a config file may be is refused" {
  head -c $((2 * 1024 * 1024)) /dev/zero | tr '\0' '#' >"$GPUPROV_HOME/config.toml"
  run timeout 10 "$GPUPROV" --driver-path "$FIXTURES" provision --name big --cloud good --no-k8s
  refused "config file '$GPUPROV_HOME/config.toml'" "more than a config file may be (1 MiB)"
}

@test "a spec file that is a FIFO or a directory is refused" {
  mkfifo "$BATS_TEST_TMPDIR/spec.yaml"
  run timeout 10 "$GPUPROV" --driver-path "$FIXTURES" provision -f "$BATS_TEST_TMPDIR/spec.yaml"
  refused "spec file '$BATS_TEST_TMPDIR/spec.yaml'" "is a FIFO (named pipe)"
  run timeout 10 "$GPUPROV" --driver-path "$FIXTURES" provision -f "$BATS_TEST_TMPDIR"
  refused "spec file '$BATS_TEST_TMPDIR'" "is a directory, not a regular file"
}

@test "a state record that is a symlink to /dev/zero is refused by list and down" {
  ln -s /dev/zero "$GPUPROV_HOME/state/zero.json"
  # list names it and goes on with the other records, as it does with a damaged one.
  run timeout 10 "$GPUPROV" list
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"warning: refusing to read the state record '$GPUPROV_HOME/state/zero.json': it is a character device, not a regular file"* ]]
  run timeout 10 "$GPUPROV" down zero -y
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"is a character device, not a regular file"* ]]
  [ -L "$GPUPROV_HOME/state/zero.json" ]  # left as it was
}

@test "an SSH key setting naming a FIFO is refused before anything is made" {
  mkfifo "$BATS_TEST_TMPDIR/key"
  printf '[defaults]\nssh_key = "%s"\n' "$BATS_TEST_TMPDIR/key" >"$GPUPROV_HOME/config.toml"
  run timeout 10 "$GPUPROV" --driver-path "$FIXTURES" provision --name k --cloud good --no-k8s
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"$BATS_TEST_TMPDIR/key"*"is a FIFO (named pipe), not a regular file"* ]]
}

@test "a driver folder entry that is a FIFO is listed as broken without being opened" {
  mkdir -p "$BATS_TEST_TMPDIR/drivers"
  mkfifo "$BATS_TEST_TMPDIR/drivers/libgpuprov-driver-fifo.so"
  run timeout 10 "$GPUPROV" --driver-path "$BATS_TEST_TMPDIR/drivers" drivers
  echo "$output"
  [[ "$output" == *"fifo  BROKEN: not loaded: the file is a FIFO (named pipe), not a regular file"* ]]
  run timeout 10 "$GPUPROV" --driver-path "$BATS_TEST_TMPDIR/drivers" provision --name d --cloud fifo --no-k8s
  echo "$output"
  [ "$status" -ne 0 ]
  [ "$status" -ne 124 ]
  [[ "$output" == *"is broken: not loaded: the file is a FIFO"* ]]
}
