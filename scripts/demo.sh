#!/usr/bin/env bash
# The main job on the built-in default: set up, build, install gpuprov into a prefix on PATH,
# then provision a VM named "demo" on the Docker test cloud and print how to get in.
#
# The Docker test cloud is chosen here, by --cloud docker on the provision line below: outside
# this demo gpuprov never falls back to it (`gpuprov check` shows the usable clouds).
# GPUPROV_PREFIX overrides the prefix (default /usr/local as root, else ~/.local).
set -euo pipefail
cd "$(dirname "$0")/.."
demo_start=$(date +%s)
# since START: seconds from START (date +%s) to now.
since() { echo "$(( $(date +%s) - $1 )) s"; }
# Only what is installed and run here is built (not the tests): setup.sh --installables.
bash scripts/setup.sh --installables
echo "==> setup (packages, dockerd, test image, build) took $(since "$demo_start")" >&2
BUILD_DIR=${GPUPROV_BUILD_DIR:-build}
if [[ -n "${GPUPROV_PREFIX:-}" ]]; then
  prefix=$GPUPROV_PREFIX
elif [[ $(id -u) -eq 0 ]]; then
  prefix=/usr/local
else
  prefix=$HOME/.local
fi
echo "demo: installing gpuprov into $prefix (cmake --install $BUILD_DIR --prefix $prefix)" >&2
step_start=$(date +%s)
cmake --install "$BUILD_DIR" --prefix "$prefix" >/dev/null
echo "==> install took $(since "$step_start")" >&2
gpuprov="$prefix/bin/gpuprov"
step_start=$(date +%s)
"$gpuprov" provision --name "${1:-demo}" --cloud docker
echo "==> provision took $(since "$step_start"); the whole demo $(since "$demo_start")" >&2
# The hints above say `gpuprov ...`: true only when this gpuprov is the one on PATH.
if [[ "$(command -v gpuprov || true)" != "$gpuprov" ]]; then
  echo "demo: $gpuprov is not the gpuprov on your PATH; for the commands above run" >&2
  echo "demo:   export PATH=\"$prefix/bin:\$PATH\"" >&2
fi
