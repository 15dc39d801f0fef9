#!/usr/bin/env bash
# Time to a validated N-node cluster against one node (issue 33: N = 4 within 1.3x of one), side
# by side in one run: BENCH_RUNS rounds, each a 1-node then an N-node cluster at each setting,
# on the DigitalOcean emulator with real test VMs (docker backend, boot route, direct access;
# the CUDA check off on both). Two emulators serve the two settings, as bench/cluster.sh's:
#
#   zero       no injected delay: the VMs boot as fast as their containers start, so four
#              boots at once compete for this machine's cores (CPU bound here, not on a cloud)
#   realistic  SSH refused for BOOT s after the VM runs while cloud-init runs from t=0
#              (--ssh-delay-seconds), every API call held LATENCY ms (--api-latency-ms), the
#              k3s simulator's first start spends INSTALL s installing and its API listens API s
#              after that (fault k3s_faults, every create): the waits a cloud VM spends on its own
#              host, so the nodes' waits overlap as they do on a cloud
#
# Each provision starts from nothing; `gpuprov down` after it, outside the timing. The ratio is
# of the medians, so one pair slowed by the machine's other load does not decide it.
# Writes bench/results/multi-node.md; BENCHMARKS.md quotes it.
#
#   GPUPROV_BUILD_DIR  the build to measure (default build)
#   BENCH_NODES        the cluster's size (default 4)
#   BENCH_RUNS         rounds (default 3)
#   BENCH_RESULTS_DIR  where the table goes (default bench/results)
#   BENCH_SETTINGS     which settings, space-separated (default "zero realistic")
#   BENCH_BOOT_SECONDS, BENCH_INSTALL_SECONDS, BENCH_API_START_SECONDS, BENCH_API_LATENCY_MS
#                      the realistic setting (default 45, 30, 5, 50: bench/cluster.sh's)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${GPUPROV_BUILD_DIR:-build}
nodes=${BENCH_NODES:-4}
runs=${BENCH_RUNS:-3}
read -r -a settings <<<"${BENCH_SETTINGS:-zero realistic}"
boot=${BENCH_BOOT_SECONDS:-45} install=${BENCH_INSTALL_SECONDS:-30}
api=${BENCH_API_START_SECONDS:-5} latency=${BENCH_API_LATENCY_MS:-50}
GPUPROV="$BUILD_DIR/bin/gpuprov"
work=$(mktemp -d)
results=${BENCH_RESULTS_DIR:-bench/results}
export GPUPROV_HOME="$work/home" NO_COLOR=1
export DIGITALOCEAN_TOKEN="dop_v1_bench_token"
mkdir -p "$GPUPROV_HOME" "$results"
printf '[defaults.timeouts]\nssh_wait_seconds = 300\nboot_install_wait_seconds = 300\napi_wait_seconds = 300\n' \
  >"$GPUPROV_HOME/config.toml"
# shellcheck source=bench/emulator.bash
source "bench/emulator.bash"
trap cleanup EXIT

for s in "${settings[@]}"; do
  case $s in
    zero) start_emulator zero ;;
    realistic)
      start_emulator realistic --ssh-delay-seconds "$boot" --api-latency-ms "$latency"
      slow_k3s_start realistic "$install" "$api"
      ;;
    *) echo "BENCH_SETTINGS: zero or realistic, not $s" >&2; exit 2 ;;
  esac
done

# one SETTING N: seconds of one provision of an N-node cluster (exit status must be 0).
one() {
  local setting=$1 n=$2 start end name="bench-$1-n$2"
  start=$(date +%s.%N)
  GPUPROV_DIGITALOCEAN_ENDPOINT=$(endpoint "$setting" digitalocean) \
    "$GPUPROV" provision --name "$name" --cloud digitalocean --gpus H100:1 --nodes "$n" \
    --no-smoke-test >"$work/provision-$setting-$n.log" 2>&1 || { cat "$work/provision-$setting-$n.log" >&2; return 1; }
  end=$(date +%s.%N)
  GPUPROV_DIGITALOCEAN_ENDPOINT=$(endpoint "$setting" digitalocean) "$GPUPROV" down "$name" --yes >/dev/null 2>&1
  echo "$end - $start" | bc
}
# median VALUES...: the middle value (the mean of the two middle ones for an even count).
median() {
  printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
declare -A ones ns
rows=() verdicts=""
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for i in $(seq 1 "$runs"); do
  for s in "${settings[@]}"; do
    t1=$(one "$s" 1)
    tn=$(one "$s" "$nodes")
    ones[$s]+=" $t1"
    ns[$s]+=" $tn"
    rows+=("$(printf '| %s | %s | %.1f | %.1f | %.2f |' "$s" "$i" "$t1" "$tn" "$(echo "scale=2; $tn / $t1" | bc)")")
  done
done
{
  echo "| Setting | Round | 1 node [s] | $nodes nodes [s] | ratio |"
  echo "|:---|:---|---:|---:|---:|"
  printf '%s\n' "${rows[@]}"
  for s in "${settings[@]}"; do
    # shellcheck disable=SC2086  # the lists are space-separated numbers
    m1=$(median ${ones[$s]})
    # shellcheck disable=SC2086
    mn=$(median ${ns[$s]})
    ratio=$(echo "scale=2; $mn / $m1" | bc)
    printf '| %s | median | %.1f | %.1f | %.2f |\n' "$s" "$m1" "$mn" "$ratio"
    verdicts+="${verdicts:+; }$s: $(echo "$ratio <= 1.3" | bc | sed 's/1/met/;s/0/not met/')"
  done
  echo
  echo "Target: $nodes nodes within 1.3x of one node (medians of $runs rounds): $verdicts."
  [[ " ${settings[*]} " != *" realistic "* ]] ||
    echo "Realistic setting: ${boot} s boot, ${install} s k3s install, ${api} s API start-up, ${latency} ms per API call."
  echo "Load average: $load_before at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end, on $(nproc) cores."
} >"$results/multi-node.md"
cat "$results/multi-node.md"
