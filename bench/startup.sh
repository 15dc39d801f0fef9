#!/usr/bin/env bash
# CLI start-up benchmark, side by side in one hyperfine run: the commands that must start in
# 5 ms or less (`gpuprov --help`, `list --no-refresh`, `completion bash` and `__complete`, what
# the completion scripts run on every Tab), `gpuprov drivers` with ten drivers present, and
# reference CLIs found on the machine (git, kubectl, aws, docker). Writes bench/results/startup.md
# (means) and startup-median.md (medians, next to the target); BENCHMARKS.md quotes them.
#
#   GPUPROV_BUILD_DIR  the build to measure (default build)
#   BENCH_BASELINE     another gpuprov executable (e.g. main's build/bin/gpuprov) whose --help
#                      is measured in the same run, for a before/after comparison
#   BENCH_RUNS         minimum runs per command (default 50; e.g. 3 for a quick smoke run)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${GPUPROV_BUILD_DIR:-build}
runs=${BENCH_RUNS:-50}
cmake --build "$BUILD_DIR" --target gpuprov gpuprov-remote bench_drivers >/dev/null
GPUPROV="$BUILD_DIR/bin/gpuprov"
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
export GPUPROV_HOME="$home" NO_COLOR=1
drivers="$BUILD_DIR/bench/drivers"
mkdir -p bench/results
commands=(
  "$GPUPROV --help"
  "$GPUPROV --driver-path $drivers list --no-refresh"
  "$GPUPROV completion bash"
  "$GPUPROV --driver-path $drivers __complete -- ''"
  "$GPUPROV --driver-path $drivers drivers"
)
if [ -n "${BENCH_BASELINE:-}" ]; then
  [ -x "$BENCH_BASELINE" ] || { echo "BENCH_BASELINE=$BENCH_BASELINE is not an executable" >&2; exit 2; }
  commands+=("$BENCH_BASELINE --help")
fi
command -v git >/dev/null && commands+=("git --version")
command -v kubectl >/dev/null && commands+=("kubectl version --client")
command -v aws >/dev/null && commands+=("aws --version")
command -v docker >/dev/null && commands+=("docker --version")
hyperfine --warmup 5 --min-runs "$runs" -N \
  --export-markdown bench/results/startup.md --export-json "$home/startup.json" \
  "${commands[@]}"
cat bench/results/startup.md
# Medians next to the 5 ms target (a busy machine's outliers move the mean, not the median).
python3 - "$home/startup.json" >bench/results/startup-median.md <<'PY'
import json, sys
targets = ("--help", "list --no-refresh", "completion bash", "__complete")
print("| Command | Median [ms] | Min [ms] | Target |")
print("|:---|---:|---:|:---|")
for r in json.load(open(sys.argv[1]))["results"]:
    own = r["command"].split()[0].endswith("/bin/gpuprov")
    target = "<= 5 ms" if own and any(t in r["command"] for t in targets) else ""
    print(f"| `{r['command']}` | {r['median'] * 1000:.1f} | {r['min'] * 1000:.1f} | {target} |")
PY
cat bench/results/startup-median.md

# The same with the driver list cache removed before every run: every driver file is loaded.
hyperfine --warmup 3 --min-runs "$((runs < 30 ? runs : 30))" -N --prepare "rm -rf $home/cache" \
  --export-markdown bench/results/startup-cold.md \
  "$GPUPROV --help" \
  "$GPUPROV --driver-path $drivers drivers"
cat bench/results/startup-cold.md
