#!/usr/bin/env bash
# The main job on the built-in default: set up, build, install gpuprov into a prefix on PATH,
# then provision a VM named "demo" on the Docker test cloud and print how to get in.
#
# The Docker test cloud is chosen here, by --cloud docker on the provision line below: outside
# this demo gpuprov never falls back to it (`gpuprov check` shows the usable clouds).
# GPUPROV_PREFIX overrides the prefix (default /usr/local as root, else ~/.local).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${GPUPROV_BUILD_DIR:-build}
if [[ -n "${GPUPROV_PREFIX:-}" ]]; then
  prefix=$GPUPROV_PREFIX
elif [[ $(id -u) -eq 0 ]]; then
  prefix=/usr/local
else
  prefix=$HOME/.local
fi
echo "demo: installing gpuprov into $prefix (cmake --install $BUILD_DIR --prefix $prefix)" >&2
cmake --install "$BUILD_DIR" --prefix "$prefix" >/dev/null
gpuprov="$prefix/bin/gpuprov"
"$gpuprov" provision --name "${1:-demo}" --cloud docker
# The hints above say `gpuprov ...`: true only when this gpuprov is the one on PATH.
if [[ "$(command -v gpuprov || true)" != "$gpuprov" ]]; then
  echo "demo: $gpuprov is not the gpuprov on your PATH; for the commands above run" >&2
  echo "demo:   export PATH=\"$prefix/bin:\$PATH\"" >&2
fi
