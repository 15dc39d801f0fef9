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
  rm -f "${GPUPROV_CRASH_TABLE_K8S_SAN:-$BUILD_DIR/crash-table-k8s-san.md}"
  export DIGITALOCEAN_TOKEN="dop_v1_crashk8s_$$_secret_token"
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  printf '[defaults.timeouts]\nssh_wait_seconds = 180\nboot_install_wait_seconds = 120\napi_wait_seconds = 120\n' \
    >"$GPUPROV_HOME/config.toml"
  start_emulator emu --backend docker --clouds digitalocean
}

teardown_file() {
  stop_emulators
}

# passed CLOUD ROUTE POINT...: the rows of a test that passed, appended to the k8s table.
passed() {
  local table=${GPUPROV_CRASH_TABLE_K8S_SAN:-$BUILD_DIR/crash-table-k8s-san.md} cloud=$1 route=$2 point
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

# converged NAME CLOUD OUTPUT: a re-run's -v OUTPUT ended as an uninterrupted run: exit status
# already checked by the caller, the record ready, one VM, kubectl reaches the node.
converged() {
  [ "$(field "$1" phase)" = ready ]
  [ "$(instances_named "$2" "$1")" -eq 1 ]
  [[ "$3" == *"reusing existing VM $1"* ]]
  expect_cluster_ready "$1"
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
