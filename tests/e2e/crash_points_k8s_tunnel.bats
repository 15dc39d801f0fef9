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
  export K8S_TABLE=${GPUPROV_CRASH_TABLE_K8S_TUNNEL:-$BUILD_DIR/crash-table-k8s-tunnel.md}
  export PRIME_API_KEY="pit_crashk8s_$$_secret_key"
  k8s_file_setup primeintellect
}

teardown_file() {
  stop_emulators
}

setup() {
  k8s_setup
}

teardown() {
  k8s_teardown
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
