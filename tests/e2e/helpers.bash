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
