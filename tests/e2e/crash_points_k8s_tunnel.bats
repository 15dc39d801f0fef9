#!/usr/bin/env bats
# Crash points of a Kubernetes run (issue 15), on real test VMs (the emulator's docker backend),
# the SSH route with tunnel access: Prime Intellect (the host key pinned, the installer pushed,
# the kubeconfig written; kubectl through `gpuprov tunnel`);
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
  [ -z "${TUNNEL_PID:-}" ] || stop_child TERM "$TUNNEL_PID" || true
  k8s_teardown
}

@test "primeintellect (SSH route, tunnel): crash after the host key, the installer push, the kubeconfig" {
  # The VM is made by runs killed after each point; the run below is their re-run.
  cluster_crash_chain primeintellect ck-pi "host-key-pinned installer-pushed kubeconfig-written" \
    --gpus A100:1
  run "$GPUPROV" -v provision --name ck-pi --cloud primeintellect --gpus A100:1
  echo "$output"
  [ "$status" -eq 0 ]
  # The installer the crashed run pushed is found installed: not pushed again.
  cluster_crash_converged primeintellect ck-pi "$output"
  [ "$(field ck-pi access)" = tunnel ]
  # The real kubectl reaches the node through `gpuprov tunnel` (a free local port).
  run nodes_through_tunnel ck-pi
  echo "$output"
  [ "$status" -eq 0 ]
  run "$GPUPROV" down ck-pi
  [ "$status" -eq 0 ]
  [ ! -s "$GPUPROV_HOME/known_hosts" ]
  cluster_crash_passed primeintellect "ssh, tunnel"
}
