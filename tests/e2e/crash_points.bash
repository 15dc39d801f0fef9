# shellcheck shell=bash
# The crash-point matrix of tests/e2e/crash_points.bats (issue 15): for one cloud, every point
# where gpuprov can die (a host crash point of core/crash_point.h, armed through
# GPUPROV_TEST_CRASH_AT, or the emulator's stall_after fault right after one create or delete
# call of the driver) is run as: census before, crash, re-run of the same command, compare with
# an uninterrupted run, `gpuprov down`, census after. One row per point goes to $CRASH_ROWS:
#   cloud <TAB> point <TAB> result <TAB> detail
# result: converged | leaked | diverged | not-reached. Needs GPUPROV, CONTROL and the cloud's
# endpoint and credentials in the environment, and GPUPROV_HOME private to the cloud.
#
# CRASH_MODE says which command a matrix crashes (default plain):
#   plain    `provision --no-k8s` on a new name, and `down`;
#   k8s      `provision` with Kubernetes on, on a new name, and `down` (on the memory backend the
#            run ends at the SSH wait, after every cloud call of the create: Verda's startup
#            script among them);
#   upgrade  `provision` with Kubernetes on, for a name made first with `--no-k8s` (the
#            preparation run is not crashed): the existing VM's ports are opened for the cluster
#            (the driver's open_ports calls and the host point ports-opened).

# skip_without_hooks: skips the test when gpuprov was built with GPUPROV_TEST_HOOKS off (then
# there is no separate installed executable, and nothing arms a crash point).
skip_without_hooks() {
  [ -x "$BUILD_DIR/installed-bin/gpuprov" ] || skip "gpuprov built with GPUPROV_TEST_HOOKS=OFF"
}

# census CLOUD: what exists, one "key=n" list. An emulated cloud: its /counts without the
# rate-limit, launch and delayed-request counters. The docker cloud (no emulator): the
# containers of this file's VMs (names starting with $CRASH_PREFIX) and the lines of gpuprov's
# known_hosts.
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
for k in ("rate_limited", "operations_running", "launches", "delayed_requests"):
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

# ports_of CLOUD NAME: the TCP ports this machine can reach on the live instances of that name
# under the cloud's firewall (the emulator's reachable_ports, e.g. "22,80,443,6443"), one
# entry per instance joined by ";"; "-" on the docker cloud (its census has no firewall). A
# re-run that made the VM but left a port shut (a rule lost between two create calls) differs
# here from the uninterrupted run even where the census counts no rules (EC2, GCP, DigitalOcean).
ports_of() {
  if [ "$1" = docker ]; then
    echo -
    return
  fi
  curl -fsS "$CONTROL/instances?cloud=$1" |
    /usr/bin/python3 -c '
import json, sys
n = sys.argv[1]
print(";".join(sorted(r.get("reachable_ports", "?") for r in json.load(sys.stdin)["instances"]
                      if r["name"] in (n, "gpuprov-" + n))))' "$2"
}

# stall_state CLOUD: "true" once the cloud stalled after the armed request.
stall_state() {
  curl -fsS "$CONTROL/stalled?cloud=$1" | /usr/bin/python3 -c 'import json,sys; print(str(json.load(sys.stdin)["stalled"]).lower())'
}

# row CLOUD POINT RESULT DETAIL: one row; the cloud column names the mode when not plain.
row() {
  local cloud=$1
  case "${CRASH_MODE:-plain}" in
    k8s) cloud="$cloud (k8s on)" ;;
    upgrade) cloud="$cloud (k8s on an existing VM)" ;;
  esac
  shift
  printf '%s\t%s\t%s\t%s\n' "$cloud" "$@" >>"$CRASH_ROWS"
}

# mode_letter: the mode's mark in VM names ("" plain, k, u), so no two modes share a name.
mode_letter() {
  case "${CRASH_MODE:-plain}" in
    k8s) echo k ;;
    upgrade) echo u ;;
  esac
}

# provision_cmd CLOUD NAME: the command line every crashed run of the mode uses.
provision_cmd() {
  local k8s=--no-k8s
  [ "${CRASH_MODE:-plain}" = plain ] || k8s=
  # shellcheck disable=SC2086  # CLOUD_ARGS holds several words
  echo "$GPUPROV" provision --name "$2" --cloud "$1" $k8s ${CLOUD_ARGS[$1]}
}

# prepare CLOUD NAME LOG: the upgrade mode's first run (a plain VM of that name); else nothing.
prepare() {
  [ "${CRASH_MODE:-plain}" = upgrade ] || return 0
  # shellcheck disable=SC2086  # CLOUD_ARGS holds several words
  run_to_end "$3" "$GPUPROV" provision --name "$2" --cloud "$1" --no-k8s ${CLOUD_ARGS[$1]} >/dev/null
}

# save_requests CLOUD FILE: the emulator's request log of the cloud, as JSON, to FILE.
save_requests() {
  curl -fsS "$CONTROL/requests?cloud=$1" >"$2"
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
    stop_child KILL "$pid" || true
    wait "$pid" 2>/dev/null || true
    echo crashed
  else
    wait "$pid" 2>/dev/null || rc=$?
    echo "exit $rc without reaching the point"
  fi
  curl -fsS -X DELETE "$CONTROL/faults?cloud=$cloud" >/dev/null  # also releases the stall
}

# baseline CLOUD: one uninterrupted provision and down; sets BASE_RC, BASE_CENSUS (after the
# provision), BASE_RECORD and BASE_PORTS (ports_of its VM), and leaves nothing. The calls it made (the upgrade mode: those of
# the crashed command alone, not of the preparation or of down) go to BASE_REQUESTS (a file).
baseline() {
  local cloud=$1 name log
  name="$CRASH_PREFIX$(mode_letter)-base" log="$CRASH_LOGS/$CRASH_PREFIX-$1$(mode_letter)-baseline"
  BASE_START=$(census "$cloud")
  BASE_REQUESTS="$log.requests.json"
  prepare "$cloud" "$name" "$log.prepare"
  [ "$cloud" = docker ] || curl -fsS -X DELETE "$CONTROL/requests?cloud=$cloud" >/dev/null
  # shellcheck disable=SC2046
  BASE_RC=$(run_to_end "$log.provision" $(provision_cmd "$cloud" "$name"))
  BASE_CENSUS=$(census "$cloud")
  BASE_RECORD=$(record_summary "$name")
  BASE_PORTS=$(ports_of "$cloud" "$name")
  [ "$cloud" = docker ] || [ "${CRASH_MODE:-plain}" != upgrade ] || save_requests "$cloud" "$BASE_REQUESTS"
  run_to_end "$log.down" "$GPUPROV" down "$name" >/dev/null
  [ "$cloud" = docker ] || [ "${CRASH_MODE:-plain}" = upgrade ] || save_requests "$cloud" "$BASE_REQUESTS"
  local after
  after=$(census_until "$cloud" "$BASE_START")
  if [ "$after" = "$BASE_START" ]; then
    row "$cloud" uninterrupted converged "provision exit $BASE_RC, $BASE_CENSUS, record '$BASE_RECORD', ports $BASE_PORTS; down: $after"
  else
    row "$cloud" uninterrupted leaked "after down: $after; before: $BASE_START"
  fi
}

# uncovered_calls REQUESTS POINT...: the calls of the request log REQUESTS (a file: the
# baseline's) that change the cloud (not GET, answered 2xx, not a token exchange) and that no
# stall point stops after, one "METHOD PATH" a line. A point matches as stall_after does (method,
# path prefix, body substring: EC2's "Action=X&" against the log's action) and stops after its
# nth match (default the first); a call matched by a point but not at the point's nth match is
# uncovered (the Nth call to one path needs a point of its own).
uncovered_calls() {
  local requests=$1
  shift
  /usr/bin/python3 -c '
import json, re, sys
points = []
for p in sys.argv[2:]:
    if p.startswith("stall:"):
        f = json.loads("{" + p[len("stall:"):] + "}")
        points.append([f.get("method", ""), f.get("path", ""), f.get("body", ""), f.get("nth", 1), 0])
made = {}
for r in json.load(open(sys.argv[1]))["requests"]:
    path = r["path"].split("?")[0]
    if r["method"] == "GET" or not 200 <= r["status"] < 300:
        continue
    if re.search(r"(/token$|/oauth2/token|/token/validation$)", path):
        continue
    if path.startswith("/nebius.") and not re.search(r"/(Create|Delete|Update)$", path):
        continue  # gRPC: every call is a POST; only these methods change the cloud
    action = r.get("action", "")
    if path == "/" and re.match(r"(Describe|Get)", action):
        continue  # EC2: every call is a POST; these actions only read
    body = "Action=" + action + "&" if action else ""
    covered = False
    for p in points:
        if (not p[0] or p[0] == r["method"]) and path.startswith(p[1]) and p[2] in body:
            p[4] += 1
            covered = covered or p[4] == p[3]
    call = r["method"] + " " + re.sub(r"/[0-9a-f-]{6,}$|/[0-9]+$", "/{id}", path)
    if action:
        call += " Action=" + action
    made[call] = made.get(call, 0) + 1
    if not covered:
        print(call + (" (call %d to it)" % made[call] if made[call] > 1 else ""))' "$requests" "$@"
}

# provision_point CLOUD N POINT: crash the provision at POINT, re-run, compare, down, census.
provision_point() {
  local cloud=$1 point=$3 name log
  name="$CRASH_PREFIX$(mode_letter)-$2" log="$CRASH_LOGS/$CRASH_PREFIX-$1$(mode_letter)-$2"
  local start crashed rc now rec n ports after
  start=$(census "$cloud")
  prepare "$cloud" "$name" "$log.prepare"
  # shellcheck disable=SC2046
  crashed=$(crash "$log.crash" "$point" "$cloud" $(provision_cmd "$cloud" "$name"))
  # shellcheck disable=SC2046
  rc=$(run_to_end "$log.rerun" $(provision_cmd "$cloud" "$name"))
  now=$(census "$cloud")
  rec=$(record_summary "$name")
  n=$(instances_named "$cloud" "$name")
  ports=$(ports_of "$cloud" "$name")
  run_to_end "$log.down" "$GPUPROV" down "$name" >/dev/null
  after=$(census_until "$cloud" "$start")
  report "$cloud" "$point" "$crashed" "$rc" "$now" "$rec" "$n" "$after" "$start" "$name" "$ports"
}

# down_point CLOUD N POINT: provision, crash `down` at POINT, re-run down, census.
down_point() {
  local cloud=$1 point=$3 name log
  name="$CRASH_PREFIX$(mode_letter)-$2" log="$CRASH_LOGS/$CRASH_PREFIX-$1$(mode_letter)-$2"
  local start crashed rc after
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

# report CLOUD POINT CRASHED RC CENSUS RECORD N AFTER START NAME PORTS: one provision row.
report() {
  local cloud=$1 point=$2 crashed=$3 rc=$4 now=$5 rec=$6 n=$7 after=$8 start=$9 name=${10} ports=${11}
  if [ "$crashed" != crashed ]; then
    row "$cloud" "$point" not-reached "$crashed"
  elif [ "$after" != "$start" ]; then
    row "$cloud" "$point" leaked "after down: $after; before: $start"
  elif [ "$rc" != "$BASE_RC" ] || [ "$now" != "$BASE_CENSUS" ] || [ "$rec" != "$BASE_RECORD" ] ||
    [ "$n" -ne 1 ] || [ "$ports" != "$BASE_PORTS" ]; then
    row "$cloud" "$point" diverged \
      "re-run exit $rc, census $now, record '$rec', ports $ports, $n instances named $name; uninterrupted: exit $BASE_RC, census $BASE_CENSUS, record '$BASE_RECORD', ports $BASE_PORTS"
  else
    row "$cloud" "$point" converged "re-run as uninterrupted (exit $rc, $now, record '$rec', ports $ports); down: $after"
  fi
}

# crash_matrix CLOUD POINT...: the baseline, then every point of the cloud (down-* and
# stall:…delete… points crash `down`, the others `provision`).
crash_matrix() {
  local cloud=$1 i=0 point
  shift
  baseline "$cloud"
  local call
  # CRASH_NO_UNCOVERED=1: this matrix runs host points only (another one has the stall points).
  [ "$cloud" = docker ] || [ "${CRASH_NO_UNCOVERED:-0}" = 1 ] || while read -r call; do
    row "$cloud" "$call" uncovered "a call of the uninterrupted run that no point stops after"
  done < <(uncovered_calls "$BASE_REQUESTS" "$@")
  for point in "$@"; do
    i=$((i + 1))
    case "$point" in
      down-* | stall:*'"method":"DELETE"'* | *'"down":true'*) down_point "$cloud" "$i" "${point/,\"down\":true/}" ;;
      *) provision_point "$cloud" "$i" "$point" ;;
    esac
  done
}

# crash_matrix_side_by_side CLOUD WIDTH POINT...: crash_matrix for a cloud whose census is per
# name prefix and GPUPROV_HOME (the docker cloud: containers and known_hosts lines): the
# baseline, then the points WIDTH at a time, each in its own GPUPROV_HOME (a copy of the config)
# with its own name prefix, so no row sees another's VMs or host keys.
crash_matrix_side_by_side() {
  local cloud=$1 width=$2 i=0 point home=$GPUPROV_HOME prefix=$CRASH_PREFIX
  shift 2
  baseline "$cloud"
  for point in "$@"; do
    i=$((i + 1))
    while [ "$(jobs -rp | wc -l)" -ge "$width" ]; do wait -n || true; done
    (
      # shellcheck disable=SC2030  # each side-by-side run has its own home, in its subshell
      export GPUPROV_HOME="$home-$i" CRASH_PREFIX="${prefix}r$i"
      mkdir -p "$GPUPROV_HOME"
      cp "$home/config.toml" "$GPUPROV_HOME/config.toml"
      case "$point" in
        down-*) down_point "$cloud" "$i" "$point" ;;
        *) provision_point "$cloud" "$i" "$point" ;;
      esac
    ) &
  done
  wait
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
nth = f.get("nth", 1)
print("after " + f.get("method", "*") + " " + f.get("path", "") + (" " + f["body"] if "body" in f else "") +
      (" (call %d to it)" % nth if nth > 1 else ""))' "$p"
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
      "$(grep -c $'\tdiverged\t' "$CRASH_ROWS") diverged, $(grep -c $'\tnot-reached\t' "$CRASH_ROWS") not reached," \
      "$(grep -c $'\tuncovered\t' "$CRASH_ROWS") uncovered"
  } >"$file"
}

# ---- The Kubernetes points on test VMs (crash_points_k8s*.bats) -----------------------------------
# Each of those files sets K8S_TABLE (its table file) and the cloud's credential in setup_file,
# then calls k8s_file_setup CLOUD; its tests run with k8s_setup / k8s_teardown.

# k8s_file_setup CLOUD: a fresh table, a home with waits long enough for test VMs under load,
# one docker-backend emulator of CLOUD.
k8s_file_setup() {
  rm -f "$K8S_TABLE"
  # shellcheck disable=SC2031  # crash_matrix_side_by_side sets its own in subshells
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  printf '[defaults.timeouts]\nssh_wait_seconds = 180\nboot_install_wait_seconds = 120\napi_wait_seconds = 120\n' \
    >"$GPUPROV_HOME/config.toml"
  start_emulator emu --backend docker --clouds "$1"
}

k8s_setup() {
  skip_without_hooks
  use_emulator emu
}

k8s_teardown() {
  reset_emulators
  rm -f "$GPUPROV_HOME"/state/*.json "$GPUPROV_HOME"/kube/*.yaml
}

# passed CLOUD ROUTE POINT...: the rows of a test that passed, appended to $K8S_TABLE.
passed() {
  local cloud=$1 route=$2 point
  shift 2
  [ -s "$K8S_TABLE" ] || printf '| cloud | route, access | point | result |\n|---|---|---|---|\n' >"$K8S_TABLE"
  for point in "$@"; do
    echo "| $cloud | $route | $point | converged (re-run ready, one VM, nothing installed twice; down: census as before) |" >>"$K8S_TABLE"
  done
}

# crash_at POINT CMD...: CMD killed by gpuprov itself at POINT (exit 137).
crash_at() {
  local point=$1
  shift
  run env GPUPROV_TEST_CRASH_AT="$point" "$@"
  # shellcheck disable=SC2154  # output and status: set by bats' run
  { echo "$output"; [ "$status" -eq 137 ]; }
  [[ "$output" == *"test crash point $point: SIGKILL"* ]]
}

# converged NAME CLOUD OUTPUT: a re-run's -v OUTPUT ended as an uninterrupted run: exit status
# already checked by the caller, the record ready, one VM, kubectl reaches the node.
converged() {
  [ "$(field "$1" phase)" = ready ]
  [ "$(instances_named "$2" "$1")" -eq 1 ]
  [[ "$3" == *"reusing existing VM $1"* ]]
  expect_cluster_ready "$1"
}

# ---- The cluster's points on every cloud's own Kubernetes test (aws.bats, gcp.bats, ...) ---------
# Each cloud's e2e file folds the chain into the Kubernetes test it has anyway (no provision of its
# own; crash_points_k8s_san.bats and crash_points_k8s_tunnel.bats use it for DigitalOcean and Prime
# Intellect): cluster_crash_chain makes the VM by runs killed at each point in turn, the test's own
# `gpuprov -v provision` is the last re-run, cluster_crash_converged checks it and the test's own
# `down`, and cluster_crash_passed writes the rows.

# cluster_table CLOUD: where the chain's rows go: $K8S_TABLE in a crash_points_k8s*.bats file
# (k8s_file_setup starts it), else one file per cloud in $GPUPROV_CRASH_TABLE_DIR (default the
# build dir), since the cloud files run side by side.
cluster_table() {
  if [ -n "${K8S_TABLE:-}" ]; then
    echo "$K8S_TABLE"
  else
    echo "${GPUPROV_CRASH_TABLE_DIR:-$BUILD_DIR}/crash-table-cluster-$1.md"
  fi
}

# cluster_crash_chain CLOUD NAME POINTS ARGS...: `gpuprov -v provision --name NAME --cloud CLOUD
# ARGS...` killed at each point of POINTS (words, in the order the run reaches them), each run the
# re-run of the one before; after each, the step's trace: the host key in known_hosts, the record's
# probe saying the installer was pushed or re-run, the kubeconfig on disk. Sets CHAIN_START (the
# census before), CHAIN_POINTS and CHAIN_OUTPUT (the killed runs' output, in order). With
# GPUPROV_TEST_HOOKS off nothing is crashed (CHAIN_POINTS empty) and the test's run is the first.
cluster_crash_chain() {
  local cloud=$1 name=$2 point
  # shellcheck disable=SC2206  # POINTS is a list of words
  local points=($3)
  shift 3
  [ -n "${K8S_TABLE:-}" ] || rm -f "$(cluster_table "$cloud")"
  CHAIN_START=$(census "$cloud")
  CHAIN_POINTS=()
  CHAIN_OUTPUT=
  if [ ! -x "$BUILD_DIR/installed-bin/gpuprov" ]; then
    echo "gpuprov built with GPUPROV_TEST_HOOKS=OFF: no crash points" >&2
    return 0
  fi
  for point in "${points[@]}"; do
    crash_at "$point" "$GPUPROV" -v provision --name "$name" --cloud "$cloud" "$@"
    CHAIN_OUTPUT+="$output"$'\n'
    case "$point" in
      host-key-pinned) grep -q . "$GPUPROV_HOME/known_hosts" ;;
      installer-pushed) [ "$(field "$name" probe.pushed_over_ssh)" = yes ] ;;
      san-rerun) [ "$(field "$name" probe.san_rerun)" = yes ] ;;
      kubeconfig-written) [ -e "$GPUPROV_HOME/kube/$name.yaml" ] ;;
      *) echo "cluster_crash_chain: $point is not a cluster point" >&2; return 1 ;;
    esac
    CHAIN_POINTS+=("$point")
  done
}

# cluster_crash_converged CLOUD NAME OUTPUT: the last re-run (its -v OUTPUT, exit 0 checked by
# the caller) ended as an uninterrupted run: phase ready, one VM, the VM reused, nothing installed
# twice (no installer push and no SAN re-run in it); and the chain crashed at every install step
# the route took: a push or SAN re-run in any run of the chain is one of its points. Nothing to
# check when the chain crashed nothing.
cluster_crash_converged() {
  local cloud=$1 name=$2 out=$3
  [ "${#CHAIN_POINTS[@]}" -gt 0 ] || return 0
  [ "$(field "$name" phase)" = ready ]
  [ "$(instances_named "$cloud" "$name")" -eq 1 ]
  [[ "$out" == *"reusing existing VM $name"* ]]
  [ "$(round_trips "$out" "push installer")" -eq 0 ]
  [ "$(round_trips "$out" "re-run installer with the public IP")" -eq 0 ]
  chain_covers installer-pushed "push installer"
  chain_covers san-rerun "re-run installer with the public IP"
}

# chain_covers POINT PURPOSE: the chain's runs made the SSH round trip PURPOSE exactly when POINT
# is one of its points, and then once (the point not reached fails crash_at; reached but not
# listed fails here).
chain_covers() {
  local n
  n=$(round_trips "$CHAIN_OUTPUT" "$2")
  if [[ " ${CHAIN_POINTS[*]} " == *" $1 "* ]]; then
    [ "$n" -eq 1 ] || { echo "$1: the chain made $n '$2' round trips" >&2; return 1; }
  else
    [ "$n" -eq 0 ] || { echo "the route reached $1 ('$2') but the chain does not crash there" >&2; return 1; }
  fi
}

# cluster_crash_passed CLOUD ROUTE: after the test's `down`: the census is back to CHAIN_START,
# then the chain's rows go to the cloud's table (cluster_table).
cluster_crash_passed() {
  local cloud=$1 route=$2 now
  now=$(census_until "$cloud" "$CHAIN_START")
  [ "$now" = "$CHAIN_START" ] || { echo "census after down: $now; before: $CHAIN_START" >&2; return 1; }
  [ "${#CHAIN_POINTS[@]}" -gt 0 ] || return 0
  K8S_TABLE=$(cluster_table "$cloud") passed "$cloud" "$route" "${CHAIN_POINTS[@]}"
}

# write_cluster_table FILE: the rows of every cluster table in the build dir (crash-table-k8s*.md
# and crash-table-cluster-*.md, as the files above leave them) as one table sorted by cloud, then
# the counts: the docs' cluster section. Needs only BUILD_DIR (or GPUPROV_CRASH_TABLE_DIR):
#   BUILD_DIR=build bash -c '. tests/e2e/crash_points.bash; write_cluster_table build/crash-table-cluster.md'
write_cluster_table() {
  local dir=${GPUPROV_CRASH_TABLE_DIR:-$BUILD_DIR} rows total=0 converged=0 clouds=0
  rows=$(cat "$dir"/crash-table-k8s*.md "$dir"/crash-table-cluster-*.md 2>/dev/null |
    grep '^| [a-z]' | grep -v '^| cloud ' | sort -s -t '|' -k2,2)
  if [ -n "$rows" ]; then
    total=$(wc -l <<<"$rows")
    converged=$(grep -c '^|[^|]*|[^|]*|[^|]*| converged ' <<<"$rows" || true)
    clouds=$(cut -d'|' -f2 <<<"$rows" | sort -u | wc -l)
  fi
  {
    printf '| cloud | route, access | point | result |\n|---|---|---|---|\n'
    [ -z "$rows" ] || echo "$rows"
    echo
    echo "$total rows on $clouds clouds: $converged converged, $((total - converged)) not"
  } >"$1"
}
