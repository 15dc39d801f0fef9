#!/usr/bin/env bash
# Asking many clouds at once (issue 34), side by side in one hyperfine run, against the cloud
# emulator's memory backend with every API call held 50 ms (the emulator's latency knob, as a
# distant real API answers):
#
# - `gpuprov offers --gpus H100:1 --refresh`: every emulated cloud asked now (cold); target
#   under 1.5 s;
# - `gpuprov offers --gpus H100:1`: the same answered from the cache written by the cold runs;
#   target under 50 ms;
# - `gpuprov list`: 10 VMs on each of the ten clouds (one list call per cloud, at once); target
#   under 1 s;
# - with BENCH_BASELINE (another gpuprov, e.g. main's build/bin/gpuprov): its `list`, which asked
#   the clouds one after the other.
#
# The VMs are made first (not timed) by `provision --no-k8s` on each cloud; the memory backend's
# VMs run no SSH server, so each provision ends at a short SSH wait with its VM running and its
# record written, which is all `list` needs. Writes bench/results/offers.md (BENCH_PAUSE=0:
# bench/results/offers-back-to-back.md is that run's table); BENCHMARKS.md quotes them.
#
#   GPUPROV_BUILD_DIR  the build to measure (default build)
#   BENCH_RUNS         runs per command (default 10)
#   BENCH_VMS          VMs per cloud (default 10)
#   BENCH_PAUSE        seconds slept before each timed run, outside the timing (default 1.1):
#                      Lambda's documented pacing (about one request a second, kept by its
#                      driver across every gpuprov process of the user, plugins/lambda/README.md)
#                      makes a run that starts right after another wait out the previous run's
#                      last call; 0 measures runs back to back
#   BENCH_RESULTS      the table's file (default bench/results/offers.md)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${GPUPROV_BUILD_DIR:-build}
GPUPROV="$(pwd)/$BUILD_DIR/bin/gpuprov"
runs=${BENCH_RUNS:-10}
per_cloud=${BENCH_VMS:-10}
pause=${BENCH_PAUSE:-1.1}
results_file=${BENCH_RESULTS:-bench/results/offers.md}
clouds=(aws gcp hyperstack lambda digitalocean nebius verda massedcompute primeintellect)
targets=(gpuprov gpuprov-remote gpuprov-emulator)
for c in "${clouds[@]}"; do targets+=("gpuprov-driver-$c"); done
cmake --build "$BUILD_DIR" --target "${targets[@]}" >/dev/null
work=$(mktemp -d)
export GPUPROV_HOME="$work/home" HOME="$work/userhome" NO_COLOR=1
mkdir -p "$GPUPROV_HOME" "$HOME" "$(dirname "$results_file")"
# Test credentials for every emulated cloud (tests/e2e/helpers.bash does the same).
export DIGITALOCEAN_TOKEN=dop_v1_bench_token AWS_ACCESS_KEY_ID=AKIABENCHTESTKEY01
export AWS_SECRET_ACCESS_KEY=bench/secret+access+key AWS_REGION=us-east-1
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_DEFAULT_REGION MASSED_COMPUTE_API_TOKEN NEBIUS_IAM_TOKEN
export LAMBDA_API_KEY=secret_bench_lambda HYPERSTACK_API_KEY=bench-hyperstack-key
export VERDA_CLIENT_ID=gpuprov-bench VERDA_CLIENT_SECRET=secret_bench_verda
export MASSED_API_KEY=mc_bench_secret_api_key PRIME_API_KEY=pit_bench_key
export NEBIUS_CREDENTIALS_FILE="$work/nebius-credentials.json" NEBIUS_PROJECT_ID=project-e00test
export GOOGLE_APPLICATION_CREDENTIALS="$work/gcp-key.json"
printf '%s\n' '[defaults.timeouts]' 'ssh_wait_seconds = 1' >"$GPUPROV_HOME/config.toml"
"$BUILD_DIR/bin/gpuprov-emulator" --backend memory --boot-seconds 1 >"$work/emu.out" 2>"$work/emu.err" &
emu=$!
trap 'kill $emu 2>/dev/null; wait $emu 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 1 100); do grep -q '^control ' "$work/emu.out" && break; sleep 0.2; done
while read -r cloud url; do
  if [ "$cloud" = control ]; then control=$url; else export "GPUPROV_${cloud^^}_ENDPOINT=$url"; fi
done <"$work/emu.out"
[ -n "${control:-}" ] || { echo "emulator did not start: $(cat "$work/emu.err")" >&2; exit 1; }
curl -fsS -X POST "$control/settings" -d '{"cloud":"*","enforce_rate_limits":false}' >/dev/null
# Massed Compute's inventory holds a few of each product (tests/emulators/README.md): room for all.
curl -fsS -X POST "$control/settings" -d '{"cloud":"massedcompute","capacity":{"*":100}}' >/dev/null

# The VMs (not timed): per_cloud provisions on each cloud, one cloud's at once; a provision
# that failed before its record was written (a busy machine) is run again, up to three times.
for c in "${clouds[@]}"; do
  for _ in 1 2 3; do
    pids=()
    for i in $(seq 1 "$per_cloud"); do
      [ ! -e "$GPUPROV_HOME/state/b-$c-$i.json" ] || continue
      "$GPUPROV" provision --name "b-$c-$i" --cloud "$c" --gpus H100:1 --no-k8s \
        >"$work/p-$c-$i.log" 2>&1 &
      pids+=($!)
    done
    [ "${#pids[@]}" -gt 0 ] || break
    wait "${pids[@]}" || true
  done
done
made=$(find "$GPUPROV_HOME/state" -name "*.json" | wc -l)
echo "records: $made of $((per_cloud * ${#clouds[@]}))"
if [ "$made" -ne $((per_cloud * ${#clouds[@]})) ]; then
  for c in "${clouds[@]}"; do
    for i in $(seq 1 "$per_cloud"); do
      [ -e "$GPUPROV_HOME/state/b-$c-$i.json" ] || tail -n 5 "$work/p-$c-$i.log" >&2
    done
  done
  exit 1
fi

curl -fsS -X POST "$control/settings" -d '{"cloud":"*","api_latency_ms":50}' >/dev/null
commands=("$GPUPROV offers --gpus H100:1 --refresh" "$GPUPROV offers --gpus H100:1" "$GPUPROV list")
names=("offers, cold (--refresh)" "offers, cached" "list, 10 VMs on each cloud")
if [ -n "${BENCH_BASELINE:-}" ]; then
  commands+=("$BENCH_BASELINE list")
  names+=("list before (clouds one after the other)")
fi
args=()
[ "$pause" = 0 ] || args+=(--prepare "sleep $pause")
for i in "${!commands[@]}"; do args+=(-n "${names[$i]}" "${commands[$i]}"); done
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
hyperfine -N --warmup 1 --runs "$runs" --export-markdown "$results_file" "${args[@]}"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$GPUPROV" offers --gpus H100:1
