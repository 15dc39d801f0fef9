# shellcheck shell=bash disable=SC2034  # the variables set here are used by the .bats files that load it
# Shared set-up for the end-to-end CLI tests: a private GPUPROV_HOME per test file, the built
# gpuprov, and counting of the Docker test cloud's containers.
REPO_ROOT="$(cd "$(dirname "${BATS_TEST_FILENAME}")/../.." && pwd)"
BUILD_DIR="${GPUPROV_BUILD_DIR:-build}"
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$REPO_ROOT/$BUILD_DIR" ;; esac
GPUPROV="$BUILD_DIR/bin/gpuprov"
export NO_COLOR=1

# Containers of the docker test cloud for one VM name (0 or 1).
count_vm_containers() {
  docker ps -a --filter "label=io.gpuprov.managed=1" --filter "label=io.gpuprov.name=$1" -q | wc -l
}

# Every container of the docker test cloud.
count_all_gpuprov_containers() {
  docker ps -a --filter "label=io.gpuprov.managed=1" -q | wc -l
}

# Removes the containers of the given VM names, whatever state the test left.
remove_vm_containers() {
  local name
  for name in "$@"; do
    docker ps -a --filter "label=io.gpuprov.managed=1" --filter "label=io.gpuprov.name=$name" -q |
      xargs -r docker rm -f >/dev/null 2>&1 || true
  done
}

file_mode() { stat -c '%a' "$1"; }

# ---- The cloud emulator (tests/emulators), one per test file -----------------------------------

# start_emulator BACKEND CLOUDS: starts gpuprov-emulator (call from setup_file); its URLs go to
# $BATS_FILE_TMPDIR/emu.out. Cloud credentials must be exported before.
start_emulator() {
  "$BUILD_DIR/bin/gpuprov-emulator" --backend "$1" --clouds "$2" \
    >"$BATS_FILE_TMPDIR/emu.out" 2>"$BATS_FILE_TMPDIR/emu.err" 3>&- &
  echo $! >"$BATS_FILE_TMPDIR/emu.pid"
  local _
  for _ in $(seq 1 100); do
    grep -q '^control ' "$BATS_FILE_TMPDIR/emu.out" && return 0
    sleep 0.2
  done
  cat "$BATS_FILE_TMPDIR/emu.err" >&2
  return 1
}

# stop_emulator: ends it (call from teardown_file); the docker backend removes its VMs.
stop_emulator() {
  kill "$(cat "$BATS_FILE_TMPDIR/emu.pid")" 2>/dev/null || true
  wait "$(cat "$BATS_FILE_TMPDIR/emu.pid")" 2>/dev/null || true
}

# use_emulator: exports GPUPROV_<CLOUD>_ENDPOINT for every cloud it serves and CONTROL (its
# control API), and clears armed faults (call from setup).
use_emulator() {
  local cloud url
  while read -r cloud url; do
    if [ "$cloud" = control ]; then
      export CONTROL="$url"
    else
      export "GPUPROV_${cloud^^}_ENDPOINT=$url"
    fi
  done <"$BATS_FILE_TMPDIR/emu.out"
  curl -fsS -X DELETE "$CONTROL/faults" >/dev/null
}

# reset_emulator: removes every instance and fault (call from teardown).
reset_emulator() {
  curl -fsS -X POST "$CONTROL/reset" -d '{}' >/dev/null || true
}

# count CLOUD FIELD: one number from the emulator's counts.
count() {
  curl -fsS "$CONTROL/counts?cloud=$1" | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin).get('$2', 0))"
}

# fault JSON: arms one emulator fault.
fault() {
  curl -fsS -X POST "$CONTROL/faults" -d "$1" >/dev/null
}

# expect_nothing_left CLOUD: waits until the cloud has no instance (in the API or behind it) and
# no firewall left.
expect_nothing_left() {
  local cloud=$1 _
  for _ in $(seq 1 60); do
    if [ "$(count "$cloud" instances)" -eq 0 ] && [ "$(count "$cloud" backend_instances)" -eq 0 ] &&
      [ "$(count "$cloud" firewalls)" -eq 0 ]; then
      return 0
    fi
    sleep 0.5
  done
  curl -fsS "$CONTROL/counts?cloud=$cloud" >&2
  return 1
}
