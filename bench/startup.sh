#!/usr/bin/env bash
# CLI start-up benchmark: `gpuprov --help`, `gpuprov drivers` with ten drivers present, and a
# command that needs one driver, measured side by side in one hyperfine run with reference CLIs
# found on the machine. Writes bench/results/startup.md; BENCHMARKS.md quotes it.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${GPUPROV_BUILD_DIR:-build}
cmake --build "$BUILD_DIR" --target gpuprov bench_drivers >/dev/null
GPUPROV="$BUILD_DIR/bin/gpuprov"
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
export GPUPROV_HOME="$home" NO_COLOR=1
drivers="$BUILD_DIR/bench/drivers"
mkdir -p bench/results
refs=()
command -v git >/dev/null && refs+=("git --version")
command -v kubectl >/dev/null && refs+=("kubectl version --client")
command -v docker >/dev/null && refs+=("docker --version")
hyperfine --warmup 5 --min-runs 50 -N \
  --export-markdown bench/results/startup.md \
  "$GPUPROV --help" \
  "$GPUPROV --driver-path $drivers drivers" \
  "$GPUPROV --driver-path $drivers list --no-refresh" \
  "${refs[@]}"
cat bench/results/startup.md

# The same with the driver list cache removed before every run: every driver file is loaded.
hyperfine --warmup 3 --min-runs 30 -N --prepare "rm -rf $home/cache" \
  --export-markdown bench/results/startup-cold.md \
  "$GPUPROV --help" \
  "$GPUPROV --driver-path $drivers drivers"
cat bench/results/startup-cold.md
