#!/usr/bin/env bash
# Runs the libFuzzer targets of tests/fuzz/, built with clang (ASan + UBSan) in the sanitizer
# build directory ${GPUPROV_FUZZ_BUILD_DIR:-${GPUPROV_SANITIZE_BUILD_DIR:-build-san}}, the one
# scripts/sanitize.sh builds and runs the tests in (configured by it). Each target starts from
# its seed corpus (tests/fuzz/corpus/<target>/). New inputs go to <build>/corpus/<target>/,
# crash inputs to <build>/artifacts/<target>/; the tree's seed folders are never written.
#
#   scripts/fuzz.sh                   every target for 4 s, two at a time (the CI smoke)
#   scripts/fuzz.sh -t 3600 spec      one target for an hour
#   scripts/fuzz.sh -r 10000000       every target for 10 million executions
#   scripts/fuzz.sh -t 3600 -r 10000000 spec   whichever comes first
#   scripts/fuzz.sh -j 1 ...          one target at a time
#   scripts/fuzz.sh -n ...            run what is built, do not configure or build
#   scripts/fuzz.sh -l ...            long runs: the targets built alone with -O2 and UBSan
#                                     only in build-fuzzfast/ (no tests), 10 to 30 times the
#                                     executions per second of build-san/'s -O0 ASan; then every
#                                     input of each target's grown corpus is replayed once through
#                                     build-san/'s ASan + UBSan binary (memory errors, leaks)
#
# Prints one line per target (executions, seconds, coverage, features, corpus, crashes) and
# exits 1 when any target found a crash, a leak, a timeout or an out-of-memory.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=4
runs=-1
jobs=2
build=1
long=0
seconds_given=0
while getopts "t:r:j:nl" opt; do
  case $opt in
    t) seconds=$OPTARG; seconds_given=1 ;;
    r) runs=$OPTARG ;;
    j) jobs=$OPTARG ;;
    n) build=0 ;;
    l) long=1 ;;
    *) echo "usage: $0 [-t SECONDS] [-r RUNS] [-j JOBS] [-n] [-l] [TARGET...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))

ASAN_DIR=${GPUPROV_SANITIZE_BUILD_DIR:-build-san}
if [ "$long" -eq 1 ]; then
  BUILD_DIR=${GPUPROV_FUZZ_BUILD_DIR:-build-fuzzfast}
  if [ "$build" -eq 1 ]; then
    cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only" \
      -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only" \
      -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DGPUPROV_FUZZ=ON \
      -DGPUPROV_FUZZ_SANITIZERS=undefined -DGPUPROV_BUILD_TESTS=OFF >/dev/null
    cmake --build "$BUILD_DIR" --target fuzz_targets
    # The ASan replay below uses build-san/'s binaries.
    GPUPROV_SANITIZE_BUILD_DIR=$ASAN_DIR bash scripts/sanitize.sh --configure
    cmake --build "$ASAN_DIR" --target fuzz_targets
  fi
else
  BUILD_DIR=${GPUPROV_FUZZ_BUILD_DIR:-${GPUPROV_SANITIZE_BUILD_DIR:-build-san}}
fi
if [ "$long" -eq 0 ] && [ "$build" -eq 1 ]; then
  # Configured as scripts/sanitize.sh does, so a directory it built is not configured anew
  # (when it built everything already, this builds nothing).
  GPUPROV_SANITIZE_BUILD_DIR=$BUILD_DIR bash scripts/sanitize.sh --configure
  cmake --build "$BUILD_DIR" --target fuzz_targets
fi

if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(find "$BUILD_DIR/fuzz" -maxdepth 1 -name "*_fuzz" -type f -printf "%f\n" | sed "s/_fuzz$//" | sort)
fi

# intercept_tls_get_addr=0: see scripts/sanitize.sh (clang 14's leak-check tracer crash).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:intercept_tls_get_addr=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
log_dir="$BUILD_DIR/fuzz-logs"
mkdir -p "$log_dir"

run_one() {
  local target=$1
  local corpus="$BUILD_DIR/corpus/$target" artifacts="$BUILD_DIR/artifacts/$target/"
  mkdir -p "$corpus" "$artifacts"
  # -t and -r together: whichever limit comes first.
  local limit=(-max_total_time="$seconds")
  [ "$runs" -ge 0 ] && limit=(-runs="$runs")
  [ "$runs" -ge 0 ] && [ "$seconds_given" -eq 1 ] && limit+=(-max_total_time="$seconds")
  # -timeout: one input taking 10 s is a hang (a wall-clock alarm: a long run at nice 19 on a
  # loaded machine wants GPUPROV_FUZZ_TIMEOUT=60); -rss_limit_mb: 2 GB is an out-of-memory.
  "$BUILD_DIR/fuzz/${target}_fuzz" "${limit[@]}" -timeout="${GPUPROV_FUZZ_TIMEOUT:-10}" -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$artifacts" "$corpus" "tests/fuzz/corpus/$target" \
    >"$log_dir/$target.log" 2>&1
  [ "$long" -eq 1 ] || return 0
  # Every input the run kept, once, under ASan + UBSan (-runs=0: no mutation, nothing written).
  "$ASAN_DIR/fuzz/${target}_fuzz" -runs=0 -max_len=65536 -timeout="${GPUPROV_FUZZ_TIMEOUT:-10}" \
    -artifact_prefix="$artifacts" \
    "$corpus" "tests/fuzz/corpus/$target" >"$log_dir/$target.asan-replay.log" 2>&1
}

summary() {
  local target=$1 rc=$2 log="$log_dir/$1.log"
  local execs secs cov ft units crashes
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  units=$(find "$BUILD_DIR/corpus/$target" -type f | wc -l)
  crashes=$(find "$BUILD_DIR/artifacts/$target" -type f | wc -l)
  printf '%-24s rc=%-3s execs=%-10s secs=%-6s cov=%-6s ft=%-6s corpus=%-5s artifacts=%s\n' \
    "$target" "$rc" "${execs:-?}" "${secs:-?}" "${cov:-?}" "${ft:-?}" "$units" "$crashes"
  if [ "$long" -eq 1 ]; then
    echo "  ASan + UBSan replay of the corpus: $(grep -o 'Done [0-9]* runs' "$log_dir/$1.asan-replay.log" ||
      echo "failed, see $log_dir/$1.asan-replay.log")"
  fi
}

failed=0
pids=()
names=()
for target in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  rm -f "$log_dir/$target.rc"
  ( rc=0; run_one "$target" || rc=$?; echo "$rc" >"$log_dir/$target.rc" ) &
  pids+=($!)
  names+=("$target")
done
wait
for target in "${names[@]}"; do
  rc=$(cat "$log_dir/$target.rc")
  summary "$target" "$rc"
  if [ "$rc" -ne 0 ]; then
    failed=1
    echo "--- $target failed; its log: $log_dir/$target.log" >&2
    grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error)' "$log_dir/$target.log" | head -5 >&2 || true
  fi
done
exit "$failed"
