#!/usr/bin/env bash
# Runs every test: set up and build, then unit and driver tests (ctest), the installer and
# fixture tests (bats, shellcheck), the end-to-end CLI tests (bats, against real Docker), the
# unit, driver and emulator tests again under ASan + UBSan and the tunnel and emulator
# concurrency tests under TSan (scripts/sanitize.sh; GPUPROV_SKIP_SANITIZE=1 skips it) and a short
# run of every fuzz target, built in the same ASan + UBSan directory (scripts/fuzz.sh;
# GPUPROV_SKIP_FUZZ=1 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
run_start=$(date +%s)
# since: seconds from $1 to now.
since() { echo "$(( $(date +%s) - $1 )) s"; }
bash scripts/setup.sh
echo "==> setup (packages, dockerd, test image, build) took $(since "$run_start")" >&2
BUILD_DIR=${GPUPROV_BUILD_DIR:-build}
export GPUPROV_BUILD_DIR="$BUILD_DIR"
# setup.sh built the test VM image: run the installer's tests inside real test VMs too.
export GPUPROV_INSTALLER_VM_TESTS=1

# The sanitizer builds (a second compile of everything, with clang) run at the lowest priority
# beside the tests below: the e2e files mostly wait on containers and SSH, and that idle CPU
# compiles build-san/ and build-tsan/. The sanitizer step later waits for this build.
# Started outside this shell's jobs (the bats step below counts and waits for its own jobs);
# its exit status lands in $san_build_log.rc.
san_build=0
san_build_log=$(mktemp)
if [ "${GPUPROV_SKIP_SANITIZE:-0}" != 1 ] || [ "${GPUPROV_SKIP_FUZZ:-0}" != 1 ]; then
  san_build=1
  ( (
    # Its own process group (setsid), so the EXIT trap can stop the compilers too.
    setsid nice -n 19 bash scripts/sanitize.sh --build >"$san_build_log" 2>&1 &
    echo "$!" >"$san_build_log.pid"
    rc=0
    wait "$!" || rc=$?
    echo "$rc" >"$san_build_log.rc"
  ) </dev/null >/dev/null 2>&1 & )
fi

echo "==> shellcheck" >&2
mapfile -t shell_files < <(git ls-files '*.sh' '*.bash' 'tests/fixtures/testvm/overlay/usr/bin/*' .ci/run)
shellcheck "${shell_files[@]}"

log_dir=$(mktemp -d)
stop_san_build() {
  if [ "$san_build" -eq 1 ] && [ ! -e "$san_build_log.rc" ] && [ -s "$san_build_log.pid" ]; then
    kill -- "-$(cat "$san_build_log.pid")" 2>/dev/null || true
  fi
  rm -f "$san_build_log" "$san_build_log.pid" "$san_build_log.rc"
}
trap 'rm -rf "$log_dir"; stop_san_build' EXIT

# ctest and the bats files run side by side: ctest is one of the BATS_JOBS slots (default 3).
# Independent bats files run at once: each e2e file has its own GPUPROV_HOME and emulator
# session, and the emulators pick free loopback addresses across sessions. The files that drive
# the Docker test cloud count its containers machine-wide, so they run one after another in a
# single job, and only after ctest (the docker driver's tests make such containers). That job
# is the longest: it starts the moment ctest ends.
echo "==> ctest and bats" >&2
mapfile -t bats_files < <(git ls-files '*.bats')
serial_files=(tests/e2e/docker_cloud.bats tests/e2e/lifecycle_rules.bats tests/e2e/crash_points_docker.bats
  tests/e2e/cli.bats)
bats_jobs=()
for f in "${bats_files[@]}"; do
  case " ${serial_files[*]} " in *" $f "*) ;; *) bats_jobs+=("$f") ;; esac
done
max_jobs=${BATS_JOBS:-3}
step_start=$(date +%s)
( ctest --test-dir "$BUILD_DIR" --output-on-failure -j2 >"$log_dir/ctest.log" 2>&1
  echo $? >"$log_dir/ctest.rc"
  echo "==> ctest took $(since "$step_start")" >&2 ) &
: >"$log_dir/bats.log"
bats_rc=0
n=0
# start_bats FILES: one bats job in the background (its log, status and time in $log_dir).
start_bats() {
  n=$((n + 1))
  # shellcheck disable=SC2086  # a job is one or more file names
  ( job_start=$(date +%s)
    bats --print-output-on-failure $1 >"$log_dir/bats.$n.log" 2>&1
    echo $? >"$log_dir/bats.$n.rc"
    echo "$(since "$job_start"): $1" >"$log_dir/bats.$n.time" ) &
}
serial_started=0
next=0
while [ "$serial_started" -eq 0 ] || [ "$next" -lt "${#bats_jobs[@]}" ]; do
  if [ "$serial_started" -eq 0 ] && [ -e "$log_dir/ctest.rc" ]; then
    start_bats "${serial_files[*]}"
    serial_started=1
  elif [ "$next" -lt "${#bats_jobs[@]}" ] && [ "$(jobs -rp | wc -l)" -lt "$max_jobs" ]; then
    start_bats "${bats_jobs[$next]}"
    next=$((next + 1))
  else
    wait -n || true
  fi
done
wait
ctest_rc=$(cat "$log_dir/ctest.rc" 2>/dev/null || echo 1)
cat "$log_dir/ctest.log"
echo "==> ctest and bats took $(since "$step_start")" >&2
for i in $(seq 1 "$n"); do
  cat "$log_dir/bats.$i.log"
  cat "$log_dir/bats.$i.log" >>"$log_dir/bats.log"
  echo "==> bats job $i took $(cat "$log_dir/bats.$i.time" 2>/dev/null || echo "?")" >&2
  rc=$(cat "$log_dir/bats.$i.rc" 2>/dev/null || echo missing)
  [ "$rc" = 0 ] || { echo "bats job $i ended with status $rc" >&2; bats_rc=1; }
done

if [ "$san_build" -eq 1 ]; then
  echo "==> waiting for the sanitizer builds started at the beginning" >&2
  while [ ! -e "$san_build_log.rc" ]; do sleep 2; done
  san_build_rc=$(cat "$san_build_log.rc")
  cat "$san_build_log" >&2
  # A failed build shows again (with its error) in the steps below, which build what is missing.
  [ "$san_build_rc" -eq 0 ] || echo "==> the background sanitizer build ended with $san_build_rc" >&2
fi
sanitize_rc=0
if [ "${GPUPROV_SKIP_SANITIZE:-0}" != 1 ]; then
  echo "==> sanitizers (ASan + UBSan, TSan)" >&2
  bash scripts/sanitize.sh | tee "$log_dir/sanitize.log" || sanitize_rc=$?
fi
fuzz_rc=0
if [ "${GPUPROV_SKIP_FUZZ:-0}" != 1 ]; then
  # Every target for a few seconds, two at a time (about 40 s for 16 targets at 4 s).
  echo "==> fuzz smoke" >&2
  fuzz_start=$(date +%s)
  bash scripts/fuzz.sh -t "${GPUPROV_FUZZ_SECONDS:-4}" -j 2 || fuzz_rc=$?
  echo "==> fuzz smoke took $(since "$fuzz_start")" >&2
fi

# One closing line over both runners: ctest counts each registered test (gpuprov_test is one),
# bats each @test.
ctest_total=$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' "$log_dir/ctest.log" | tail -1)
ctest_failed=$(sed -n 's/.*, \([0-9]*\) tests failed out of.*/\1/p' "$log_dir/ctest.log" | tail -1)
bats_passed=$(grep -c '^ok ' "$log_dir/bats.log" || true)
bats_failed=$(grep -c '^not ok ' "$log_dir/bats.log" || true)
passed=$(( ${ctest_total:-0} - ${ctest_failed:-0} + bats_passed ))
failed=$(( ${ctest_failed:-0} + bats_failed ))
if [ "$ctest_rc" -ne 0 ] || [ "$bats_rc" -ne 0 ]; then
  [ "$failed" -gt 0 ] || failed=1
fi
# The sanitizer and fuzz steps count as one test each.
if [ "${GPUPROV_SKIP_SANITIZE:-0}" != 1 ]; then
  if [ "$sanitize_rc" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
fi
if [ "${GPUPROV_SKIP_FUZZ:-0}" != 1 ]; then
  if [ "$fuzz_rc" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
fi
echo "==> the whole run took $(since "$run_start")" >&2
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
