#!/usr/bin/env bats
# Ctrl-C reaches the drivers: SIGINT sent to a running `gpuprov provision` while a driver waits
# (a Compute Engine zone operation kept open by a slow boot; a DigitalOcean 429 back-off with a
# long Retry-After) stops it within 2 seconds with exit code 130, the state record keeps the
# phase it stopped in and says it was interrupted, a re-run of the same command converges, and
# `down` leaves nothing. Clouds are the emulator's (docker backend: real test VMs); Kubernetes
# is off.

load helpers

setup_file() {
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  export DIGITALOCEAN_TOKEN="dop_v1_cancel_$$_secret_token"
  export GOOGLE_APPLICATION_CREDENTIALS="$BATS_FILE_TMPDIR/gcp-key.json"
  mkdir -p "$GPUPROV_HOME"
  printf '[defaults.timeouts]\nssh_wait_seconds = 180\n' >"$GPUPROV_HOME/config.toml"
  start_emulator emu --backend docker --clouds gcp,digitalocean
}

teardown_file() {
  stop_emulators
}

setup() {
  use_emulator emu
}

teardown() {
  reset_emulators
  rm -f "$GPUPROV_HOME"/state/*.json
}

# provision_in_background NAME ARGS...: starts `gpuprov provision --name NAME ARGS --no-k8s`
# with its output in $BATS_TEST_TMPDIR/NAME.out; its pid in $pid.
provision_in_background() {
  local name=$1
  shift
  "$GPUPROV" provision --name "$name" "$@" --no-k8s >"$BATS_TEST_TMPDIR/$name.out" 2>&1 3>&- &
  pid=$!
}

# wait_for_output NAME TEXT: waits (up to 60 s) until the background provision printed TEXT.
wait_for_output() {
  local _
  for _ in $(seq 1 300); do
    grep -qF "$2" "$BATS_TEST_TMPDIR/$1.out" && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  cat "$BATS_TEST_TMPDIR/$1.out" >&2
  return 1
}

# interrupt_within_2s NAME: sends SIGINT to $pid and asserts it exits 130 within 2 seconds.
interrupt_within_2s() {
  local start end rc=0
  start=$(date +%s%N)
  kill -INT "$pid"
  wait "$pid" || rc=$?
  end=$(date +%s%N)
  cat "$BATS_TEST_TMPDIR/$1.out"
  echo "exit $rc after $(((end - start) / 1000000)) ms"
  [ "$rc" -eq 130 ]
  [ $((end - start)) -lt 2000000000 ]
}

# expect_record NAME PHASE: the state record of NAME is in PHASE and says it was interrupted.
expect_record() {
  /usr/bin/python3 -c '
import json, sys
rec = json.load(open(sys.argv[1]))
assert rec["phase"] == sys.argv[2], rec
assert rec["last_error"].startswith("interrupted while "), rec
' "$GPUPROV_HOME/state/$1.json" "$2"
}

@test "gcp: Ctrl-C during a zone-operation wait exits 130 within 2 s; the re-run converges" {
  # The instance boots 20 s late: its insert operation stays RUNNING while gpuprov polls it.
  fault '{"cloud":"gcp","fault":"slow_boot","seconds":20}'
  provision_in_background gce-cancel --cloud gcp --gpus L4:1
  wait_for_output gce-cancel "creating instance gce-cancel"
  for _ in $(seq 1 50); do
    [ "$(count gcp instances)" -eq 1 ] && break
    sleep 0.1
  done
  [ "$(count gcp instances)" -eq 1 ]
  sleep 1  # inside the operation wait
  interrupt_within_2s gce-cancel
  expect_record gce-cancel creating
  run "$GPUPROV" provision --name gce-cancel --cloud gcp --gpus L4:1 --no-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"reusing existing VM gce-cancel"* ]]
  /usr/bin/python3 -c '
import json, sys
rec = json.load(open(sys.argv[1]))
assert rec["phase"] == "ready" and rec["last_error"] == "", rec
' "$GPUPROV_HOME/state/gce-cancel.json"
  run "$GPUPROV" down gce-cancel
  echo "$output"
  [ "$status" -eq 0 ]
  expect_nothing_left gcp
  [ ! -e "$GPUPROV_HOME/state/gce-cancel.json" ]
}

@test "digitalocean: Ctrl-C during a 429 back-off exits 130 within 2 s; the re-run converges" {
  # Creating the droplet is throttled with a 30 s Retry-After: gpuprov waits in the back-off.
  fault '{"cloud":"digitalocean","fault":"throttle","times":1,"retry_after":30,"method":"POST","path":"/v2/droplets"}'
  provision_in_background do-cancel --cloud digitalocean --gpus H100:1
  wait_for_output do-cancel "retrying in"
  interrupt_within_2s do-cancel
  expect_record do-cancel creating
  [ "$(count digitalocean instances)" -eq 0 ]
  run "$GPUPROV" provision --name do-cancel --cloud digitalocean --gpus H100:1 --no-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(count digitalocean instances)" -eq 1 ]
  run "$GPUPROV" down do-cancel
  echo "$output"
  [ "$status" -eq 0 ]
  expect_nothing_left digitalocean ssh_keys
  [ ! -e "$GPUPROV_HOME/state/do-cancel.json" ]
}
