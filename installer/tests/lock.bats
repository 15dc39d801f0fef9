#!/usr/bin/env bats
# The host-wide lock: two runs never overlap; the later one waits.

load helpers

setup() { common_setup; }
teardown() { common_teardown; }

# line_of PATTERN: first line number of PATTERN in the installer log.
line_of() { grep -n -m1 -- "$1" "$SANDBOX/var/log/gpuprov-install.log" | cut -d: -f1; }

@test "two concurrent runs serialise: the second waits for the first, then changes nothing" {
  export FAKE_SYSTEMCTL_START_DELAY=2 # the first run is inside 'systemctl start' for 2 s
  "$INSTALLER" >"$BATS_TEST_TMPDIR/a.out" 2>&1 &
  pid_a=$!
  for ((i = 0; i < 100; i++)); do
    grep -q "\[run $pid_a\] lock acquired" "$SANDBOX/var/log/gpuprov-install.log" 2>/dev/null && break
    sleep 0.05
  done
  "$INSTALLER" >"$BATS_TEST_TMPDIR/b.out" 2>&1 &
  pid_b=$!
  wait "$pid_a"
  wait "$pid_b"
  log="$SANDBOX/var/log/gpuprov-install.log"
  a_locked="$(line_of "\[run $pid_a\] lock acquired")"
  b_waits="$(line_of "\[run $pid_b\] another gpuprov-install run holds")"
  a_done="$(line_of "\[run $pid_a\] done:")"
  b_locked="$(line_of "\[run $pid_b\] lock acquired")"
  b_done="$(line_of "\[run $pid_b\] done:")"
  [ -n "$a_locked" ] && [ -n "$b_waits" ] && [ -n "$a_done" ] && [ -n "$b_locked" ] && [ -n "$b_done" ]
  [ "$a_locked" -lt "$b_waits" ]
  [ "$b_waits" -lt "$a_done" ]
  [ "$a_done" -lt "$b_locked" ]
  # Timestamps agree: B got the lock after A finished.
  ts() { sed -n "${1}p" "$log" | cut -d' ' -f1; }
  [[ "$(ts "$a_done")" < "$(ts "$b_locked")" || "$(ts "$a_done")" == "$(ts "$b_locked")" ]]
  # A started k3s; B found it running with the same config: one start in all.
  [ "$(k3s_starts)" -eq 1 ]
  [ "$(status .pid)" = "$pid_b" ]
  [ "$(status .result)" = ok ]
}

@test "a run that cannot get the lock within --lock-timeout exits 3 and leaves the status alone" {
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  mkdir -p "$SANDBOX/run/lock"
  flock "$SANDBOX/run/lock/gpuprov-install.lock" sleep 5 &
  holder=$!
  sleep 0.3
  run "$INSTALLER" --lock-timeout 1 --public-ip 203.0.113.7
  kill "$holder" 2>/dev/null || true
  [ "$status" -eq 3 ]
  [[ "$output" == *"failed step: lock"* ]]
  [ "$(status .result)" = ok ] # the marker of the run that finished, not overwritten
  refute grep -q 203.0.113.7 "$SANDBOX/etc/rancher/k3s/config.yaml"
}
