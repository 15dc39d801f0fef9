#!/usr/bin/env bash
# Time to a ready VM and to a validated cluster, side by side in one hyperfine run, on the cloud
# emulator with real test VMs (docker backend): a plain VM (--no-k8s) as the baseline, the boot
# route (DigitalOcean: the installer runs under cloud-init while gpuprov waits for SSH; direct
# access) and the SSH route (Prime Intellect: installer pushed after SSH; tunnel access). Each run
# is one `gpuprov provision`; the VM of the previous run is removed before it (--prepare), outside
# the timing. Writes bench/results/cluster.md; BENCHMARKS.md quotes it.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${GPUPROV_BUILD_DIR:-build}
cmake --build "$BUILD_DIR" --target gpuprov gpuprov-emulator gpuprov-driver-digitalocean \
  gpuprov-driver-primeintellect >/dev/null
GPUPROV="$BUILD_DIR/bin/gpuprov"
work=$(mktemp -d)
export GPUPROV_HOME="$work/home" NO_COLOR=1
export DIGITALOCEAN_TOKEN="dop_v1_bench_token" PRIME_API_KEY="pit_bench_key"
mkdir -p "$GPUPROV_HOME"
"$BUILD_DIR/bin/gpuprov-emulator" --backend docker --clouds digitalocean,primeintellect \
  >"$work/emu.out" 2>"$work/emu.err" &
emu=$!
trap 'kill $emu 2>/dev/null; wait $emu 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 1 100); do grep -q '^control ' "$work/emu.out" && break; sleep 0.2; done
GPUPROV_DIGITALOCEAN_ENDPOINT=$(awk '$1=="digitalocean"{print $2}' "$work/emu.out")
GPUPROV_PRIMEINTELLECT_ENDPOINT=$(awk '$1=="primeintellect"{print $2}' "$work/emu.out")
export GPUPROV_DIGITALOCEAN_ENDPOINT GPUPROV_PRIMEINTELLECT_ENDPOINT
mkdir -p bench/results
g=$GPUPROV
# One --prepare per command, in order: it removes that command's VM of the previous run.
hyperfine --runs "${BENCH_RUNS:-5}" --export-markdown bench/results/cluster.md \
  --prepare "$g down plain >/dev/null 2>&1" --prepare "$g down boot >/dev/null 2>&1" \
  --prepare "$g down ssh >/dev/null 2>&1" \
  --cleanup "$g down plain >/dev/null 2>&1; $g down boot >/dev/null 2>&1; $g down ssh >/dev/null 2>&1" \
  -n "plain VM, --no-k8s (digitalocean)" "$g provision --name plain --cloud digitalocean --gpus H100:1 --no-k8s 2>/dev/null" \
  -n "k3s, boot route, direct (digitalocean)" "$g provision --name boot --cloud digitalocean --gpus H100:1 2>/dev/null" \
  -n "k3s, SSH route, tunnel (primeintellect)" "$g provision --name ssh --cloud primeintellect --gpus H100:1 2>/dev/null"
cat bench/results/cluster.md
