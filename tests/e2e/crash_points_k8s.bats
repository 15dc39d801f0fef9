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
  rm -f "${GPUPROV_CRASH_TABLE_K8S:-$BUILD_DIR/crash-table-k8s.md}"
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
  local table=${GPUPROV_CRASH_TABLE_K8S:-$BUILD_DIR/crash-table-k8s.md} cloud=$1 route=$2 point
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
