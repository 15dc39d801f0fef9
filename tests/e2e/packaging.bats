#!/usr/bin/env bats
# Distribution: the SDK and the driver kit install and build a third-party driver, and its tests
# on the SDK's fake host (gpuprov/testing.hpp), that gpuprov loads (CMake with a version check,
# and pkg-config); CPack splits the build into the core, one
# package per driver, the umbrella and the SDK, with dependencies computed from what each ELF
# file links; lintian finds no error in any package; and apt installs the CLI with the AWS
# driver in a clean Debian bookworm container, resolving the dependencies from the packages.

load helpers

setup_file() {
  # One cpack run for the whole file (it installs every component, strips and runs
  # dpkg-shlibdeps on each package).
  command -v dpkg-shlibdeps >/dev/null || {
    echo "dpkg-shlibdeps not found: install dpkg-dev (scripts/setup.sh does)" >&2
    return 1
  }
  export DEBS="$BATS_FILE_TMPDIR/debs"
  if ! (cd "$BUILD_DIR" && cpack -G DEB -B "$DEBS") >"$BATS_FILE_TMPDIR/cpack.log" 2>&1; then
    cat "$BATS_FILE_TMPDIR/cpack.log" >&2
    return 1
  fi
}

# deb NAME: the path of package NAME's .deb.
deb() {
  local f
  f=$(ls "$DEBS/$1"_*.deb)
  [ -f "$f" ] || { echo "no $1 package in $DEBS" >&2; return 1; }
  printf '%s\n' "$f"
}

# depends_names DEB: the package names of DEB's Depends, one a line, sorted (versions dropped,
# every alternative listed).
depends_names() {
  dpkg-deb -f "$1" Depends | tr ',|' '\n' | sed -e 's/(.*)//' -e 's/:any//' -e 's/ //g' |
    grep -v '^$' | LC_ALL=C sort -u
}

# needed_packages ELF: the Debian packages (installed on this machine) that provide the
# libraries ELF names as NEEDED, one a line, sorted.
needed_packages() {
  local soname path owner
  objdump -p "$1" | awk '$1 == "NEEDED" { print $2 }' | while read -r soname; do
    path=$(ldconfig -p | awk -v s="$soname" '$1 == s && $0 ~ /x86-64|x86_64/ { print $NF; exit }')
    [ -n "$path" ] || { echo "NEEDED $soname of $1 not found by ldconfig" >&2; return 1; }
    # dpkg knows a library by the path its package ships (/lib or /usr/lib: usrmerge).
    owner=$(dpkg -S "$path" "$(readlink -f "$path")" "${path/#\/lib\//\/usr\/lib\/}" \
      "${path/#\/usr\/lib\//\/lib\/}" 2>/dev/null | head -1 | cut -d: -f1)
    [ -n "$owner" ] || { echo "no installed package owns $path ($soname)" >&2; return 1; }
    echo "$owner"
  done | LC_ALL=C sort -u
}

@test "a third-party driver builds against the installed SDK (CMake and pkg-config) and gpuprov loads it" {
  prefix="$BATS_TEST_TMPDIR/prefix"
  cmake --install "$BUILD_DIR" --component sdk --prefix "$prefix" >/dev/null
  [ -f "$prefix/include/gpuprov/driver_abi.h" ]
  [ -f "$prefix/include/gpuprov/sdk.hpp" ]
  # The fake host for a driver's own tests (the tree's driver tests use the same header).
  [ -f "$prefix/include/gpuprov/testing.hpp" ]
  # The driver kit comes with the SDK (gpuprov::driver_kit); the example links it.
  [ -f "$prefix/include/gpuprov/driver_kit/driver_kit.h" ]
  [ -f "$prefix/lib/libgpuprov_driver_kit.a" ] || [ -f "$prefix/lib64/libgpuprov_driver_kit.a" ]
  out="$BATS_TEST_TMPDIR/out"
  cmake -S "$REPO_ROOT/examples/external-driver" -B "$out" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_CXX_FLAGS="-Wall -Wextra -Werror" >/dev/null
  # The SDK came from the install, not from the source tree.
  grep -qx "gpuprov-sdk_DIR:PATH=$prefix/lib/cmake/gpuprov-sdk" "$out/CMakeCache.txt"
  cmake --build "$out" >/dev/null
  [ -f "$out/libgpuprov-driver-hellocloud.so" ]
  # The example's own tests (hello_cloud_test.cc, on gpuprov/testing.hpp) pass.
  run ctest --test-dir "$out" --output-on-failure
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"100% tests passed"* ]]
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

  # find_package with a version: 0.1 is found (the version file is installed), 0.2 and 1 are
  # refused (before 1.0 each minor version is its own API).
  for want in 0.1 0.2 1.0; do
    proj="$BATS_TEST_TMPDIR/find-$want"
    mkdir -p "$proj"
    cat >"$proj/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.25)
project(find_sdk LANGUAGES CXX)
find_package(gpuprov-sdk $want REQUIRED)
message(STATUS "gpuprov-sdk version \${gpuprov-sdk_VERSION}")
EOF
    run cmake -S "$proj" -B "$proj/build" -DCMAKE_PREFIX_PATH="$prefix"
    echo "$want: $output"
    if [ "$want" = 0.1 ]; then
      [ "$status" -eq 0 ]
      [[ "$output" == *"gpuprov-sdk version 0.1.0"* ]]
    else
      [ "$status" -ne 0 ]
      [[ "$output" == *"gpuprov-sdk-config.cmake, version: 0.1.0"* ]]
    fi
  done

  # pkg-config: the module's version, and the same example driver built from its flags alone.
  export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
  [ "$(pkg-config --modversion gpuprov-sdk)" = "0.1.0" ]
  run pkg-config --cflags gpuprov-sdk
  [[ "$output" == *"-I$prefix/lib/pkgconfig/../../include/gpuprov/driver_kit"* ]]
  pcout="$BATS_TEST_TMPDIR/pc"
  mkdir -p "$pcout"
  # shellcheck disable=SC2046  # pkg-config prints separate words
  g++ -std=c++20 -shared -fPIC -fvisibility=hidden -Wl,--no-undefined \
    -o "$pcout/libgpuprov-driver-hellocloud.so" "$REPO_ROOT/examples/external-driver/hello_cloud.cc" \
    $(pkg-config --cflags --libs gpuprov-sdk)
  run "$GPUPROV" --driver-path "$pcout" drivers
  echo "$output"
  [[ "$output" == *"hellocloud  0.1.0  ABI 1.0"* ]]
}

@test "cpack builds the split Debian packages with computed dependencies" {
  core=$(deb gpuprov)
  drv=$(deb gpuprov-driver-docker)
  aws=$(deb gpuprov-driver-aws)
  all=$(deb gpuprov-drivers-all)
  sdk=$(deb gpuprov-sdk-dev)
  nebius=$(deb gpuprov-driver-nebius)
  version=$(dpkg-deb -f "$core" Version)
  [ "$version" = "0.1.0" ]

  # The core: the CLI, its remote module (core/remote.h), its man page (compressed),
  # completions, examples, copyright, changelog.
  core_files=$(dpkg-deb -c "$core" | awk '{ print $6 }')
  for f in ./usr/bin/gpuprov ./usr/lib/gpuprov/libgpuprov-remote.so ./usr/share/man/man1/gpuprov.1.gz \
    ./usr/share/bash-completion/completions/gpuprov ./usr/share/zsh/vendor-completions/_gpuprov \
    ./usr/share/fish/vendor_completions.d/gpuprov.fish \
    ./usr/share/doc/gpuprov/examples/config.toml ./usr/share/doc/gpuprov/examples/example-spec.yaml \
    ./usr/share/doc/gpuprov/copyright ./usr/share/doc/gpuprov/changelog.gz; do
    grep -qx -- "$f" <<<"$core_files" || { echo "core package lacks $f"; false; }
  done
  # (`! cmd || false`: bats fails a test on a negated command only through the `|| false`.)
  ! grep -q 'libgpuprov-driver-' <<<"$core_files" || false
  ! grep -q 'share/man/man1/gpuprov.1$' <<<"$core_files" || false

  # Each driver: its .so, its README, copyright and changelog.
  for d in "$DEBS"/gpuprov-driver-*.deb; do
    name=$(dpkg-deb -f "$d" Package)
    cloud=${name#gpuprov-driver-}
    files=$(dpkg-deb -c "$d" | awk '{ print $6 }')
    for f in "./usr/lib/gpuprov/drivers/libgpuprov-driver-$cloud.so" \
      "./usr/share/doc/$name/README.md" "./usr/share/doc/$name/copyright" \
      "./usr/share/doc/$name/changelog.gz"; do
      grep -qx -- "$f" <<<"$files" || { echo "$name lacks $f"; false; }
    done
  done

  # Computed dependencies: the core depends on exactly the packages of the libraries gpuprov
  # and its remote module link, plus openssh-client (run, not linked); a driver on the packages
  # of what its .so links plus gpuprov at this version.
  dpkg-deb -x "$core" "$BATS_TEST_TMPDIR/core-root"
  expected=$( (needed_packages "$BATS_TEST_TMPDIR/core-root/usr/bin/gpuprov"
    needed_packages "$BATS_TEST_TMPDIR/core-root/usr/lib/gpuprov/libgpuprov-remote.so"
    echo openssh-client) | LC_ALL=C sort -u)
  # The executable itself links neither libssh nor OpenSSL: the module brings them.
  ! objdump -p "$BATS_TEST_TMPDIR/core-root/usr/bin/gpuprov" |
    grep -E 'NEEDED +lib(ssh|ssl|crypto)\.' || false
  objdump -p "$BATS_TEST_TMPDIR/core-root/usr/lib/gpuprov/libgpuprov-remote.so" |
    grep -qE 'NEEDED +libssh\.'
  diff <(depends_names "$core") <(echo "$expected")
  for d in "$aws" "$nebius" "$drv"; do
    root="$BATS_TEST_TMPDIR/root-$(dpkg-deb -f "$d" Package)"
    dpkg-deb -x "$d" "$root"
    expected=$( (needed_packages "$root"/usr/lib/gpuprov/drivers/*.so; echo gpuprov) | LC_ALL=C sort -u)
    diff <(depends_names "$d") <(echo "$expected")
    dpkg-deb -f "$d" Depends | grep -q "gpuprov (= $version)"
  done
  # gRPC is the nebius driver's own: its package needs the runtime, no other package does.
  depends_names "$nebius" | grep -qx 'libgrpc++1.51'
  depends_names "$nebius" | grep -qx 'libprotobuf32'
  for d in "$DEBS"/*.deb; do
    [ "$d" = "$nebius" ] && continue
    ! depends_names "$d" | grep -E 'grpc|protobuf' || false
  done

  # The umbrella: every real cloud's driver at this version, not the Docker test driver.
  for d in "$DEBS"/gpuprov-driver-*.deb; do
    name=$(dpkg-deb -f "$d" Package)
    if [ "$name" = gpuprov-driver-docker ]; then
      ! dpkg-deb -f "$all" Depends | grep -q "$name" || false
    else
      dpkg-deb -f "$all" Depends | grep -q "$name (= $version)"
    fi
  done
  [ "$(dpkg-deb -f "$all" Architecture)" = all ]

  # The SDK: headers, the kit, the CMake package with its version file, the pkg-config module.
  sdk_files=$(dpkg-deb -c "$sdk" | awk '{ print $6 }')
  for f in ./usr/include/gpuprov/driver_abi.h ./usr/include/gpuprov/testing.hpp \
    ./usr/include/gpuprov/driver_kit/driver_kit.h \
    ./usr/lib/libgpuprov_driver_kit.a ./usr/lib/cmake/gpuprov-sdk/gpuprov-sdk-config.cmake \
    ./usr/lib/cmake/gpuprov-sdk/gpuprov-sdk-config-version.cmake \
    ./usr/lib/pkgconfig/gpuprov-sdk.pc ./usr/share/doc/gpuprov-sdk-dev/copyright; do
    grep -qx -- "$f" <<<"$sdk_files" || { echo "gpuprov-sdk-dev lacks $f"; false; }
  done
  depends_names "$sdk" | grep -qx 'libyaml-cpp-dev'
  depends_names "$sdk" | grep -qx 'libzopfli-dev'
  # zopfli gzips boot scripts in the host and in the kit inside each driver (zopfli_gzip.h).
  depends_names "$core" | grep -qx 'libzopfli1'
  depends_names "$aws" | grep -qx 'libzopfli1'

  # The packaged gpuprov has no test crash points (GPUPROV_TEST_HOOKS): it ignores the variable
  # that the build tree's gpuprov reads (and refuses when it names no point).
  GPUPROV_TEST_CRASH_AT=no-such-point "$BATS_TEST_TMPDIR/core-root/usr/bin/gpuprov" version
  if [ -x "$BUILD_DIR/installed-bin/gpuprov" ]; then # a GPUPROV_TEST_HOOKS build
    run env GPUPROV_TEST_CRASH_AT=no-such-point "$GPUPROV" version
    [ "$status" -eq 2 ]
    [[ "$output" == *"GPUPROV_TEST_CRASH_AT=no-such-point is not a crash point"* ]]
  fi
}

@test "lintian reports no error on any package" {
  command -v lintian >/dev/null || {
    echo "lintian not found: install it (scripts/setup.sh does)"
    false
  }
  run lintian --tag-display-limit 0 "$DEBS"/*.deb
  echo "$output"
  ! grep -q '^E: ' <<<"$output" || false
  # Lintian's own failures (not findings) exit 2 or more.
  [ "$status" -le 1 ]
}

@test "apt installs the CLI and the AWS driver in a clean bookworm container, resolving dependencies from the packages" {
  core=$(deb gpuprov)
  aws=$(deb gpuprov-driver-aws)
  # The Debian packages the two depend on (not ours): the clean image's /repo holds them and
  # whatever they need, downloaded once when the image is built.
  mapfile -t needs < <( (depends_names "$core"; depends_names "$aws") | grep -v '^gpuprov$' | LC_ALL=C sort -u)
  [ "${#needs[@]}" -gt 3 ]
  image=$(bash "$REPO_ROOT/packaging/clean-bookworm.sh" "${needs[@]}" | tail -1)
  [ -n "$image" ]
  name="gpuprov-packaging-test-$$"
  run docker run --rm --name "$name" --network none -v "$DEBS:/debs:ro" "$image" bash -c '
    set -eu
    for tool in gcc cc g++ c++ cmake make; do
      if command -v "$tool" >/dev/null; then echo "clean image has $tool"; exit 9; fi
    done
    # /repo is the only source.
    grep -rh "^deb" /etc/apt/sources.list /etc/apt/sources.list.d 2>/dev/null | sed "s/^/source: /"
    apt-get update -q
    cd /debs
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q ./gpuprov_*.deb ./gpuprov-driver-aws_*.deb
    dpkg-query -W -f="installed \${Package} \${Version}\n" gpuprov gpuprov-driver-aws
    test -f /usr/share/doc/gpuprov-driver-aws/README.md
    test -f /usr/share/man/man1/gpuprov.1.gz
    echo "== drivers"
    gpuprov drivers
    echo "== check"
    set +e
    gpuprov check --cloud aws
    echo "check exit $?"
    echo "== ssh"
    gpuprov ssh no-such-vm -- true
    echo "ssh exit $?"'
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(grep '^source: ' <<<"$output")" = "source: deb [trusted=yes] file:/repo ./" ]
  [[ "$output" == *"installed gpuprov 0.1.0"* ]]
  [[ "$output" == *"installed gpuprov-driver-aws 0.1.0"* ]]
  drivers=$(sed -n '/^== drivers/,/^== check/p' <<<"$output")
  [[ "$drivers" == *"aws  0.1.0"* ]]
  [[ "$drivers" != *docker* ]]
  check=$(sed -n '/^== check/,/^== ssh/p' <<<"$output")
  # No credentials in the container: the check runs the driver and fails with its fix.
  [[ "$check" == *"check exit 1"* ]]
  [[ "$check" == *"no AWS credentials found"* ]]
  [[ "$check" != *"cannot open shared object"* ]]
  # `gpuprov ssh` loads the remote module (libssh, OpenSSL) from the package, then finds no VM.
  ssh=$(sed -n '/^== ssh/,$p' <<<"$output")
  [[ "$ssh" == *"no VM named 'no-such-vm'"* ]]
  [[ "$ssh" == *"ssh exit 2"* ]]
}
