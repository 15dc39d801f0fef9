#!/usr/bin/env bats
# Crash points on the Docker test cloud (real test VMs: systemd, OpenSSH; no emulator): the
# host's points up to the pinned SSH host key and those of `down`, as tests/e2e/crash_points.bats
# runs them on the emulated clouds (tests/e2e/crash_points.bash). The census is this file's
# containers and the lines of gpuprov's known_hosts. The table goes to
# $GPUPROV_CRASH_TABLE_DOCKER (default <build dir>/crash-table-docker.md). It makes docker-cloud containers, so
# scripts/test.sh runs it with the other files that count them. Its rows run side by side.

load helpers
load crash_points

setup_file() {
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  printf '[defaults.timeouts]\nssh_wait_seconds = 180\n' >"$GPUPROV_HOME/config.toml"
  export CRASH_ROWS="$BATS_FILE_TMPDIR/rows.tsv" CRASH_LOGS="$BATS_FILE_TMPDIR/logs"
  export CRASH_PREFIX="cpd$$"
  mkdir -p "$CRASH_LOGS"
  : >"$CRASH_ROWS"
}

teardown_file() {
  docker ps -a --filter label=io.gpuprov.managed=1 --format '{{.Label "io.gpuprov.name"}}' |
    grep "^$CRASH_PREFIX" | while read -r name; do remove_vm_containers "$name"; done
}

setup() {
  skip_without_hooks
}

@test "docker cloud: crash at each host point, re-run converges, down leaves nothing" {
  declare -gA CLOUD_ARGS=([docker]="")
  # Every host point a --no-k8s run reaches (the cluster's: crash_points_k8s.bats), the rows
  # four at a time (each in its own GPUPROV_HOME with its own names).
  crash_matrix_side_by_side docker 4 intent-recorded vm-created vm-running host-key-pinned \
    down-deleting-recorded down-vm-deleted down-host-key-forgotten down-kubeconfig-removed
  write_table "${GPUPROV_CRASH_TABLE_DOCKER:-$BUILD_DIR/crash-table-docker.md}"
  cat "${GPUPROV_CRASH_TABLE_DOCKER:-$BUILD_DIR/crash-table-docker.md}"
  [ -s "$CRASH_ROWS" ]
  [ -z "$(grep -v $'\tconverged\t' "$CRASH_ROWS")" ]
}
