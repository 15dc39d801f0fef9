# Helpers of the spot e2e files (spot.bats, spot_tunnel.bats): a preemption through the
# emulator's control API, `gpuprov watch` bringing the VM back, and both with their checks.

# preempt CLOUD NAME [INSTANCE]: the emulated cloud takes VM NAME back (POST /preempt of its
# instance, INSTANCE where the cloud names it otherwise, e.g. Massed Compute's gpuprov-NAME);
# waits up to 30 s for the VM's state to read preempted.
preempt() {
  local _
  curl -fsS -X POST "$CONTROL/preempt" -d "{\"cloud\":\"$1\",\"name\":\"${3:-$2}\"}" >/dev/null
  for _ in $(seq 1 30); do
    [ "$(field "$2" state)" = preempted ] && return 0
    sleep 1
  done
  return 1
}

# watch_brings_back CLOUD NAME REASON: runs `gpuprov watch NAME` (ndjson on stdout, lines on
# stderr, in $BATS_TEST_TMPDIR/watch.out and watch.err) until it says it recovered the VM, then
# stops it with Ctrl-C; checks the preempted event (its reason starting with REASON), the
# recovered event and the line with the time it took. The watch's PID is in WATCH_PID while it
# runs (the file's teardown stops it).
watch_brings_back() {
  local cloud=$1 name=$2 reason=$3 out="$BATS_TEST_TMPDIR/watch.out" _
  "$GPUPROV" watch "$name" --interval 1 --output ndjson >"$out" 2>"$BATS_TEST_TMPDIR/watch.err" 3>&- &
  WATCH_PID=$!
  for _ in $(seq 1 300); do
    grep -q '"event":"recovered"' "$out" && break
    kill -0 "$WATCH_PID" 2>/dev/null || break
    sleep 1
  done
  cat "$BATS_TEST_TMPDIR/watch.err" "$out"
  grep -qF "\"event\":\"preempted\",\"name\":\"$name\",\"cloud\":\"$cloud\",\"reason\":\"$reason" "$out"
  grep -q "\"event\":\"recovered\",\"name\":\"$name\"" "$out"
  # The line with the time it took (with -o ndjson, a phase event like provision's steps).
  grep -q "\"message\":\"recovered $name in [0-9.]* s: a new VM on $cloud (spot)" "$out"
  grep -q "VM $name was preempted by $cloud" "$out"
  stop_child INT "$WATCH_PID" gpuprov
  wait "$WATCH_PID" || { echo "watch exited $?" >&2; return 1; }
  WATCH_PID=
}

# preempt_and_watch NAME CLOUD INSTANCE REASON: the emulator takes the ready spot VM NAME back
# (its instance INSTANCE on CLOUD); list shows it PREEMPTED with REASON; `gpuprov watch` brings
# it back (its ndjson events and the line with the time it took), a new ready spot VM of the
# same name with a new address, the only one on CLOUD.
preempt_and_watch() {
  local name=$1 cloud=$2 instance=$3 reason=$4 first_id first_ip
  first_id=$(field "$name" vm_id)
  first_ip=$(field "$name" address)
  preempt "$cloud" "$name" "$instance"
  run "$GPUPROV" list
  # shellcheck disable=SC2154  # output: set by bats' run
  echo "$output"
  [[ "$(grep "^$name " <<<"$output")" == *PREEMPTED* ]]
  [[ "$output" == *"$name: preempted by $cloud ($reason)"* ]]
  watch_brings_back "$cloud" "$name" "$reason\""
  [ "$(field "$name" vm_id)" != "$first_id" ]
  [ "$(field "$name" address)" != "$first_ip" ]
  [ "$(field "$name" spot)" = True ]
  [ "$(field "$name" phase)" = ready ]
  [ "$(count "$cloud" instances)" -eq 1 ]
}
