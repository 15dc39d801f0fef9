#!/usr/bin/env bats
# Crash points of a Kubernetes run (issue 15), on real test VMs (the emulator's docker backend),
# here DigitalOcean's boot route with direct access: the host key pinned, the installer re-run for
# the certificate's SAN, the kubeconfig written (crash_points_k8s.bats and
# crash_points_k8s_tunnel.bats have the other routes). gpuprov is
# killed (GPUPROV_TEST_CRASH_AT, a GPUPROV_TEST_HOOKS build) right after the step; the same
# command again must end as an uninterrupted run does (exit 0, phase ready, one VM, the real
# kubectl reaching the node, nothing installed twice), and `down` must bring the emulator's
# census back to what it was. Each test that passes adds its rows to $GPUPROV_CRASH_TABLE_K8S_SAN
# (default <build dir>/crash-table-k8s-san.md).

load helpers
load crash_points

setup_file() {
  export K8S_TABLE=${GPUPROV_CRASH_TABLE_K8S_SAN:-$BUILD_DIR/crash-table-k8s-san.md}
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

@test "digitalocean (boot route, direct): crash after the host key, the SAN re-run, the kubeconfig" {
  # The SAN re-run: without the metadata service the boot install cannot learn the public
  # address, the certificate does not cover it and gpuprov re-runs the installer with
  # --public-ip. The VM is made by runs killed after the host key is pinned, after that re-run
  # and after the kubeconfig is written; the run below is their re-run.
  fault '{"cloud":"digitalocean","fault":"no_metadata"}'
  cluster_crash_chain digitalocean ck-san "host-key-pinned san-rerun kubeconfig-written"
  [[ "$CHAIN_OUTPUT" == *"the API certificate does not cover"* ]]
  run "$GPUPROV" -v provision --name ck-san --cloud digitalocean
  echo "$output"
  [ "$status" -eq 0 ]
  # The crashed run's re-run with --public-ip stands: no second one, nothing pushed.
  cluster_crash_converged digitalocean ck-san "$output"
  expect_cluster_ready ck-san
  run "$GPUPROV" down ck-san
  [ "$status" -eq 0 ]
  [ ! -s "$GPUPROV_HOME/known_hosts" ]
  cluster_crash_passed digitalocean "boot, direct"
}
