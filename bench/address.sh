#!/usr/bin/env bash
# Certificate re-runs per cloud: one `gpuprov -v provision` (boot route, direct access) on each
# cloud whose VMs run a boot script and are reached directly, against the cloud emulator with
# real test VMs (docker backend), whose VMs learn their public address as that cloud's do
# (plugins/<cloud>/REFERENCE.md, section 6: a metadata service, the interface, or neither). A
# VM that learns it puts it in the API certificate at boot (route boot); one that does not makes
# gpuprov re-run the installer over SSH with --public-ip (route ssh, one more round trip and a
# k3s restart). Writes bench/results/address.md: per cloud the driver's node_address, the route
# the record ends with, the re-runs gpuprov logged ("node round trip N: re-run installer with
# the public IP"), the reason and the provision's wall time. BENCHMARKS.md quotes it.
#
#   GPUPROV_BUILD_DIR  the build to measure (default build)
#   BENCH_RESULTS_DIR  where the table goes (default bench/results; with BENCH_QUICK a temp dir)
#   BENCH_CLOUDS       the clouds (default: aws gcp digitalocean hyperstack lambda nebius)
#   BENCH_QUICK=1      a smoke: hyperstack and lambda only (one of each outcome)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${GPUPROV_BUILD_DIR:-build}
quick=${BENCH_QUICK:-0}
default_clouds="aws gcp digitalocean hyperstack lambda nebius"
[ "$quick" != 1 ] || default_clouds="hyperstack lambda"
clouds=${BENCH_CLOUDS:-$default_clouds}
targets=(gpuprov gpuprov-remote gpuprov-emulator)
for c in $clouds; do targets+=("gpuprov-driver-$c"); done
cmake --build "$BUILD_DIR" --target "${targets[@]}" >/dev/null
g="$BUILD_DIR/bin/gpuprov"
work=$(mktemp -d)
results=${BENCH_RESULTS_DIR:-bench/results}
[ "$quick" != 1 ] || results=${BENCH_RESULTS_DIR:-$work/results}
mkdir -p "$results"
# Test credentials only (the emulator's); HOME is the run's own, so no cloud CLI file is read.
export GPUPROV_HOME="$work/home" HOME="$work/userhome" NO_COLOR=1
export DIGITALOCEAN_TOKEN="dop_v1_bench_address_token"
export AWS_ACCESS_KEY_ID="AKIABENCHADDRESS0001" AWS_SECRET_ACCESS_KEY="bench/address/secret" AWS_REGION=us-east-1
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_DEFAULT_REGION NEBIUS_IAM_TOKEN
export LAMBDA_API_KEY="secret_bench_address_lambda" HYPERSTACK_API_KEY="hs-bench-address"
export GOOGLE_APPLICATION_CREDENTIALS="$work/gcp-key.json"
export NEBIUS_CREDENTIALS_FILE="$work/nebius-credentials.json" NEBIUS_PROJECT_ID=project-e00test
mkdir -p "$GPUPROV_HOME" "$HOME"
printf '[defaults.timeouts]\nssh_wait_seconds = 180\nboot_install_wait_seconds = 180\napi_wait_seconds = 180\n' \
  >"$GPUPROV_HOME/config.toml"
emu=""
cleanup() {
  if [ -n "$emu" ]; then kill "$emu" 2>/dev/null || true; wait "$emu" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

"$BUILD_DIR/bin/gpuprov-emulator" --backend docker --clouds "${clouds// /,}" \
  >"$work/emu.out" 2>"$work/emu.err" &
emu=$!
for _ in $(seq 1 100); do grep -q '^control ' "$work/emu.out" && break; sleep 0.2; done
grep -q '^control ' "$work/emu.out" || { cat "$work/emu.err" >&2; exit 1; }
while read -r cloud url; do
  [ "$cloud" = control ] || export "GPUPROV_${cloud^^}_ENDPOINT=$url"
done <"$work/emu.out"

# gpus CLOUD: a GPU the cloud's emulator offers.
gpus() {
  case $1 in
    aws | gcp) echo L4:1 ;;
    hyperstack) echo A100:1 ;;
    lambda) echo A10:1 ;;
    *) echo H100:1 ;;
  esac
}

# field NAME KEY: one field of the VM's record (`gpuprov list --output json`), "" when absent.
field() {
  "$g" list --output json | python3 -c "
import json, sys
vm = [v for v in json.load(sys.stdin) if v['name'] == sys.argv[1]][0]
print(vm.get(sys.argv[2], ''))" "$1" "$2"
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$work/load"
rows=()
for cloud in $clouds; do
  vm="addr-$cloud"
  start=$(date +%s.%N)
  if ! "$g" -v provision --name "$vm" --cloud "$cloud" --gpus "$(gpus "$cloud")" >"$work/$vm.out" 2>&1; then
    echo "provision on $cloud failed:" >&2
    tail -20 "$work/$vm.out" >&2
    exit 1
  fi
  seconds=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$start" "$(date +%s.%N)")
  source=$("$g" drivers "$cloud" --output json | python3 -c "import json,sys; print(json.load(sys.stdin).get('node_address') or 'unknown')")
  reruns=$(grep -c 'node round trip [0-9]*: re-run installer with the public IP' "$work/$vm.out" || true)
  rows+=("| $cloud | \`$source\` | $(field "$vm" route) | $reruns | $(field "$vm" route_reason) | $seconds |")
  echo "${rows[-1]}"
  "$g" down "$vm" >/dev/null 2>&1 || true
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$work/load"
{
  echo "Load average (1, 5, 15 min): $(sed -n 's/^load \(before\|after\): \(.*\)/\2 \1/p' "$work/load" |
    paste -sd, - | sed 's/,/, /')."
  echo
  echo "| Cloud | node_address | Route | Certificate re-runs | Reason | Provision [s] |"
  echo "|:---|:---|:---|---:|:---|---:|"
  printf '%s\n' "${rows[@]}"
} >"$results/address.md"
cat "$results/address.md"
