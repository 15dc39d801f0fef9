#!/usr/bin/env bats
# Crash points of a Kubernetes run (issue 15), on real test VMs (the emulator's docker backend),
# one cloud per route and access: here DigitalOcean (direct access: ports opened for an existing
# VM, the installer pushed to it, the kubeconfig); crash_points_k8s_san.bats: DigitalOcean's boot
# route (the installer re-run for the certificate's SAN); crash_points_k8s_tunnel.bats: Prime
# Intellect (SSH route, tunnel access). Three files, so scripts/test.sh runs them side by side.
# gpuprov is
# killed (GPUPROV_TEST_CRASH_AT, a GPUPROV_TEST_HOOKS build) right after the step; the same
# command again must end as an uninterrupted run does (exit 0, phase ready, one VM, the real
# kubectl reaching the node, nothing installed twice), and `down` must bring the emulator's
# census back to what it was. Each test that passes adds its rows to $GPUPROV_CRASH_TABLE_K8S
# (default <build dir>/crash-table-k8s.md).

load helpers
load crash_points

setup_file() {
  export K8S_TABLE=${GPUPROV_CRASH_TABLE_K8S:-$BUILD_DIR/crash-table-k8s.md}
  export DIGITALOCEAN_TOKEN="dop_v1_crashk8s_$$_secret_token"
  k8s_file_setup digitalocean
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

@test "digitalocean (direct, Kubernetes on an existing VM): crash after ports opened, after the kubeconfig" {
  local start
  start=$(census digitalocean)
  # A plain VM first: Kubernetes on the same name then needs open_ports for 6443, 80, 443.
  run "$GPUPROV" provision --name ck-do --cloud digitalocean --no-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  crash_at ports-opened "$GPUPROV" provision --name ck-do --cloud digitalocean
  [ "$(field ck-do phase)" = running ]
  # The VM was made without Kubernetes, so no boot install ran: this run pushes the installer
  # over SSH and is killed once the kubeconfig is written.
  crash_at kubeconfig-written "$GPUPROV" provision --name ck-do --cloud digitalocean
  [ -e "$GPUPROV_HOME/kube/ck-do.yaml" ]
  run "$GPUPROV" -v provision --name ck-do --cloud digitalocean
  echo "$output"
  [ "$status" -eq 0 ]
  converged ck-do digitalocean "$output"
  [ "$(round_trips "$output" "push installer")" -eq 0 ]   # installed once, by the crashed run
  [[ "$(field ck-do open_ports)" == *6443* ]]
  run "$GPUPROV" down ck-do
  [ "$status" -eq 0 ]
  [ "$(census_until digitalocean "$start")" = "$start" ]
  [ ! -e "$GPUPROV_HOME/kube/ck-do.yaml" ]
  passed digitalocean "ssh push, direct" ports-opened kubeconfig-written
}
