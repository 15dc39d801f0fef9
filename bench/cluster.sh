#!/usr/bin/env bash
# Time to a validated cluster on the cloud emulator with real test VMs (docker backend), at zero
# injected delay and at a realistic setting, side by side in one hyperfine run. Both routes run
# on the same cloud (DigitalOcean, direct access): the boot route (the installer rides in the
# user data and runs under cloud-init while gpuprov waits for SSH) and the SSH route
# (`--install-route ssh`: the installer is pushed after SSH answers). A plain VM (--no-k8s) at
# zero is the baseline: the test VM's own boot. Two emulators serve the two settings:
#
#   zero       no injected delay (the k3s simulator still needs 2 x its DELAY of 2 s after it
#              starts before CoreDNS is ready: counted as its API start-up)
#   realistic  SSH refused for BOOT s after the VM runs while cloud-init runs from t=0
#              (--ssh-delay-seconds), every API call held LATENCY ms (--api-latency-ms), the
#              k3s simulator's first start spends INSTALL s installing and its API listens API s
#              after that (fault k3s_faults, every create)
#
# Each run is one `gpuprov provision`; the VM of the previous run is removed before it
# (--prepare), outside the timing. Then one provision per route at the realistic setting is
# counted (not timed): SSH connections ("Accepted publickey") and round trips (exec and
# subsystem channel requests) from the VM's own sshd log in journald (sshd switched to LogLevel
# DEBUG1 through `docker exec` while the SSH delay still refuses connections), and peak RSS of
# `gpuprov provision` (/usr/bin/time -f %M). Writes bench/results/cluster.md (hyperfine),
# cluster-summary.md (each number next to its target); BENCHMARKS.md quotes them.
#
#   GPUPROV_BUILD_DIR  the build to measure (default build)
#   BENCH_RUNS         runs per command (default 2)
#   BENCH_RESULTS_DIR  where the tables go (default bench/results; with BENCH_QUICK a temp dir)
#   BENCH_QUICK=1      a smoke: 4 s boot, 3 s install, 2 s API start-up, 10 ms per call, one
#                      run, the zero rows left out (the numbers mean little; the script works)
#   BENCH_BOOT_SECONDS, BENCH_INSTALL_SECONDS, BENCH_API_START_SECONDS, BENCH_API_LATENCY_MS
#                      the realistic setting (default 45, 30, 5, 50)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${GPUPROV_BUILD_DIR:-build}
quick=${BENCH_QUICK:-0}
if [ "$quick" = 1 ]; then
  boot=4 install=3 api=2 latency=10 runs=1
else
  boot=${BENCH_BOOT_SECONDS:-45} install=${BENCH_INSTALL_SECONDS:-30}
  api=${BENCH_API_START_SECONDS:-5} latency=${BENCH_API_LATENCY_MS:-50} runs=${BENCH_RUNS:-2}
fi
sim_ready=4  # the k3s simulator's CoreDNS is ready 2 x DELAY (2 s) after it starts
cmake --build "$BUILD_DIR" --target gpuprov gpuprov-remote gpuprov-emulator \
  gpuprov-driver-digitalocean >/dev/null
GPUPROV="$BUILD_DIR/bin/gpuprov"
work=$(mktemp -d)
# BENCH_QUICK writes its (meaningless) tables beside the run, not over the quoted ones.
results=${BENCH_RESULTS_DIR:-bench/results}
[ "${BENCH_QUICK:-0}" != 1 ] || results=${BENCH_RESULTS_DIR:-$work/results}
export GPUPROV_HOME="$work/home" NO_COLOR=1
export DIGITALOCEAN_TOKEN="dop_v1_bench_token"
mkdir -p "$GPUPROV_HOME" "$results"
# shellcheck source=bench/emulator.bash
source "bench/emulator.bash"
trap cleanup EXIT

start_emulator real --ssh-delay-seconds "$boot" --api-latency-ms "$latency"
real_do=$(endpoint real digitalocean)
real_control=$(endpoint real control)
slow_k3s_start real "$install" "$api"
g=$GPUPROV
real="GPUPROV_DIGITALOCEAN_ENDPOINT=$real_do"
names=() commands=()
if [ "$quick" != 1 ]; then
  start_emulator zero
  zero="GPUPROV_DIGITALOCEAN_ENDPOINT=$(endpoint zero digitalocean)"
  names+=("zero: plain VM, --no-k8s" "zero: k3s, boot route" "zero: k3s, SSH route")
  commands+=("$zero $g provision --name z-plain --cloud digitalocean --gpus H100:1 --no-k8s"
             "$zero $g provision --name z-boot --cloud digitalocean --gpus H100:1"
             "$zero $g provision --name z-ssh --cloud digitalocean --gpus H100:1 --install-route ssh")
fi
names+=("realistic: k3s, boot route" "realistic: k3s, SSH route")
commands+=("$real $g provision --name r-boot --cloud digitalocean --gpus H100:1"
           "$real $g provision --name r-ssh --cloud digitalocean --gpus H100:1 --install-route ssh")
args=()
for i in "${!commands[@]}"; do
  vm=$(awk '{for (i = 1; i < NF; i++) if ($i == "--name") print $(i + 1)}' <<<"${commands[$i]}")
  env_of=${commands[$i]%% *}
  args+=(--prepare "$env_of $g down $vm >/dev/null 2>&1")
  args+=(-n "${names[$i]}" "${commands[$i]} 2>/dev/null")
done
cleanup_cmd=""
for i in "${!commands[@]}"; do
  vm=$(awk '{for (i = 1; i < NF; i++) if ($i == "--name") print $(i + 1)}' <<<"${commands[$i]}")
  cleanup_cmd+="${commands[$i]%% *} $g down $vm >/dev/null 2>&1; "
done
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$work/load"
hyperfine --runs "$runs" --export-markdown "$results"/cluster.md \
  --export-json "$work/cluster.json" --cleanup "$cleanup_cmd" "${args[@]}"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$work/load"
cat "$results"/cluster.md

# count ROUTE NAME FLAGS...: one provision at the realistic setting; prints
# "ROUTE CONNECTIONS ROUND_TRIPS RSS_KB CLIENT_ROUND_TRIPS PROBE_ROUND_TRIPS": the first two from
# the VM's sshd log, the last two from gpuprov -v ("node round trip N: PURPOSE").
count() {
  local route=$1 vm=$2 id="" ip="" _ log
  shift 2
  env "$real" /usr/bin/time -f %M -o "$work/$vm.rss" \
    "$g" -v provision --name "$vm" --cloud digitalocean --gpus H100:1 "$@" \
    >"$work/$vm.out" 2>&1 &
  local prov=$!
  # The container appears with the create (found by its address label); sshd's LogLevel is
  # raised while the SSH delay still refuses connections, so every connection is logged.
  for _ in $(seq 1 200); do
    ip=$(curl -fsS "$real_control/instances?cloud=digitalocean" | python3 -c "
import json, sys
for i in json.load(sys.stdin).get('instances', []):
    if i.get('name') == '$vm' and i.get('public_ip'):
        print(i['public_ip'])" 2>/dev/null || true)
    [ -n "$ip" ] && id=$(docker ps -q --filter "label=io.gpuprov.emulator.address=$ip")
    [ -n "$id" ] && break
    sleep 0.25
  done
  [ -n "$id" ] || { echo "no container for $vm" >&2; return 1; }
  for _ in $(seq 1 40); do
    docker exec "$id" sh -c 'echo "LogLevel DEBUG1" >/etc/ssh/sshd_config.d/gpuprov-bench.conf &&
      { systemctl reload ssh 2>/dev/null || true; }' 2>/dev/null && break
    sleep 0.25
  done
  wait "$prov" || { echo "provision $vm failed:" >&2; tail -20 "$work/$vm.out" >&2; return 1; }
  log=$(docker exec "$id" journalctl -u ssh --no-pager -o cat 2>/dev/null || true)
  printf '%s %s %s %s %s %s\n' "$route" \
    "$(grep -c 'Accepted publickey' <<<"$log" || true)" \
    "$(grep -cE 'req (exec|subsystem)' <<<"$log" || true)" \
    "$(cat "$work/$vm.rss")" \
    "$(grep -c 'node round trip [0-9]*: ' "$work/$vm.out" || true)" \
    "$(grep -c 'node round trip [0-9]*: probe$' "$work/$vm.out" || true)"
  env "$real" "$g" down "$vm" >/dev/null 2>&1 || true
}
count boot c-boot >"$work/count-boot" &
cb=$!
count ssh c-ssh --install-route ssh >"$work/count-ssh" &
cs=$!
wait "$cb" "$cs"
cat "$work/count-boot" "$work/count-ssh"

python3 - "$work/cluster.json" "$work/count-boot" "$work/count-ssh" "$work/load" \
  "$boot" "$install" "$api" "$latency" "$sim_ready" >"$results"/cluster-summary.md <<'PY'
import json, sys
results = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
counts = [open(f).read().split() for f in sys.argv[2:4]]
load = open(sys.argv[4]).read().strip().replace("\n", "; ")
boot, install, api, latency, sim_ready = (float(x) for x in sys.argv[5:10])
def mean(name): return results[name]["mean"] if name in results else None
def injected(setting, route):
    b, i, a = (0, 0, 0) if setting == "zero" else (boot, install, api)
    a = max(a, sim_ready)
    # The boot route overlaps the install (cloud-init from t=0) with the wait for SSH.
    return max(b, i + a) if route == "boot" else b + i + a
print(f"Realistic setting: {boot:g} s boot (SSH delay), {install:g} s k3s install, "
      f"{api:g} s API start-up, {latency:g} ms per API call. Load average (1, 5, 15 min): {load}.")
print()
print("| Setting | Route | Mean [s] | Injected on the critical path [s] | Overhead [s] | Target |")
print("|:---|:---|---:|---:|---:|:---|")
for setting in ("zero", "realistic"):
    for route, label in (("boot", "boot route"), ("ssh", "SSH route")):
        m = mean(f"{setting}: k3s, {label}")
        if m is None: continue
        inj = injected(setting, route)
        over = m - inj
        print(f"| {setting} | {label} | {m:.1f} | {inj:g} | {over:.1f} | <= 2 s: "
              f"{'met' if over <= 2 else 'missed'} |")
print()
print("| Setting | Boot route / SSH route | Target |")
print("|:---|---:|:---|")
for setting in ("zero", "realistic"):
    b, s = mean(f"{setting}: k3s, boot route"), mean(f"{setting}: k3s, SSH route")
    if b is None or s is None: continue
    print(f"| {setting} | {b / s:.2f}x | <= 0.6x: {'met' if b / s <= 0.6 else 'missed'} |")
print()
print("One provision per route at the realistic setting, counted on the VM's sshd (journald, "
      "LogLevel DEBUG1):")
print()
print("| Route | SSH connections (sshd) | Round trips (sshd: exec/subsystem requests) | "
      "Round trips (gpuprov -v) | of which probes | Peak RSS [MB] | Targets |")
print("|:---|---:|---:|---:|---:|---:|:---|")
for route, conns, trips, rss, client, probes in counts:
    verdict = lambda ok: "met" if ok else "missed"
    # Each round trip gpuprov logs ("node round trip N: probe") is one exec request on the
    # node when the two totals agree: then every probe is one round trip.
    print(f"| {route} | {conns} | {trips} | {client} | {probes} | {float(rss) / 1024:.1f} | "
          f"connections <= 3: {verdict(int(conns) <= 3)}; probe = 1 round trip: "
          f"{verdict(trips == client)}; RSS <= 25 MB: {verdict(float(rss) / 1024 <= 25)} |")
PY
cat "$results"/cluster-summary.md
