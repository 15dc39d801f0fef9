#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs test_gce_googleapis.js (ctest emulator_gce_googleapis) with node's test runner; the
# pinned client (package-lock.json) is installed by scripts/setup.sh (`npm ci` here).
# $GPUPROV_EMULATOR names the emulator binary.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "node and npm are needed for this test (apt-get install nodejs npm)" >&2
  exit 1
fi
if [ ! -d node_modules/googleapis ]; then
  echo "googleapis is not installed: run scripts/setup.sh (or npm ci in $PWD)" >&2
  exit 1
fi
exec node --test test_gce_googleapis.js
