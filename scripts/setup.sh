#!/usr/bin/env bash
# Installs what gpuprov needs to build and test on Debian bookworm, starts dockerd when the
# Docker socket does not answer, builds the test VM image (cached by its recipe hash) and
# configures + builds gpuprov into ${GPUPROV_BUILD_DIR:-build}. Safe to run again.
#
# Usage: setup.sh [--installables]
#   --installables  build only what `cmake --install` installs (gpuprov, its remote module, the
#                   drivers, the driver kit, man page and completions): what scripts/demo.sh
#                   runs, not the tests. Default: everything.
# GPUPROV_WERROR=ON turns the project's compiler warnings into errors (CI sets it).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '==> %s\n' "$*" >&2; }
# since START: seconds from START (date +%s) to now.
since() { echo "$(( $(date +%s) - $1 )) s"; }

build_target=all
case "${1:-}" in
  --installables) build_target=gpuprov-installables ;;
  "") ;;
  *) echo "usage: $0 [--installables]" >&2; exit 2 ;;
esac

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libpoco-dev libssh-dev libyaml-cpp-dev libtoml11-dev libboost-dev libzopfli-dev
  libgtest-dev libgmock-dev ccache shfmt
  docker.io mmdebstrap openssh-client bats shellcheck kubectl nftables util-linux
  python3 python3-libcloud python3-digitalocean hyperfine awscli
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler python3-grpcio python3-protobuf openssl
  clang libclang-rt-14-dev
  bash-completion zsh fish man-db python3-yaml
  dpkg-dev lintian gpg
)

step_start=$(date +%s)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing ${missing[*]}"
  as_root apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The Node clients of the emulator tests (tests/emulators/node_clients/*: googleapis,
# dots-wrapper), pinned by their package-lock.json; with the machine's node and npm, else
# Debian's. Not for the demo, which runs no test.
if [ "$build_target" = all ]; then
  if ! command -v npm >/dev/null 2>&1; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nodejs npm
  fi
  for dir in tests/emulators/node_clients/*/; do
    if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
      log "npm ci in $dir"
      (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
    fi
  done
fi
log "packages took $(since "$step_start")"

step_start=$(date +%s)
if ! docker info >/dev/null 2>&1; then
  log "starting dockerd"
  as_root sh -c 'nohup dockerd >/var/log/gpuprov-dockerd.log 2>&1 &'
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  docker info >/dev/null 2>&1 || { echo "dockerd did not start; see /var/log/gpuprov-dockerd.log" >&2; exit 1; }
  log "dockerd took $(since "$step_start")"
fi

# The test VM image (mmdebstrap: mostly downloads and unpacking) builds while gpuprov compiles
# (CPU): on a fresh machine the two overlap instead of adding up. An image already built for this
# recipe is found at once.
log "test VM image (in the background, beside the build)"
image_log=$(mktemp)
step_start=$(date +%s)
( rc=0
  bash tests/fixtures/testvm/build-image.sh >"$image_log" 2>&1 || rc=$?
  log "test VM image took $(since "$step_start") (beside the build)"
  exit "$rc" ) &
image_pid=$!

BUILD_DIR=${GPUPROV_BUILD_DIR:-build}
log "building gpuprov in $BUILD_DIR (target: $build_target)"
# Optimised as shipped, with line tables only (-g1): backtraces still name file and line, and
# the compile takes about 30 % less CPU than with full debug info (config.cc: 14.5 s against
# 21.2 s), which is most of a fresh machine's build.
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
  -DGPUPROV_FUZZ_REPLAY="${GPUPROV_FUZZ_REPLAY:-ON}" -DGPUPROV_WERROR="${GPUPROV_WERROR:-OFF}" >/dev/null
build_rc=0
cmake --build "$BUILD_DIR" --target "$build_target" || build_rc=$?
log "build ($build_target) took $(since "$step_start")"
image_rc=0
wait "$image_pid" || image_rc=$?
if [ "$image_rc" -ne 0 ]; then
  cat "$image_log" >&2
  echo "the test VM image did not build (tests/fixtures/testvm/build-image.sh, status $image_rc)" >&2
fi
rm -f "$image_log"
[ "$build_rc" -eq 0 ] && [ "$image_rc" -eq 0 ]
