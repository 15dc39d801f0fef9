#!/usr/bin/env bash
# Builds gpuprov with AddressSanitizer + UndefinedBehaviorSanitizer into a second build directory
# (${GPUPROV_SANITIZE_BUILD_DIR:-build-asan}) and runs the unit, driver-kit, driver and emulator
# tests there (ctest; the e2e bats files stay on the normal build). Every sanitizer report aborts
# its process (-fno-sanitize-recover=all, halt_on_error), so any report fails this script.
# Run alone or from scripts/test.sh (GPUPROV_SANITIZE=0 skips it there).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${GPUPROV_SANITIZE_BUILD_DIR:-build-asan}

# -O1: the tests run at a useful speed and the build stays cheaper than -O2.
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DGPUPROV_SANITIZE=address,undefined >/dev/null
cmake --build "$BUILD_DIR"

# detect_leaks: a leak is a report too. The driver .so files are dlopen'ed and never unloaded
# while the process lives, so their symbols stay readable in reports.
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
# Not run here: the k3s simulator (Python, label fixture) and sdk_compile_errors (it checks that
# bad driver code does not compile: nothing runs).
ctest --test-dir "$BUILD_DIR" --output-on-failure -j2 -LE fixture -E '^sdk_compile_errors$'
