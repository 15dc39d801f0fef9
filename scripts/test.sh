#!/usr/bin/env bash
# Runs every test: set up and build, then unit and driver tests (ctest), the installer and
# fixture tests (bats, shellcheck), the end-to-end CLI tests (bats, against real Docker), and,
# beside them from the start (scripts/sanitize_and_fuzz.sh), the unit, driver-kit and driver
# tests again under ASan + UBSan and the tunnel and emulator concurrency tests under TSan
# (scripts/sanitize.sh; GPUPROV_SKIP_SANITIZE=1 skips it) and a short run of every fuzz target,
# built in the same ASan + UBSan directory (scripts/fuzz.sh; GPUPROV_SKIP_FUZZ=1 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
run_start=$(date +%s)
# cpu_ticks: "busy total" jiffies of all CPUs since boot (/proc/stat), for the closing line.
cpu_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat; }
read -r busy_start total_start < <(cpu_ticks)
# since: seconds from $1 to now.
since() { echo "$(( $(date +%s) - $1 )) s"; }
# The sanitizer build replays the fuzz corpora under ASan + UBSan: the normal build leaves its
# own replays out then (CMake option GPUPROV_FUZZ_REPLAY).
[ "${GPUPROV_SKIP_SANITIZE:-0}" = 1 ] || export GPUPROV_FUZZ_REPLAY=OFF
bash scripts/setup.sh
echo "==> setup (packages, dockerd, test image, build) took $(since "$run_start")" >&2
BUILD_DIR=${GPUPROV_BUILD_DIR:-build}
export GPUPROV_BUILD_DIR="$BUILD_DIR"
# setup.sh built the test VM image: run the installer's tests inside real test VMs too.
export GPUPROV_INSTALLER_VM_TESTS=1

# The sanitizer and fuzz steps run beside the tests below, from the start, as one background
# pipeline (scripts/sanitize_and_fuzz.sh): the builds of build-san/ and build-tsan/ at the lowest
# priority (the e2e files mostly wait on containers and SSH, and that idle CPU compiles them),
# then the ASan + UBSan and TSan tests and the fuzz smoke at normal priority. This run waits for
# it at the end. Started outside this shell's jobs (the bats step counts and waits for its own
# jobs), in its own process group (setsid) so the EXIT trap can stop it, compilers included.
log_dir=$(mktemp -d)
san_run=0
san_dir=$(mktemp -d)
stop_san_run() {
  if [ "$san_run" -eq 1 ] && [ ! -e "$san_dir/ended" ] && [ -s "$san_dir/pid" ]; then
    kill -- "-$(cat "$san_dir/pid")" 2>/dev/null || true
  fi
  rm -rf "$san_dir"
}
trap 'rm -rf "$log_dir"; stop_san_run' EXIT
if [ "${GPUPROV_SKIP_SANITIZE:-0}" != 1 ] || [ "${GPUPROV_SKIP_FUZZ:-0}" != 1 ]; then
  san_run=1
  ( (
    setsid bash scripts/sanitize_and_fuzz.sh "$san_dir" "$log_dir/ctest.rc" &
    echo "$!" >"$san_dir/pid"
    wait "$!" || true
    touch "$san_dir/ended"
  ) </dev/null >/dev/null 2>&1 & )
fi

echo "==> shellcheck" >&2
mapfile -t shell_files < <(git ls-files '*.sh' '*.bash' 'tests/fixtures/testvm/overlay/usr/bin/*' .ci/run)
shellcheck "${shell_files[@]}"

# ctest and the bats files run side by side: ctest is one of the BATS_JOBS slots (default 3).
# Independent bats files run at once: each e2e file has its own GPUPROV_HOME and emulator
# session, and the emulators pick free loopback addresses across sessions. The files that drive
# the Docker test cloud count its containers machine-wide, so they run one after another in a
# single job, and only after ctest (the docker driver's tests make such containers). That job
# is the longest: it starts the moment ctest ends.
echo "==> ctest and bats" >&2
# The longest files first (their wall seconds in a CI-like run: cluster 634, lambda 367,
# verda 329, ports 260, gc 254, allow_from 226), then the rest in name order: a long file
# started last would run on alone at the end.
slow_first=(tests/e2e/multi_node.bats tests/e2e/cluster.bats tests/e2e/apt_variant.bats tests/e2e/lambda.bats tests/e2e/verda.bats tests/e2e/ports.bats
  tests/e2e/gc.bats tests/e2e/allow_from.bats)
mapfile -t bats_files < <( (printf '%s\n' "${slow_first[@]}"; git ls-files '*.bats') | awk '!seen[$0]++')
serial_files=(tests/e2e/docker_cloud.bats tests/e2e/lifecycle_rules.bats tests/e2e/crash_points_docker.bats
  tests/e2e/cli.bats)
bats_jobs=()
for f in "${bats_files[@]}"; do
  case " ${serial_files[*]} " in *" $f "*) ;; *) bats_jobs+=("$f") ;; esac
done
max_jobs=${BATS_JOBS:-3}
step_start=$(date +%s)
# record_signals JOB: inside a job's wrapper subshell, a TERM, INT or HUP sent to the wrapper is
# written to $log_dir/signals (printed at the end) and the wrapper goes on waiting for its
# ctest or bats: a kill of a stale PID elsewhere (PIDs wrap quickly here) must not lose a job's
# status silently. (The commands it starts get default signal handling back at exec.)
record_signals() {
  local sig
  for sig in TERM INT HUP; do
    # shellcheck disable=SC2064  # the job's name and the signal now
    trap "signal_note '$1' $sig" "$sig"
  done
}
signal_note() { echo "$(date +%T) $1: SIG$2 to its wrapper (pid $BASHPID), ignored" >>"$log_dir/signals"; }
( record_signals ctest
  ctest --test-dir "$BUILD_DIR" --output-on-failure -j2 >"$log_dir/ctest.log" 2>&1
  echo $? >"$log_dir/ctest.rc"
  echo "==> ctest took $(since "$step_start")" >&2 ) &
: >"$log_dir/bats.log"
bats_rc=0
n=0
# start_bats FILES: one bats job in the background (its log, status and time in $log_dir).
start_bats() {
  n=$((n + 1))
  # shellcheck disable=SC2086  # a job is one or more file names
  ( record_signals "bats job $n ($1)"
    job_start=$(date +%s)
    bats --print-output-on-failure $1 >"$log_dir/bats.$n.log" 2>&1
    echo $? >"$log_dir/bats.$n.rc"
    echo "$(since "$job_start"): $1" >"$log_dir/bats.$n.time" ) &
}
# status_from_log LOG KIND: the status of a job whose wrapper was lost, from what its runner
# wrote: waits (up to 20 min) for the log to be complete (ctest: its "Total Test time" line;
# bats: as many results as the TAP plan says), then prints 0 if every test passed, else 1.
status_from_log() {
  local log=$1 kind=$2 i plan results
  for i in $(seq 1 600); do
    if [ "$kind" = ctest ]; then
      grep -q "^Total Test time" "$log" && break
    else
      plan=$(sed -n 's/^1\.\.\([0-9]*\)$/\1/p' "$log" | head -n1)
      results=$(grep -cE '^(not )?ok ' "$log" || true)
      [ -n "$plan" ] && [ "$results" -ge "$plan" ] && break
    fi
    sleep 2
  done
  if [ "$kind" = ctest ]; then
    grep -q "^100% tests passed" "$log" && echo 0 || echo 1
  else
    [ -n "$plan" ] && [ "$results" -ge "$plan" ] && ! grep -q '^not ok ' "$log" && echo 0 || echo 1
  fi
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
  elif [ -z "$(jobs -rp)" ] && [ ! -e "$log_dir/ctest.rc" ]; then
    # Nothing of ours runs and ctest left no status: its wrapper is gone (killed?). ctest itself
    # may still run, orphaned: its log decides once it ends (status_from_log).
    echo "ctest's job ended without a status (killed?); reading its log" | tee -a "$log_dir/signals" >&2
    status_from_log "$log_dir/ctest.log" ctest >"$log_dir/ctest.rc"
  else
    wait -n || true
  fi
done
wait
ctest_rc=$(cat "$log_dir/ctest.rc" 2>/dev/null || echo 1)
cat "$log_dir/ctest.log"
echo "==> ctest and bats took $(since "$step_start")" >&2
for i in $(seq 1 "$n"); do
  rc=$(cat "$log_dir/bats.$i.rc" 2>/dev/null || echo missing)
  if [ "$rc" = missing ]; then
    rc=$(status_from_log "$log_dir/bats.$i.log" bats)
    echo "bats job $i: its wrapper ended without a status (killed?); from bats' TAP output: $rc" |
      tee -a "$log_dir/signals" >&2
  fi
  cat "$log_dir/bats.$i.log"
  cat "$log_dir/bats.$i.log" >>"$log_dir/bats.log"
  echo "==> bats job $i took $(cat "$log_dir/bats.$i.time" 2>/dev/null || echo "?")" >&2
  [ "$rc" = 0 ] || { echo "bats job $i ended with status $rc" >&2; bats_rc=1; }
done
if [ -s "$log_dir/signals" ]; then
  echo "==> what the jobs' wrappers went through (a kill aimed at another process?):" >&2
  cat "$log_dir/signals" >&2
fi

sanitize_rc=0
fuzz_rc=0
if [ "$san_run" -eq 1 ]; then
  echo "==> waiting for the sanitizer and fuzz steps started at the beginning" >&2
  while [ ! -e "$san_dir/ended" ]; do sleep 2; done
  cat "$san_dir/log" >&2
  sanitize_rc=$(cat "$san_dir/sanitize.rc" 2>/dev/null || echo 1)
  fuzz_rc=$(cat "$san_dir/fuzz.rc" 2>/dev/null || echo 1)
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
read -r busy_end total_end < <(cpu_ticks)
echo "==> the whole run took $(since "$run_start"), the CPUs busy" \
  "$(( 100 * (busy_end - busy_start) / (total_end - total_start + 1) ))% of it" >&2
echo "tests: $passed passed, $failed failed"
# CI keeps only the end of this output: name what failed here, last, with each failed bats
# test's own output (its '# ' lines, up to 60) and each failed gtest case.
if [ "$failed" -gt 0 ]; then
  echo "==> what failed"
  sed -n '/^The following tests FAILED:/,/^Errors while running/p' "$log_dir/ctest.log" |
    sed -n 's/^[[:space:]]*[0-9]* - /ctest: /p'
  grep -h '^\[  FAILED  \] [^0-9]' "$log_dir/ctest.log" | sort -u | sed 's/^/  gtest: /' || true
  for i in $(seq 1 "$n"); do
    awk -v job="$i" '/^not ok /{shown=0; print "bats job " job ": " $0; failing=1; next}
      /^ok /{failing=0} failing && /^#/ && shown < 60 {print "    " $0; shown++}' "$log_dir/bats.$i.log"
    rc=$(cat "$log_dir/bats.$i.rc" 2>/dev/null || echo missing)
    if [ "$rc" != 0 ] && ! grep -q '^not ok ' "$log_dir/bats.$i.log"; then
      echo "bats job $i ended with status $rc and no failed test in its output; its last lines:"
      tail -n 20 "$log_dir/bats.$i.log" | sed 's/^/    /'
    fi
  done
  [ "$sanitize_rc" -eq 0 ] || echo "the sanitizer step (see '==> sanitize' above)"
  [ "$fuzz_rc" -eq 0 ] || echo "the fuzz smoke (see its table above)"
fi
[ "$failed" -eq 0 ]
