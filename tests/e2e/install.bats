#!/usr/bin/env bats
# Installing from the tree (issue 16, item 1): `cmake --install` into a temporary prefix puts
# gpuprov in <prefix>/bin, every driver in <prefix>/<libdir>/gpuprov/drivers (found relative to
# the executable, wherever the prefix is), and the examples under the doc folder.

load helpers

setup_file() {
  export PREFIX="$BATS_FILE_TMPDIR/prefix"
  cmake --install "$BUILD_DIR" --prefix "$PREFIX" >"$BATS_FILE_TMPDIR/install.log"
}

@test "cmake --install puts gpuprov in <prefix>/bin and it finds its drivers next to itself" {
  [ -x "$PREFIX/bin/gpuprov" ]
  local drivers
  drivers=$(find "$PREFIX" -path '*/gpuprov/drivers/libgpuprov-driver-*.so' | wc -l)
  [ "$drivers" -ge 10 ]
  # A fresh home, no --driver-path, no GPUPROV_DRIVER_PATH: only the executable's own place.
  export GPUPROV_HOME="$BATS_TEST_TMPDIR/home"
  unset GPUPROV_DRIVER_PATH
  run "$PREFIX/bin/gpuprov" drivers
  echo "$output"
  [ "$status" -eq 0 ]
  for cloud in aws gcp digitalocean hyperstack lambda massedcompute nebius primeintellect verda docker; do
    grep -qE "file: $PREFIX/lib[^ ]*/gpuprov/drivers/libgpuprov-driver-$cloud.so \(next to gpuprov\)" <<<"$output"
  done
  [[ "$output" != *"$BUILD_DIR"* ]]
  [[ "$output" != *BROKEN* ]]
  run "$PREFIX/bin/gpuprov" version
  [ "$status" -eq 0 ]
}

@test "the install carries the examples and the default config in the doc folder" {
  [ -f "$PREFIX/share/doc/gpuprov/examples/gpu-test.yaml" ]
  [ -f "$PREFIX/share/doc/gpuprov/examples/config.toml" ]
  [ -f "$PREFIX/share/doc/gpuprov/examples/example-spec.yaml" ]
  # The man page and completion files go to their FHS places when the build made them.
  if [ -f "$BUILD_DIR/share/man/man1/gpuprov.1" ]; then
    [ -f "$PREFIX/share/man/man1/gpuprov.1" ]
  fi
  if [ -f "$BUILD_DIR/share/bash-completion/completions/gpuprov" ]; then
    [ -f "$PREFIX/share/bash-completion/completions/gpuprov" ]
  fi
}

@test "a copy of the installed tree moved elsewhere still finds its drivers" {
  cp -a "$PREFIX" "$BATS_TEST_TMPDIR/moved"
  export GPUPROV_HOME="$BATS_TEST_TMPDIR/home"
  run "$BATS_TEST_TMPDIR/moved/bin/gpuprov" drivers digitalocean
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"file:          $BATS_TEST_TMPDIR/moved/lib"*"/gpuprov/drivers/libgpuprov-driver-digitalocean.so (next to gpuprov)"* ]]
}

@test "a second install's drivers are shadowed, listed from their paths, and never loaded" {
  # A user with the Debian package and a ~/.local install: two copies of every driver on the
  # search path. Loading both copies of the gRPC (Nebius) driver into one process aborts it in
  # protobuf ("File already exists in database"), so a shadowed copy must never be loaded.
  cp -a "$PREFIX" "$BATS_TEST_TMPDIR/second"
  second_drivers=$(dirname "$(find "$BATS_TEST_TMPDIR/second" -name libgpuprov-driver-nebius.so)")
  export GPUPROV_HOME="$BATS_TEST_TMPDIR/home"
  unset GPUPROV_DRIVER_PATH
  run "$PREFIX/bin/gpuprov" --driver-path "$second_drivers" drivers
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" != *BROKEN* ]]
  [ "$(grep -c 'shadowed by' <<<"$output")" -ge 10 ]
  grep -q "nebius  shadowed by $second_drivers/libgpuprov-driver-nebius.so" <<<"$output"
  # Every command that opens every driver (check asks each cloud) runs with both copies there.
  run "$PREFIX/bin/gpuprov" --driver-path "$second_drivers" check --output json
  echo "$output"
  [[ "$output" != *"File already exists in database"* ]]
  [ "$status" -le 1 ]
  [[ "$output" == *'"cloud": "nebius"'* ]]
}
