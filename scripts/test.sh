#!/usr/bin/env bash
# Runs every test: set up and build, then unit and driver tests (ctest), the installer and
# fixture tests (bats, shellcheck) and the end-to-end CLI tests (bats, against real Docker).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${GPUPROV_BUILD_DIR:-build}
export GPUPROV_BUILD_DIR="$BUILD_DIR"

echo "==> shellcheck" >&2
mapfile -t shell_files < <(git ls-files '*.sh' '*.bash' 'tests/fixtures/testvm/overlay/usr/bin/*' .ci/run)
shellcheck "${shell_files[@]}"

echo "==> ctest" >&2
ctest --test-dir "$BUILD_DIR" --output-on-failure -j2

echo "==> bats" >&2
mapfile -t bats_files < <(git ls-files '*.bats')
bats --print-output-on-failure "${bats_files[@]}"
