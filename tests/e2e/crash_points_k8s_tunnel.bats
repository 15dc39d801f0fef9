#!/usr/bin/env bats
# Crash points of a Kubernetes run (issue 15), on real test VMs (the emulator's docker backend),
# the SSH route with tunnel access: Prime Intellect (the host key pinned, the installer pushed);
# crash_points_k8s.bats has the boot route with direct access. gpuprov is
# killed (GPUPROV_TEST_CRASH_AT, a GPUPROV_TEST_HOOKS build) right after the step; the same
# command again must end as an uninterrupted run does (exit 0, phase ready, one VM, the real
# kubectl reaching the node, nothing installed twice), and `down` must bring the emulator's
# census back to what it was. Each test that passes adds its rows to $GPUPROV_CRASH_TABLE_K8S_TUNNEL
# (default <build dir>/crash-table-k8s-tunnel.md).

load helpers
load crash_points

setup_file() {
  rm -f "${GPUPROV_CRASH_TABLE_K8S_TUNNEL:-$BUILD_DIR/crash-table-k8s-tunnel.md}"
  export PRIME_API_KEY="pit_crashk8s_$$_secret_key"
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  printf '[defaults.timeouts]\nssh_wait_seconds = 180\nboot_install_wait_seconds = 120\napi_wait_seconds = 120\n' \
    >"$GPUPROV_HOME/config.toml"
  start_emulator emu --backend docker --clouds primeintellect
}

teardown_file() {
  stop_emulators
}

# passed CLOUD ROUTE POINT...: the rows of a test that passed, appended to the k8s table.
passed() {
  local table=${GPUPROV_CRASH_TABLE_K8S_TUNNEL:-$BUILD_DIR/crash-table-k8s-tunnel.md} cloud=$1 route=$2 point
  shift 2
  [ -s "$table" ] || printf '| cloud | route, access | point | result |\n|---|---|---|---|\n' >"$table"
  for point in "$@"; do
    echo "| $cloud | $route | $point | converged (re-run ready, one VM, nothing installed twice; down: census as before) |" >>"$table"
  done
}

setup() {
  skip_without_hooks
  use_emulator emu
}

teardown() {
  reset_emulators
  rm -f "$GPUPROV_HOME"/state/*.json "$GPUPROV_HOME"/kube/*.yaml
}

# crash_at POINT CMD...: CMD killed by gpuprov itself at POINT (exit 137).
crash_at() {
  local point=$1
  shift
  run env GPUPROV_TEST_CRASH_AT="$point" "$@"
  echo "$output"
  [ "$status" -eq 137 ]
  [[ "$output" == *"test crash point $point: SIGKILL"* ]]
}

@test "primeintellect (SSH route, tunnel): crash after the host key, after the installer is pushed" {
  local start
  start=$(census primeintellect)
  crash_at host-key-pinned "$GPUPROV" provision --name ck-pi --cloud primeintellect --gpus A100:1
  grep -q . "$GPUPROV_HOME/known_hosts"
  crash_at installer-pushed "$GPUPROV" provision --name ck-pi --cloud primeintellect --gpus A100:1
  [ "$(field ck-pi probe.pushed_over_ssh)" = yes ]
  run "$GPUPROV" -v provision --name ck-pi --cloud primeintellect --gpus A100:1
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(field ck-pi phase)" = ready ]
  [ "$(instances_named primeintellect ck-pi)" -eq 1 ]
  [[ "$output" == *"reusing existing VM ck-pi"* ]]
  # The installer the crashed run pushed is found installed: not pushed again.
  [ "$(round_trips "$output" "push installer")" -eq 0 ]
  [ "$(field ck-pi access)" = tunnel ]
  run "$GPUPROV" down ck-pi
  [ "$status" -eq 0 ]
  [ "$(census_until primeintellect "$start")" = "$start" ]
  [ ! -s "$GPUPROV_HOME/known_hosts" ]
  passed primeintellect "ssh, tunnel" host-key-pinned installer-pushed
}
