# shellcheck shell=bash
# The crash-point matrix of tests/e2e/crash_points.bats (issue 15): for one cloud, every point
# where gpuprov can die (a host crash point of core/crash_point.h, armed through
# GPUPROV_TEST_CRASH_AT, or the emulator's stall_after fault right after one create or delete
# call of the driver) is run as: census before, crash, re-run of the same command, compare with
# an uninterrupted run, `gpuprov down`, census after. One row per point goes to $CRASH_ROWS:
#   cloud <TAB> point <TAB> result <TAB> detail
# result: converged | leaked | diverged | not-reached. Needs GPUPROV, CONTROL and the cloud's
# endpoint and credentials in the environment, and GPUPROV_HOME private to the cloud.

# skip_without_hooks: skips the test when gpuprov was built with GPUPROV_TEST_HOOKS off (then
# there is no separate installed executable, and nothing arms a crash point).
skip_without_hooks() {
  [ -x "$BUILD_DIR/installed-bin/gpuprov" ] || skip "gpuprov built with GPUPROV_TEST_HOOKS=OFF"
}

# census CLOUD: what exists, one "key=n" list. An emulated cloud: its /counts without the
# rate-limit and launch counters. The docker cloud (no emulator): the containers of this file's
# VMs (names starting with $CRASH_PREFIX) and the lines of gpuprov's known_hosts.
census() {
  if [ "$1" = docker ]; then
    echo "containers=$(docker ps -a --filter label=io.gpuprov.managed=1 \
      --format '{{.Label "io.gpuprov.name"}}' | grep -c "^$CRASH_PREFIX-")" \
      "known_hosts=$( (wc -l <"$GPUPROV_HOME/known_hosts") 2>/dev/null || echo 0)"
    return
  fi
  curl -fsS "$CONTROL/counts?cloud=$1" | /usr/bin/python3 -c '
import json, sys
c = json.load(sys.stdin)
for k in ("rate_limited", "operations_running", "launches"):
    c.pop(k, None)
print(" ".join("%s=%s" % (k, c[k]) for k in sorted(c)))'
}

# census_until CLOUD EXPECTED: waits up to 30 s for the census to be EXPECTED (deletes finish
# asynchronously); prints the last census.
census_until() {
  local now _
  for _ in $(seq 1 60); do
    now=$(census "$1")
    [ "$now" = "$2" ] && break
    sleep 0.5
  done
  echo "$now"
}

# record_summary NAME: "phase vm_id public_ip" of the state record, or "none".
record_summary() {
  local f="$GPUPROV_HOME/state/$1.json"
  [ -e "$f" ] || { echo none; return; }
  /usr/bin/python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(r.get("phase", ""), "id" if r.get("vm_id") else "no-id", "ip" if r.get("public_ip") else "no-ip")' "$f"
}

# instances_named CLOUD NAME: how many live instances of that name the emulator has.
instances_named() {
  if [ "$1" = docker ]; then
    count_vm_containers "$2"
    return
  fi
  curl -fsS "$CONTROL/instances?cloud=$1" |
    /usr/bin/python3 -c '
import json, sys
n = sys.argv[1]
# Massed Compute: the driver names the instance with a prefix ("gpuprov-" + name).
print(sum(r["name"] in (n, "gpuprov-" + n) for r in json.load(sys.stdin)["instances"]))' "$2"
}

# stall_state CLOUD: "true" once the cloud stalled after the armed request.
stall_state() {
  curl -fsS "$CONTROL/stalled?cloud=$1" | /usr/bin/python3 -c 'import json,sys; print(str(json.load(sys.stdin)["stalled"]).lower())'
}

row() { printf '%s\t%s\t%s\t%s\n' "$@" >>"$CRASH_ROWS"; }

# provision_cmd CLOUD NAME: the command line every run of the cloud uses.
provision_cmd() {
  # shellcheck disable=SC2086  # CLOUD_ARGS holds several words
  echo "$GPUPROV" provision --name "$2" --cloud "$1" --no-k8s ${CLOUD_ARGS[$1]}
}

# run_to_end LOG CMD...: runs CMD with stdout and stderr in LOG; prints its exit status.
run_to_end() {
  local log=$1 rc=0
  shift
  "$@" >"$log" 2>&1 3>&- || rc=$?
  echo "$rc"
}

# crash LOG POINT CLOUD CMD...: runs CMD killed at POINT: a host point (GPUPROV_TEST_CRASH_AT,
# gpuprov kills itself: 137) or "stall:<JSON fault fields>" (the emulator stalls the cloud after
# that request; this kills gpuprov then). Prints "crashed" or what happened instead.
crash() {
  local log=$1 point=$2 cloud=$3 pid rc=0 _
  shift 3
  if [[ "$point" != stall:* ]]; then
    GPUPROV_TEST_CRASH_AT="$point" "$@" >"$log" 2>&1 3>&- || rc=$?
    if [ "$rc" -eq 137 ] && grep -q "test crash point $point: SIGKILL" "$log"; then
      echo crashed
    else
      echo "exit $rc without reaching the point"
    fi
    return
  fi
  curl -fsS -X POST "$CONTROL/faults" \
    -d "{\"cloud\":\"$cloud\",\"fault\":\"stall_after\",${point#stall:}}" >/dev/null
  "$@" >"$log" 2>&1 3>&- &
  pid=$!
  for _ in $(seq 1 600); do
    [ "$(stall_state "$cloud")" = true ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ "$(stall_state "$cloud")" = true ]; then
    # Killed while held; or, after a command's last call, already ended: either way nothing
    # reached the cloud after that call.
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    echo crashed
  else
    wait "$pid" 2>/dev/null || rc=$?
    echo "exit $rc without reaching the point"
  fi
  curl -fsS -X DELETE "$CONTROL/faults?cloud=$cloud" >/dev/null  # also releases the stall
}

# baseline CLOUD: one uninterrupted provision and down; sets BASE_RC, BASE_CENSUS (after the
# provision) and BASE_RECORD, and leaves nothing.
baseline() {
  local cloud=$1 name="$CRASH_PREFIX-base" log="$CRASH_LOGS/$1-baseline"
  BASE_START=$(census "$cloud")
  # shellcheck disable=SC2046
  BASE_RC=$(run_to_end "$log.provision" $(provision_cmd "$cloud" "$name"))
  BASE_CENSUS=$(census "$cloud")
  BASE_RECORD=$(record_summary "$name")
  run_to_end "$log.down" "$GPUPROV" down "$name" >/dev/null
  local after
  after=$(census_until "$cloud" "$BASE_START")
  if [ "$after" = "$BASE_START" ]; then
    row "$cloud" uninterrupted converged "provision exit $BASE_RC, $BASE_CENSUS, record '$BASE_RECORD'; down: $after"
  else
    row "$cloud" uninterrupted leaked "after down: $after; before: $BASE_START"
  fi
}

# uncovered_calls CLOUD POINT...: the calls of the request log (the baseline's) that change the
# cloud (not GET, answered 2xx, not a token exchange) and that no stall point matches (method and
# path prefix; a point with a body match covers its method and path); one "METHOD PATH" a line.
uncovered_calls() {
  local cloud=$1
  shift
  curl -fsS "$CONTROL/requests?cloud=$cloud" | /usr/bin/python3 -c '
import json, re, sys
points = []
for p in sys.argv[1:]:
    if p.startswith("stall:"):
        f = json.loads("{" + p[len("stall:"):] + "}")
        points.append((f.get("method", ""), f.get("path", "")))
seen = set()
for r in json.load(sys.stdin)["requests"]:
    path = r["path"].split("?")[0]
    if r["method"] == "GET" or not 200 <= r["status"] < 300:
        continue
    if re.search(r"(/token$|/oauth2/token|/token/validation$)", path):
        continue
    if path.startswith("/nebius.") and not re.search(r"/(Create|Delete|Update)$", path):
        continue  # gRPC: every call is a POST; only these methods change the cloud
    if any((not m or m == r["method"]) and path.startswith(pp) for m, pp in points):
        continue
    call = r["method"] + " " + re.sub(r"/[0-9a-f-]{6,}$|/[0-9]+$", "/{id}", path)
    if call not in seen:
        seen.add(call)
        print(call)' "$@"
}

# provision_point CLOUD N POINT: crash the provision at POINT, re-run, compare, down, census.
provision_point() {
  local cloud=$1 name="$CRASH_PREFIX-$2" point=$3 log="$CRASH_LOGS/$1-$2" start crashed rc now rec n after
  start=$(census "$cloud")
  # shellcheck disable=SC2046
  crashed=$(crash "$log.crash" "$point" "$cloud" $(provision_cmd "$cloud" "$name"))
  # shellcheck disable=SC2046
  rc=$(run_to_end "$log.rerun" $(provision_cmd "$cloud" "$name"))
  now=$(census "$cloud")
  rec=$(record_summary "$name")
  n=$(instances_named "$cloud" "$name")
  run_to_end "$log.down" "$GPUPROV" down "$name" >/dev/null
  after=$(census_until "$cloud" "$start")
  report "$cloud" "$point" "$crashed" "$rc" "$now" "$rec" "$n" "$after" "$start" "$name"
}

# down_point CLOUD N POINT: provision, crash `down` at POINT, re-run down, census.
down_point() {
  local cloud=$1 name="$CRASH_PREFIX-$2" point=$3 log="$CRASH_LOGS/$1-$2" start crashed rc after
  start=$(census "$cloud")
  # shellcheck disable=SC2046
  run_to_end "$log.provision" $(provision_cmd "$cloud" "$name") >/dev/null
  crashed=$(crash "$log.crash" "$point" "$cloud" "$GPUPROV" down "$name")
  rc=$(run_to_end "$log.rerun" "$GPUPROV" down "$name")
  after=$(census_until "$cloud" "$start")
  if [ "$crashed" != crashed ]; then
    row "$cloud" "$point" not-reached "$crashed"
  elif [ "$after" != "$start" ]; then
    row "$cloud" "$point" leaked "after down: $after; before: $start"
  elif [ "$rc" -ne 0 ] || [ "$(record_summary "$name")" != none ]; then
    row "$cloud" "$point" diverged "re-run of down: exit $rc, record $(record_summary "$name")"
  else
    row "$cloud" "$point" converged "re-run of down exit 0; census back to: $start"
  fi
}

# report CLOUD POINT CRASHED RC CENSUS RECORD N AFTER START NAME: one provision row.
report() {
  local cloud=$1 point=$2 crashed=$3 rc=$4 now=$5 rec=$6 n=$7 after=$8 start=$9 name=${10}
  if [ "$crashed" != crashed ]; then
    row "$cloud" "$point" not-reached "$crashed"
  elif [ "$after" != "$start" ]; then
    row "$cloud" "$point" leaked "after down: $after; before: $start"
  elif [ "$rc" != "$BASE_RC" ] || [ "$now" != "$BASE_CENSUS" ] || [ "$rec" != "$BASE_RECORD" ] ||
    [ "$n" -ne 1 ]; then
    row "$cloud" "$point" diverged \
      "re-run exit $rc, census $now, record '$rec', $n instances named $name; uninterrupted: exit $BASE_RC, census $BASE_CENSUS, record '$BASE_RECORD'"
  else
    row "$cloud" "$point" converged "re-run as uninterrupted (exit $rc, $now, record '$rec'); down: $after"
  fi
}

# crash_matrix CLOUD POINT...: the baseline, then every point of the cloud (down-* and
# stall:…delete… points crash `down`, the others `provision`).
crash_matrix() {
  local cloud=$1 i=0 point
  shift
  [ "$cloud" = docker ] || curl -fsS -X DELETE "$CONTROL/requests?cloud=$cloud" >/dev/null
  baseline "$cloud"
  local call
  [ "$cloud" = docker ] || while read -r call; do
    row "$cloud" "$call" uncovered "a call of the uninterrupted run that no point stops after"
  done < <(uncovered_calls "$cloud" "$@")
  for point in "$@"; do
    i=$((i + 1))
    case "$point" in
      down-* | stall:*'"method":"DELETE"'* | *'"down":true'*) down_point "$cloud" "$i" "${point/,\"down\":true/}" ;;
      *) provision_point "$cloud" "$i" "$point" ;;
    esac
  done
}

# point_label POINT: the point as the table names it (a stall point: "after METHOD PATH [BODY]").
point_label() {
  local p=$1
  if [[ "$p" != stall:* ]]; then
    echo "$p"
    return
  fi
  /usr/bin/python3 -c '
import json, sys
f = json.loads("{" + sys.argv[1][len("stall:"):] + "}")
print("after " + f.get("method", "*") + " " + f.get("path", "") + (" " + f["body"] if "body" in f else ""))' "$p"
}

# write_table FILE: the rows as a Markdown table, one line per (cloud, point), then the counts.
write_table() {
  local file=$1 cloud point result detail
  {
    echo "| cloud | point | result | detail |"
    echo "|---|---|---|---|"
    sort -s -t $'\t' -k1,1 "$CRASH_ROWS" | while IFS=$'\t' read -r cloud point result detail; do
      echo "| $cloud | $(point_label "$point") | $result | ${detail//|/\\|} |"
    done
    echo
    echo "$(grep -c $'\tconverged\t' "$CRASH_ROWS") converged, $(grep -c $'\tleaked\t' "$CRASH_ROWS") leaked," \
      "$(grep -c $'\tdiverged\t' "$CRASH_ROWS") diverged, $(grep -c $'\tnot-reached\t' "$CRASH_ROWS") not reached"
  } >"$file"
}
