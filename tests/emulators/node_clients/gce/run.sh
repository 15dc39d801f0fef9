#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs test_gce_googleapis.js (ctest emulator_gce_googleapis): installs the pinned client from
# package-lock.json with `npm ci` when node_modules is missing or older than the lock file,
# then runs the test with node's test runner. Needs node and npm (Debian: nodejs, npm) and
# the npm registry for the first install; $GPUPROV_EMULATOR names the emulator binary.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "node and npm are needed for this test (apt-get install nodejs npm)" >&2
  exit 1
fi
if [ ! -d node_modules/googleapis ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
exec node --test test_gce_googleapis.js
