#!/usr/bin/env bash
# The sanitizer and fuzz steps of scripts/test.sh, as one pipeline that test.sh starts in the
# background beside its ctest and bats steps:
#   1. the builds of build-san/ and build-tsan/ (scripts/sanitize.sh --build) at nice 19, so
#      they take only the CPU the tests leave idle;
#   2. the ASan + UBSan and TSan tests (scripts/sanitize.sh), at normal priority;
#   3. the fuzz smoke: every target for ${GPUPROV_FUZZ_SECONDS:-4} s, two at a time.
# GPUPROV_SKIP_SANITIZE=1 / GPUPROV_SKIP_FUZZ=1 leave out steps 1-2 / 3.
#
#   scripts/sanitize_and_fuzz.sh DIR [AFTER]
# AFTER: a file; the tests of step 2 wait until it exists (test.sh: the normal ctest's end, so
# the two ctest runs, both with test VMs, do not overlap). Writes DIR/log (every step's output and wall time), DIR/sanitize.rc and DIR/fuzz.rc (exit
# statuses of the steps run). Needs the normal build (scripts/setup.sh): the driver tests of
# build-san/ run its gpuprov-emulator.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
dir=${1:?usage: $0 DIR [AFTER]}
after=${2:-}
exec >"$dir/log" 2>&1

since() { echo "$(( $(date +%s) - $1 )) s"; }

if [ "${GPUPROV_SKIP_SANITIZE:-0}" != 1 ]; then
  start=$(date +%s)
  # A failed build shows again, with its error, in the step after it, which builds what is missing.
  nice -n 19 bash scripts/sanitize.sh --build || echo "==> the sanitizer builds ended with $?"
  echo "==> sanitizer builds (nice 19, beside the tests) took $(since "$start")"
  if [ -n "$after" ]; then
    start=$(date +%s)
    while [ ! -e "$after" ]; do sleep 2; done
    echo "==> waited $(since "$start") for $after"
  fi
  start=$(date +%s)
  rc=0
  bash scripts/sanitize.sh || rc=$?
  echo "$rc" >"$dir/sanitize.rc"
  echo "==> sanitizer tests (ASan + UBSan, TSan) took $(since "$start")"
fi
if [ "${GPUPROV_SKIP_FUZZ:-0}" != 1 ]; then
  start=$(date +%s)
  # Built already when the sanitizer step ran (same directory); else built here, at nice 19.
  nice -n 19 bash scripts/sanitize.sh --configure &&
    nice -n 19 cmake --build "${GPUPROV_SANITIZE_BUILD_DIR:-build-san}" --target fuzz_targets
  rc=0
  bash scripts/fuzz.sh -n -t "${GPUPROV_FUZZ_SECONDS:-4}" -j 2 || rc=$?
  echo "$rc" >"$dir/fuzz.rc"
  echo "==> fuzz smoke took $(since "$start")"
fi
