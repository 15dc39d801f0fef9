#!/usr/bin/env bats
# Distribution: the SDK and the driver kit install and build a third-party driver that gpuprov
# loads, and CPack splits the build into the core, one package per driver, the umbrella and the
# SDK.

load helpers

@test "a third-party driver builds against the installed SDK and gpuprov loads it" {
  prefix="$BATS_TEST_TMPDIR/prefix"
  cmake --install "$BUILD_DIR" --component sdk --prefix "$prefix" >/dev/null
  [ -f "$prefix/include/gpuprov/driver_abi.h" ]
  [ -f "$prefix/include/gpuprov/sdk.hpp" ]
  # The driver kit comes with the SDK (gpuprov::driver_kit); the example links it.
  [ -f "$prefix/include/gpuprov/driver_kit/driver_kit.h" ]
  [ -f "$prefix/lib/libgpuprov_driver_kit.a" ] || [ -f "$prefix/lib64/libgpuprov_driver_kit.a" ]
  out="$BATS_TEST_TMPDIR/out"
  cmake -S "$REPO_ROOT/examples/external-driver" -B "$out" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
  cmake --build "$out" >/dev/null
  [ -f "$out/libgpuprov-driver-hellocloud.so" ]
  # Only the entry symbol is exported.
  run bash -c "nm -D --defined-only '$out/libgpuprov-driver-hellocloud.so' | grep -c ' T '"
  [ "$output" = "1" ]
  export GPUPROV_HOME="$BATS_TEST_TMPDIR/home"
  run "$GPUPROV" --driver-path "$out" drivers
  echo "$output"
  [[ "$output" == *"hellocloud  0.1.0  ABI 1.0"* ]]
  run "$GPUPROV" --driver-path "$out" provision --name hello --cloud hellocloud
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"hello cloud is full"* ]]
  [ ! -e "$GPUPROV_HOME/state/hello.json" ]
}

@test "cpack builds the split Debian packages with exact-version dependencies" {
  command -v dpkg-deb >/dev/null || skip "dpkg-deb not available"
  (cd "$BUILD_DIR" && cpack -G DEB -B "$BATS_TEST_TMPDIR/debs" >/dev/null)
  debs="$BATS_TEST_TMPDIR/debs"
  core=$(ls "$debs"/gpuprov_*.deb)
  drv=$(ls "$debs"/gpuprov-driver-docker_*.deb)
  all=$(ls "$debs"/gpuprov-drivers-all_*.deb)
  sdk=$(ls "$debs"/gpuprov-sdk-dev_*.deb)
  dpkg-deb -c "$core" | grep -q './usr/bin/gpuprov$'
  ! dpkg-deb -c "$core" | grep -q 'libgpuprov-driver-'
  dpkg-deb -c "$drv" | grep -q './usr/lib/.*gpuprov/drivers/libgpuprov-driver-docker.so$'
  version=$(dpkg-deb -f "$core" Version)
  [ "$(dpkg-deb -f "$drv" Depends)" = "gpuprov (= $version)" ]
  dpkg-deb -f "$all" Depends | grep -q "gpuprov-driver-docker (= $version)"
  dpkg-deb -c "$sdk" | grep -q 'include/gpuprov/driver_abi.h$'
  dpkg-deb -c "$sdk" | grep -q 'include/gpuprov/driver_kit/driver_kit.h$'
  dpkg-deb -c "$sdk" | grep -q 'libgpuprov_driver_kit.a$'
  dpkg-deb -f "$sdk" Depends | grep -q 'libyaml-cpp-dev'
  # gRPC is the nebius driver's own: its package needs the runtime, the core's does not.
  nebius=$(ls "$debs"/gpuprov-driver-nebius_*.deb)
  [ "$(dpkg-deb -f "$nebius" Depends)" = "gpuprov (= $version), libgrpc++1.51, libgrpc29, libprotobuf32" ]
  # The packaged gpuprov has no test crash points (GPUPROV_TEST_HOOKS): it ignores the variable
  # that the build tree's gpuprov reads (and refuses when it names no point).
  dpkg-deb -x "$core" "$BATS_TEST_TMPDIR/core-root"
  GPUPROV_TEST_CRASH_AT=no-such-point "$BATS_TEST_TMPDIR/core-root/usr/bin/gpuprov" version
  if [ -x "$BUILD_DIR/installed-bin/gpuprov" ]; then # a GPUPROV_TEST_HOOKS build
    run env GPUPROV_TEST_CRASH_AT=no-such-point "$GPUPROV" version
    [ "$status" -eq 2 ]
    [[ "$output" == *"GPUPROV_TEST_CRASH_AT=no-such-point is not a crash point"* ]]
  fi
  core_depends=$(dpkg-deb -f "$core" Depends)
  [[ "$core_depends" != *grpc* && "$core_depends" != *protobuf* ]]
  dpkg-deb -f "$all" Depends | grep -q "gpuprov-driver-nebius (= $version)"
}
