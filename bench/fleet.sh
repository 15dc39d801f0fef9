#!/usr/bin/env bash
# Many VMs at once: N `gpuprov provision --no-k8s` processes started together in one shared
# GPUPROV_HOME (what a user does: different names, one home; the per-VM lock, the key file and
# known_hosts are shared), against one `gpuprov provision` alone, side by side in one hyperfine
# run, on the cloud emulator with real test VMs (docker backend: each VM a container that must
# answer SSH). Then one more batch of N, not timed, with the emulator's request log cleared
# first: API calls per VM and every 429 the emulator answered (documented rate limits are
# enforced). A 429 the driver absorbed (it retried and the provision succeeded) is counted but
# is not an error; a provision that failed is. Writes bench/results/fleet.md (hyperfine) and
# fleet-summary.md; BENCHMARKS.md quotes them.
#
#   GPUPROV_BUILD_DIR  the build to measure (default build)
#   BENCH_FLEET_N      VMs at once (default 8)
#   BENCH_CLOUD        the emulated cloud (default digitalocean)
#   BENCH_RUNS         runs per command (default 2)
#   BENCH_RESULTS_DIR  where the tables go (default bench/results; with BENCH_QUICK a temp dir)
#   BENCH_QUICK=1      a smoke: N = 3, one run
#
# Internal: `fleet.sh --at-once N PREFIX STATUS_DIR` starts N provisions (PREFIX-1..N) and
# waits for all; each one's exit status goes to STATUS_DIR/PREFIX-i.rc (and is appended to
# every.rc), its -v and ndjson output to PREFIX-i.log, the batch's count of 429s to 429s.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${GPUPROV_BUILD_DIR:-build}
GPUPROV="$BUILD_DIR/bin/gpuprov"
cloud=${BENCH_CLOUD:-digitalocean}

if [ "${1:-}" = --at-once ]; then
  n=$2 prefix=$3 dir=$4
  mkdir -p "$dir"
  for i in $(seq 1 "$n"); do
    ( rc=0
      "$GPUPROV" -v provision --name "$prefix-$i" --cloud "$cloud" --gpus H100:1 --no-k8s \
        -o ndjson >"$dir/$prefix-$i.log" 2>&1 || rc=$?
      echo "$rc" >"$dir/$prefix-$i.rc"
      echo "$rc" >>"$dir/every.rc" ) &
  done
  wait
  # The 429s the drivers met (and retried) in this batch, one line per batch.
  cat "$dir/$prefix"-*.log | grep -c -- '-> 429 ' >>"$dir/429s" || true
  if grep -qv '^0$' "$dir/$prefix"-*.rc; then exit 1; fi
  exit 0
fi

if [ "${BENCH_QUICK:-0}" = 1 ]; then
  n=3 runs=1
else
  n=${BENCH_FLEET_N:-8} runs=${BENCH_RUNS:-2}
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
"$BUILD_DIR/bin/gpuprov-emulator" --backend docker --clouds "$cloud" >"$work/emu.out" 2>"$work/emu.err" &
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
