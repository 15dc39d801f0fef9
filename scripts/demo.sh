#!/usr/bin/env bash
# The main job on the built-in default: set up, build, then provision a VM named "demo" on the
# Docker test cloud and print how to get in.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${GPUPROV_BUILD_DIR:-build}
"$BUILD_DIR/bin/gpuprov" provision --name "${1:-demo}"
