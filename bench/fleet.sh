#!/usr/bin/env bash
# Many VMs at once: N `gpuprov provision --no-k8s` processes started together in one shared
# GPUPROV_HOME (what a user does: different names, one home; the per-VM lock, the key file and
# known_hosts are shared), against one `gpuprov provision` alone, side by side in one hyperfine
# run, on the cloud emulator with its documented rate limits enforced. Two backends:
#
# - docker (default, N = 8): each VM a container that must boot and answer SSH; a provision
#   succeeds when it exits 0.
# - memory (BENCH_BACKEND=memory, N = 50): the control plane only. The memory backend's VMs are
#   records that turn running after --boot-seconds (3 s here) and run no SSH server, so every
#   provision is expected to end at the SSH wait, exit 1, after its VM ran; the SSH wait is cut
#   to 2 s (`[defaults.timeouts] ssh_wait_seconds = 2`). Counted as a success is exactly that:
#   exit 1 with "did not become reachable" in the SSH phase, the VM's address known and its state
#   record written; anything else (exit 0 included) is an error. The 2 s wait is the same for one
#   and for N and is inside hyperfine's times; the control-plane time is measured without it,
#   from each provision's ndjson events: its start to its "waiting for SSH" event (the VM
#   running, its address known), and for a batch its start to the last such event. Then one
#   more batch with rate limits off (emulator `POST /settings`), to tell gpuprov's own
#   concurrency from the cloud's limit. The one alone is started the same way (--at-once 1).
#
# Then one more batch of N, not timed, with the emulator's request log cleared first: API calls
# per VM and every 429 the emulator answered. A 429 the driver absorbed (it retried and the
# provision succeeded) is counted but is not an error; a provision that failed is. Writes
# bench/results/fleet.md (hyperfine) and fleet-summary.md (memory: fleet-memory.md and
# fleet-memory-summary.md); BENCHMARKS.md quotes them.
#
#   GPUPROV_BUILD_DIR  the build to measure (default build)
#   BENCH_BACKEND      docker (default) or memory
#   BENCH_FLEET_N      VMs at once (default 8 on docker, 50 on memory)
#   BENCH_CLOUD        the emulated cloud (default digitalocean)
#   BENCH_RUNS         runs per command (default 2)
#   BENCH_RESULTS_DIR  where the tables go (default bench/results; with BENCH_QUICK a temp dir)
#   BENCH_QUICK=1      a smoke: N = 3, one run (memory: VMs running after 1 s)
#
# Internal: `fleet.sh --at-once N PREFIX STATUS_DIR` starts N provisions (PREFIX-1..N) and
# waits for all; each one's verdict goes to STATUS_DIR/PREFIX-i.rc (0 = success as above,
# otherwise its exit status, or "ssh-reached" on memory when SSH answered) and is appended to
# every.rc, its -v and ndjson output to PREFIX-i.log, the batch's count of 429s to 429s and, on
# memory, the batch's control-plane seconds to cp (one line per batch).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${GPUPROV_BUILD_DIR:-build}
GPUPROV="$BUILD_DIR/bin/gpuprov"
cloud=${BENCH_CLOUD:-digitalocean}
backend=${BENCH_BACKEND:-docker}
case "$backend" in docker | memory) ;; *) echo "BENCH_BACKEND: docker or memory, not $backend" >&2; exit 2 ;; esac
export BENCH_BACKEND=$backend

if [ "${1:-}" = --at-once ]; then
  n=$2 prefix=$3 dir=$4
  mkdir -p "$dir"
  date +%s.%N >"$dir/$prefix.start"
  for i in $(seq 1 "$n"); do
    ( date +%s.%N >"$dir/$prefix-$i.start"
      rc=0
      "$GPUPROV" -v provision --name "$prefix-$i" --cloud "$cloud" --gpus H100:1 --no-k8s \
        -o ndjson >"$dir/$prefix-$i.log" 2>&1 || rc=$?
      if [ "$backend" = memory ]; then
        # Success = the end the memory backend allows: the VM ran, its record was written, and
        # the SSH wait gave up.
        if [ "$rc" = 1 ] && [ -f "$GPUPROV_HOME/state/$prefix-$i.json" ] &&
          grep -q '^{"event":"phase","phase":"ssh",.*"waiting for SSH on ' "$dir/$prefix-$i.log" &&
          grep -q '^{"event":"error","phase":"ssh",.*did not become reachable' "$dir/$prefix-$i.log"; then
          rc=0
        elif [ "$rc" = 0 ]; then
          rc=ssh-reached
        fi
      fi
      echo "$rc" >"$dir/$prefix-$i.rc"
      echo "$rc" >>"$dir/every.rc" ) &
  done
  wait
  # The 429s the drivers met (and retried) in this batch, one line per batch.
  cat "$dir/$prefix"-*.log | grep -c -- '-> 429 ' >>"$dir/429s" || true
  if [ "$backend" = memory ]; then
    # The batch's control plane: from its start to the last "waiting for SSH" event (each
    # event's elapsed counts from its own process's start); "failed" when one never got there.
    for i in $(seq 1 "$n"); do
      el=$(grep -m1 '^{"event":"phase","phase":"ssh",' "$dir/$prefix-$i.log" |
        sed -n 's/.*"elapsed":\([0-9.]*\).*/\1/p' || true)
      echo "$(cat "$dir/$prefix-$i.start") ${el:-none}"
    done | awk -v s="$(cat "$dir/$prefix.start")" '
      $2 == "none" { bad = 1 } $2 != "none" && $1 - s + $2 > m { m = $1 - s + $2 } { seen++ }
      END { if (bad || seen == 0) print "failed"; else printf "%.2f\n", m }' >>"$dir/cp"
  fi
  if grep -qv '^0$' "$dir/$prefix"-*.rc; then exit 1; fi
  exit 0
fi

if [ "${BENCH_QUICK:-0}" = 1 ]; then
  n=3 runs=1
else
  n=${BENCH_FLEET_N:-8} runs=${BENCH_RUNS:-2}
  [ "$backend" = docker ] || n=${BENCH_FLEET_N:-50}
fi
cmake --build "$BUILD_DIR" --target gpuprov gpuprov-remote gpuprov-emulator \
  "gpuprov-driver-$cloud" >/dev/null
work=$(mktemp -d)
# BENCH_QUICK writes its (meaningless) tables beside the run, not over the quoted ones.
results=${BENCH_RESULTS_DIR:-bench/results}
[ "${BENCH_QUICK:-0}" != 1 ] || results=${BENCH_RESULTS_DIR:-$work/results}
export GPUPROV_HOME="$work/home" NO_COLOR=1
export DIGITALOCEAN_TOKEN="dop_v1_bench_token" PRIME_API_KEY="pit_bench_key"
export LAMBDA_API_KEY="secret_bench_lambda" HYPERSTACK_API_KEY="bench-hyperstack-key"
mkdir -p "$GPUPROV_HOME" "$results"
boot=()
if [ "$backend" = memory ]; then
  boot=(--boot-seconds 3)
  [ "${BENCH_QUICK:-0}" != 1 ] || boot=(--boot-seconds 1)
  printf '%s\n' '[defaults.timeouts]' 'ssh_wait_seconds = 2' >"$GPUPROV_HOME/config.toml"
fi
"$BUILD_DIR/bin/gpuprov-emulator" --backend "$backend" "${boot[@]}" --clouds "$cloud" \
  >"$work/emu.out" 2>"$work/emu.err" &
emu=$!
# BENCH_KEEP_LOGS=DIR: each provision's -v and ndjson output (timed and counted batches) is
# copied there at the end, to look at a slow one.
trap 'kill $emu 2>/dev/null; wait $emu 2>/dev/null
  [ -z "${BENCH_KEEP_LOGS:-}" ] || { mkdir -p "$BENCH_KEEP_LOGS"; cp -r "$work"/status "$work"/counted "$BENCH_KEEP_LOGS"/ 2>/dev/null; }
  rm -rf "$work"' EXIT
for _ in $(seq 1 100); do grep -q '^control ' "$work/emu.out" && break; sleep 0.2; done
endpoint=$(awk -v c="$cloud" '$1==c{print $2}' "$work/emu.out")
control=$(awk '$1=="control"{print $2}' "$work/emu.out")
if [ -z "$endpoint" ] || [ -z "$control" ]; then
  echo "emulator did not start: $(cat "$work/emu.err")" >&2
  exit 1
fi
var="GPUPROV_$(tr '[:lower:]' '[:upper:]' <<<"$cloud")_ENDPOINT"
export "$var=$endpoint"

g=$GPUPROV
self="bash $0"

if [ "$backend" = memory ]; then
  # Before each run (outside the timing): the emulator reset (every VM and key gone, a new
  # rate-limit window) and the shared home's records removed, since their VMs are gone; each run
  # is what a user who made no other call in the last minute sees.
  fresh="curl -fsS -X POST $control/reset -d '{}' >/dev/null; rm -rf $GPUPROV_HOME/state"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$work/load"
  hyperfine --runs "$runs" -i --export-markdown "$results"/fleet-memory.md \
    --export-json "$work/fleet.json" --prepare "$fresh" --prepare "$fresh" \
    -n "one provision" "$self --at-once 1 one $work/one" \
    -n "$n provisions at once, one home" "$self --at-once $n f $work/status"
  echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$work/load"
  cat "$results"/fleet-memory.md

  # The counted batch: the request log of this batch alone, from a fresh rate-limit window.
  eval "$fresh"
  rc=0
  bash "$0" --at-once "$n" c "$work/counted" || rc=$?
  curl -fsS "$control/requests?cloud=$cloud" >"$work/requests.json"
  "$g" list --no-refresh --output json >"$work/list.json"
  # The same batch with the rate limits off: gpuprov's own concurrency without the cloud's limit.
  eval "$fresh"
  curl -fsS -X POST "$control/settings" -d "{\"cloud\":\"$cloud\",\"enforce_rate_limits\":false}" >/dev/null
  bash "$0" --at-once "$n" u "$work/unlimited" || rc=$?
  curl -fsS "$control/requests?cloud=$cloud" >"$work/requests-unlimited.json"
  eval "$fresh"
  python3 - "$work" "$n" "$cloud" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(tr '\n' ';' <"$work/load")" \
    "${boot[1]}" >"$results"/fleet-memory-summary.md <<'PY'
import collections, glob, json, os, sys
work, n, cloud, load_now, load = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
boot = sys.argv[6]
def lines(path):
    return [l.strip() for l in open(path)] if os.path.exists(path) else []
def verdicts(d):
    return {os.path.basename(f)[:-3]: open(f).read().strip() for f in glob.glob(d + "/*-*.rc")}
def why(d, name):
    errs = [l for l in open(f"{d}/{name}.log") if l.startswith('{"event":"error"')]
    return json.loads(errs[-1])["message"] if errs else "no error event"
def mean(xs):
    return sum(xs) / len(xs)
reqs = json.load(open(work + "/requests.json"))["requests"]
reqs_u = json.load(open(work + "/requests-unlimited.json"))["requests"]
vms = [v for v in json.load(open(work + "/list.json")) if v["name"].startswith("c-")]
results = {r["command"]: r["mean"] for r in json.load(open(work + "/fleet.json"))["results"]}
one_h = results["one provision"]
all_h = next(v for k, v in results.items() if k != "one provision")
cp_one, cp_all = lines(work + "/one/cp"), lines(work + "/status/cp")
cp_c, cp_u = lines(work + "/counted/cp"), lines(work + "/unlimited/cp")
def num(xs):
    return [float(x) for x in xs if x != "failed"]
# Every provision that did not end as expected, with its last error (a 429 shows there).
failed = []
for d in ("one", "status", "counted", "unlimited"):
    # The timed batches reuse their names run after run: every.rc holds each run's verdict,
    # the logs the last run's.
    bad_runs = sum(1 for v in lines(f"{work}/{d}/every.rc") if v != "0")
    last = {k: v for k, v in verdicts(f"{work}/{d}").items() if v != "0"}
    failed += [(d, k, v, why(f"{work}/{d}", k)) for k, v in last.items()]
    if bad_runs > len(last):
        failed.append((d, "(earlier run)", f"{bad_runs - len(last)} more", "log overwritten"))
n_failed = sum(int(v.split()[0]) if v.endswith("more") else 1 for _, _, v, _ in failed)
by_429 = [f for f in failed if "429" in f[3] or "ate limit" in f[3]]
too_many = [r for r in reqs if r["status"] == 429]
met_429 = sum(int(x) for d in ("one", "status", "counted") for x in lines(f"{work}/{d}/429s"))
print(f"Cloud: {cloud} (emulated, memory backend, VMs running {boot} s after create, no SSH; "
      f"documented rate limits enforced). Load average (1, 5, 15 min): {load} at the end {load_now}")
print()
print("| Measure | Value | Target |")
print("|:---|---:|:---|")
print(f"| one provision, to its end at the 2 s SSH wait (hyperfine mean) | {one_h:.1f} s | |")
print(f"| {n} at once, all ended (hyperfine mean) | {all_h:.1f} s | |")
if num(cp_one) and num(cp_all):
    r = mean(num(cp_all)) / mean(num(cp_one))
    print(f"| control plane, one: start to \"waiting for SSH\" (mean of {len(cp_one)}) | {mean(num(cp_one)):.1f} s | |")
    print(f"| control plane, {n} at once: start to the last \"waiting for SSH\" (mean of {len(cp_all)}; each: {', '.join(cp_all)}) | {mean(num(cp_all)):.1f} s | |")
    print(f"| {n} at once / one, control plane | {r:.2f}x | <= 2x: {'met' if r <= 2 else 'missed'} |")
print(f"| failed provisions (timed runs + counted + unlimited batch) | {n_failed} | 0: {'met' if n_failed == 0 else 'missed'} |")
print(f"| of them failed by a 429 | {len(by_429)} | 0 |")
print(f"| VMs recorded in the shared home after the counted batch | {len(vms)} of {n}, "
      f"{len({v.get('address') for v in vms})} distinct addresses | {n} |")
print(f"| API calls per VM (counted batch) | {len(reqs) / n:.1f} | |")
print(f"| 429 answers (counted batch, emulator's request log) | {len(too_many)} | no 429 left unabsorbed: "
      f"{'met' if not by_429 else 'missed'} |")
print(f"| 429 answers met by the drivers (timed runs + counted batch, their -v logs) | {met_429} | |")
print(f"| control plane, {n} at once, counted batch (limits on) | {', '.join(cp_c)} s | |")
print(f"| control plane, {n} at once, rate limits off (emulator setting) | {', '.join(cp_u)} s, "
      f"{len(reqs_u) / n:.1f} calls per VM | |")
if num(cp_one) and num(cp_u):
    print(f"| rate limits off / one, control plane | {mean(num(cp_u)) / mean(num(cp_one)):.2f}x | |")
for d, k, v, msg in failed:
    print(f"\nFailed: {d}/{k} ({v}): {msg}")
print()
print("API calls of the counted batch by method and path (ids collapsed):")
print()
print("| Calls | Per VM | 429s | Request |")
print("|---:|---:|---:|:---|")
def shape(r):
    path = r["path"].split("?")[0]
    parts = ["{id}" if p.isdigit() or len(p) > 20 else p for p in path.split("/")]
    return r["method"] + " " + "/".join(parts)
c429 = collections.Counter(shape(r) for r in too_many)
for req, c in collections.Counter(shape(r) for r in reqs).most_common():
    print(f"| {c} | {c / n:.1f} | {c429[req]} | `{req}` |")
PY
  cat "$results"/fleet-memory-summary.md
  exit "$rc"
fi
# Before each run (outside the timing): the previous run's VMs removed, then the emulator reset,
# which also starts a new rate-limit window: each run is what a user who made no other call in
# the last minute sees (DigitalOcean allows 250 requests a minute; a batch of 8 makes about 90,
# and the removals of the previous run's 8 about 40 more, so back-to-back runs would meet the
# limit because of the benchmark's own traffic).
down_all="for i in \$(seq 1 $n); do $g down f-\$i >/dev/null 2>&1 & done; wait"
fresh="curl -fsS -X POST $control/reset -d '{}' >/dev/null"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$work/load"
hyperfine --runs "$runs" -i --export-markdown "$results"/fleet.md --export-json "$work/fleet.json" \
  --prepare "$g down one >/dev/null 2>&1; $fresh" --prepare "$down_all; $fresh" \
  --cleanup "$g down one >/dev/null 2>&1; $down_all" \
  -n "one provision" "$g provision --name one --cloud $cloud --gpus H100:1 --no-k8s 2>/dev/null" \
  -n "$n provisions at once, one home" "$self --at-once $n f $work/status"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$work/load"
cat "$results"/fleet.md

# The counted batch: the request log of this batch alone, from a fresh rate-limit window.
eval "$fresh"
rc=0
bash "$0" --at-once "$n" c "$work/counted" || rc=$?
curl -fsS "$control/requests?cloud=$cloud" >"$work/requests.json"
"$g" list --output json >"$work/list.json"
downs=()
for i in $(seq 1 "$n"); do "$g" down "c-$i" >/dev/null 2>&1 & downs+=($!); done
wait "${downs[@]}"
failed_timed=$(grep -cv '^0$' "$work/status/every.rc" || true)
retried_timed=$(paste -sd+ "$work/status/429s" | bc)
python3 - "$work/requests.json" "$work/list.json" "$work/counted" "$n" "$cloud" \
  "$(cut -d' ' -f1-3 /proc/loadavg)" "$(tr '\n' ';' <"$work/load")" "$failed_timed" \
  "$work/fleet.json" "$retried_timed" >"$results"/fleet-summary.md <<'PY'
import collections, glob, json, os, sys
reqs = json.load(open(sys.argv[1]))["requests"]
vms = [v for v in json.load(open(sys.argv[2])) if v["name"].startswith("c-")]
statuses = {os.path.basename(f): open(f).read().strip() for f in glob.glob(sys.argv[3] + "/c-*.rc")}
n, cloud, load_now, load, failed_timed = int(sys.argv[4]), sys.argv[5], sys.argv[6], sys.argv[7], int(sys.argv[8])
results = {r["command"]: r["mean"] for r in json.load(open(sys.argv[9]))["results"]}
one = results["one provision"]
all_n = next(v for k, v in results.items() if k != "one provision")
failed = [k for k, v in statuses.items() if v != "0"]
too_many = [r for r in reqs if r["status"] == 429]
print(f"Cloud: {cloud} (emulated, docker backend, rate limits enforced). Load average: {load}")
print()
print("| Measure | Value | Target |")
print("|:---|---:|:---|")
print(f"| one provision (mean) | {one:.1f} s | |")
print(f"| {n} at once, all done (mean) | {all_n:.1f} s | |")
print(f"| {n} at once / one | {all_n / one:.2f}x | <= 2x: {'met' if all_n / one <= 2 else 'missed'} |")
print(f"| failed provisions (timed runs + counted batch) | {failed_timed + len(failed)} | 0: "
      f"{'met' if failed_timed + len(failed) == 0 else 'missed'} |")
print(f"| VMs recorded in the shared home after the counted batch | {len(vms)} of {n}, "
      f"{len({v.get('address') for v in vms})} distinct addresses | {n} |")
print(f"| API calls per VM (counted batch) | {len(reqs) / n:.1f} | |")
print(f"| 429 answers (counted batch, emulator's request log), all absorbed by the driver when no "
      f"provision failed | {len(too_many)} | no 429 left unabsorbed |")
print(f"| 429 answers met by the drivers in the timed batches (their -v logs) | {sys.argv[10]} | |")
phases = collections.defaultdict(list)
for v in vms:
    for k, sec in (v.get("phase_seconds") or {}).items():
        phases[k].append(sec)
if phases:
    print()
    print("Phase times of the counted batch (the VM records' phase_seconds), min / mean / max:")
    print()
    print("| Phase | Min [s] | Mean [s] | Max [s] |")
    print("|:---|---:|---:|---:|")
    for k, secs in phases.items():
        print(f"| {k} | {min(secs):.1f} | {sum(secs) / len(secs):.1f} | {max(secs):.1f} |")
print()
print("API calls of the counted batch by method and path (ids collapsed):")
print()
print("| Calls | Per VM | Request |")
print("|---:|---:|:---|")
def shape(r):
    path = r["path"].split("?")[0]
    parts = ["{id}" if p.isdigit() or len(p) > 20 else p for p in path.split("/")]
    return r["method"] + " " + "/".join(parts)
for req, c in collections.Counter(shape(r) for r in reqs).most_common():
    print(f"| {c} | {c / n:.1f} | `{req}` |")
PY
cat "$results"/fleet-summary.md
exit "$rc"
