#!/usr/bin/env bats
# Crash points of a Kubernetes run (issue 15), on real test VMs (the emulator's docker backend),
# here DigitalOcean's boot route with direct access: the installer re-run for the certificate's
# SAN (crash_points_k8s.bats and crash_points_k8s_tunnel.bats have the other points). gpuprov is
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

@test "digitalocean (boot route, direct): crash after the SAN re-run" {
  local start
  start=$(census digitalocean)
  # The SAN re-run: without the metadata service the boot install cannot learn the public
  # address, the certificate does not cover it and gpuprov re-runs the installer with
  # --public-ip; killed right after that.
  fault '{"cloud":"digitalocean","fault":"no_metadata"}'
  crash_at san-rerun "$GPUPROV" -v provision --name ck-san --cloud digitalocean
  [[ "$output" == *"the API certificate does not cover"* ]]
  run "$GPUPROV" -v provision --name ck-san --cloud digitalocean
  echo "$output"
  [ "$status" -eq 0 ]
  converged ck-san digitalocean "$output"
  # The crashed run's re-run with --public-ip stands: no second one, nothing pushed.
  [ "$(round_trips "$output" "re-run installer with the public IP")" -eq 0 ]
  [ "$(round_trips "$output" "push installer")" -eq 0 ]
  run "$GPUPROV" down ck-san
  [ "$status" -eq 0 ]
  [ "$(census_until digitalocean "$start")" = "$start" ]
  passed digitalocean "boot, direct" san-rerun
}
