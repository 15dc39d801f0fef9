#!/usr/bin/env bash
# Time to a validated N-node cluster against one node (issue 33: N = 4 within 1.3x of one), side
# by side in one run: BENCH_RUNS pairs, each a 1-node then an N-node cluster, on the
# DigitalOcean emulator with real test VMs (docker backend, boot route, direct access, no
# injected delay; the CUDA check off on both, as it runs on the server alone). Each provision
# starts from nothing; `gpuprov down` after it, outside the timing. The ratio is of the medians,
# so one pair slowed by the machine's other load does not decide it.
# Writes bench/results/multi-node.md; BENCHMARKS.md quotes it.
#
#   GPUPROV_BUILD_DIR  the build to measure (default build)
#   BENCH_NODES        the cluster's size (default 4)
#   BENCH_RUNS         pairs of runs (default 3)
#   BENCH_RESULTS_DIR  where the table goes (default bench/results)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${GPUPROV_BUILD_DIR:-build}
nodes=${BENCH_NODES:-4}
runs=${BENCH_RUNS:-3}
GPUPROV="$BUILD_DIR/bin/gpuprov"
work=$(mktemp -d)
results=${BENCH_RESULTS_DIR:-bench/results}
export GPUPROV_HOME="$work/home" NO_COLOR=1
export DIGITALOCEAN_TOKEN="dop_v1_bench_token"
mkdir -p "$GPUPROV_HOME" "$results"
printf '[defaults.timeouts]\nssh_wait_seconds = 300\nboot_install_wait_seconds = 300\napi_wait_seconds = 300\n' \
  >"$GPUPROV_HOME/config.toml"
emulator_pid=""
cleanup() {
  [ -z "$emulator_pid" ] || kill "$emulator_pid" 2>/dev/null || true
  [ -z "$emulator_pid" ] || wait "$emulator_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
"$BUILD_DIR/bin/gpuprov-emulator" --backend docker --clouds digitalocean >"$work/emu.out" 2>"$work/emu.err" &
emulator_pid=$!
for _ in $(seq 1 100); do grep -q '^control ' "$work/emu.out" && break; sleep 0.2; done
export GPUPROV_DIGITALOCEAN_ENDPOINT
GPUPROV_DIGITALOCEAN_ENDPOINT=$(awk '$1=="digitalocean"{print $2}' "$work/emu.out")

# one N: seconds of one provision of an N-node cluster (exit status must be 0).
one() {
  local n=$1 start end name="bench-n$1"
  start=$(date +%s.%N)
  "$GPUPROV" provision --name "$name" --cloud digitalocean --gpus H100:1 --nodes "$n" \
    --no-smoke-test >"$work/provision-$n.log" 2>&1 || { cat "$work/provision-$n.log" >&2; return 1; }
  end=$(date +%s.%N)
  "$GPUPROV" down "$name" --yes >/dev/null 2>&1
  echo "$end - $start" | bc
}
# median VALUES...: the middle value (the mean of the two middle ones for an even count).
median() {
  printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
ones=() ns=() rows=()
for i in $(seq 1 "$runs"); do
  t1=$(one 1)
  tn=$(one "$nodes")
  ones+=("$t1")
  ns+=("$tn")
  rows+=("$(printf '| %s | %.1f | %.1f | %.2f |' "$i" "$t1" "$tn" "$(echo "scale=2; $tn / $t1" | bc)")")
done
m1=$(median "${ones[@]}")
mn=$(median "${ns[@]}")
ratio=$(echo "scale=2; $mn / $m1" | bc)
{
  echo "| Pair | 1 node [s] | $nodes nodes [s] | ratio |"
  echo "|:---|---:|---:|---:|"
  printf '%s\n' "${rows[@]}"
  printf '| median | %.1f | %.1f | %.2f |\n' "$m1" "$mn" "$ratio"
  echo
  echo "Target: $nodes nodes within 1.3x of one node (medians of $runs pairs): $(echo "$ratio <= 1.3" | bc | sed 's/1/met/;s/0/not met/')."
  echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores."
} >"$results/multi-node.md"
cat "$results/multi-node.md"
