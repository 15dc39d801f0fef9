#!/usr/bin/env bats
# The k3s download path with no binary pre-staged: the node fetches the release asset from a
# mirror (--k3s-download-url, here a server on 127.0.0.1 started by the test) and installs it
# only when its sha256 matches; a wrong hash, a download cut short and a server that stalls all
# fail in bounded time, install nothing and say why in the status marker.

load helpers

setup() {
  common_setup
  rm "$SANDBOX/usr/local/bin/k3s" # a fresh machine: no k3s anywhere
  RELEASES="$BATS_TEST_TMPDIR/releases"
  REQUESTS="$BATS_TEST_TMPDIR/requests.log"
  : >"$REQUESTS"
  # The "release": the fake k3s reporting the pinned version, at <tag>/k3s and <tag>/k3s-arm64.
  install -D -m 0755 "$FAKES/k3s" "$RELEASES/$PINNED_K3S/k3s"
  install -D -m 0755 "$FAKES/k3s" "$RELEASES/$PINNED_K3S/k3s-arm64"
  RELEASE_SHA="$(sha256sum "$FAKES/k3s" | cut -d' ' -f1)"
  PINNED_AMD64="$(sed -n 's/^readonly K3S_SHA256_AMD64="\(.*\)"$/\1/p' "$INSTALLER")"
  PINNED_ARM64="$(sed -n 's/^readonly K3S_SHA256_ARM64="\(.*\)"$/\1/p' "$INSTALLER")"
}

teardown() { common_teardown; }

# serve_release MODE: release_server.py in MODE (ok, truncate, stall); sets MIRROR.
serve_release() {
  start_port_server "$REAL_PYTHON" -u "$BATS_TEST_DIRNAME/release_server.py" "$RELEASES" "$1"
  MIRROR="http://127.0.0.1:$SERVER_PORT"
}

# requests: how many times the asset was asked for.
requests() { grep -c "^GET /${PINNED_K3S//+/%2B}/k3s" "$REQUESTS" || true; }

# nothing_installed: no k3s binary, no leftover download, no config, no unit, k3s never started.
nothing_installed() {
  [ ! -e "$SANDBOX/usr/local/bin/k3s" ] || { echo "k3s installed" >&2; return 1; }
  [ -z "$(find "$SANDBOX/usr/local/bin" -name '.k3s.download.*')" ] || { echo "temp left" >&2; return 1; }
  [ ! -e "$SANDBOX/etc/rancher/k3s/config.yaml" ] || { echo "config written" >&2; return 1; }
  [ ! -e "$SANDBOX/etc/systemd/system/k3s.service" ] || { echo "unit written" >&2; return 1; }
  [ "$(k3s_starts)" -eq 0 ] || { echo "k3s started" >&2; return 1; }
}

@test "download: the asset whose hash is pinned for the run (--k3s-sha256) is installed from the mirror" {
  serve_release ok
  run "$INSTALLER" --no-metadata --k3s-download-url "$MIRROR/" --k3s-sha256 "$RELEASE_SHA"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(requests)" -eq 1 ]
  grep -q "^GET /${PINNED_K3S//+/%2B}/k3s\$" "$REQUESTS" # the + of the tag sent as %2B
  cmp "$FAKES/k3s" "$SANDBOX/usr/local/bin/k3s"
  [ "$(stat -c %a "$SANDBOX/usr/local/bin/k3s")" = 755 ]
  [[ "$output" == *"installed k3s $PINNED_K3S at /usr/local/bin/k3s (sha256 $RELEASE_SHA)"* ]]
  [ "$(status .result)" = ok ]
  [ "$(status .k3s_version)" = "$PINNED_K3S" ]
  [ "$(k3s_starts)" -eq 1 ]
  # The binary is there now: the next run does not download again.
  run "$INSTALLER" --no-metadata --k3s-download-url "$MIRROR" --k3s-sha256 "$RELEASE_SHA"
  [ "$status" -eq 0 ]
  [ "$(requests)" -eq 1 ]
}

@test "download: the mirror from GPUPROV_K3S_DOWNLOAD_URL works like the flag" {
  serve_release ok
  GPUPROV_K3S_DOWNLOAD_URL="$MIRROR" run "$INSTALLER" --no-metadata --k3s-sha256 "$RELEASE_SHA"
  [ "$status" -eq 0 ]
  [ "$(requests)" -eq 1 ]
  cmp "$FAKES/k3s" "$SANDBOX/usr/local/bin/k3s"
}

@test "download: without --k3s-sha256 the pinned version is checked against the pinned amd64 hash" {
  serve_release ok
  run "$INSTALLER" --no-metadata --k3s-download-url "$MIRROR"
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$(requests)" -eq 1 ]
  [[ "$output" == *"sha256 mismatch for $MIRROR/${PINNED_K3S//+/%2B}/k3s: got $RELEASE_SHA, want $PINNED_AMD64 (binary discarded)"* ]]
  nothing_installed
}

@test "download: on aarch64 the asset is k3s-arm64, checked against the pinned arm64 hash" {
  # shellcheck disable=SC2016 # $1 and $@ belong to the generated script
  printf '#!/bin/sh\n[ "$1" = -m ] && echo aarch64 && exit 0\nexec /usr/bin/uname "$@"\n' >"$SPY_DIR/uname"
  chmod +x "$SPY_DIR/uname"
  serve_release ok
  run "$INSTALLER" --no-metadata --k3s-download-url "$MIRROR"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"sha256 mismatch for $MIRROR/${PINNED_K3S//+/%2B}/k3s-arm64: got $RELEASE_SHA, want $PINNED_ARM64"* ]]
  nothing_installed
  # With the hash pinned for the run it installs.
  run "$INSTALLER" --no-metadata --k3s-download-url "$MIRROR" --k3s-sha256 "$RELEASE_SHA"
  [ "$status" -eq 0 ]
  grep -q "^GET /${PINNED_K3S//+/%2B}/k3s-arm64\$" "$REQUESTS"
}

@test "download: a wrong hash is refused; nothing is installed and the status marker says why" {
  serve_release ok
  run "$INSTALLER" --no-metadata --k3s-download-url "$MIRROR" --k3s-sha256 "$(printf 'ab%.0s' {1..32})"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"failed step: k3s-binary"* ]]
  nothing_installed
  [ "$(status .result)" = failed ]
  [ "$(status .failed_step)" = k3s-binary ]
  [[ "$(status .message)" == "sha256 mismatch for $MIRROR/"*"got $RELEASE_SHA, want $(printf 'ab%.0s' {1..32}) (binary discarded)" ]]
}

@test "download: a download cut short is retried a bounded number of times, then fails clearly" {
  serve_release truncate
  start=$SECONDS
  GPUPROV_K3S_DOWNLOAD_ATTEMPTS=3 GPUPROV_K3S_DOWNLOAD_STALL_SECONDS=2 \
    run "$INSTALLER" --no-metadata --k3s-download-url "$MIRROR" --k3s-sha256 "$RELEASE_SHA"
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$(requests)" -eq 3 ]
  [ $((SECONDS - start)) -lt 30 ]
  [[ "$output" == *"download attempt 1 of 3 failed: the transfer ended early (partial file)"* ]]
  nothing_installed
  [ "$(status .failed_step)" = k3s-binary ]
  [[ "$(status .message)" == "download of $MIRROR/${PINNED_K3S//+/%2B}/k3s failed after 3 attempts (last: the transfer ended early (partial file): curl: (18) "*"); check the node's network or --k3s-download-url (log: /var/log/gpuprov-install.log)" ]]
}

@test "download: a server that stalls is given up after the no-progress limit, in bounded time" {
  serve_release stall
  start=$SECONDS
  GPUPROV_K3S_DOWNLOAD_ATTEMPTS=2 GPUPROV_K3S_DOWNLOAD_STALL_SECONDS=2 \
    run "$INSTALLER" --no-metadata --k3s-download-url "$MIRROR" --k3s-sha256 "$RELEASE_SHA"
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$(requests)" -eq 2 ]
  # Two attempts of ~2 s each and one pause of 1 s; far below the 40 s per-attempt cap.
  [ $((SECONDS - start)) -lt 20 ]
  [[ "$output" == *"download attempt 2 of 2 failed: timed out (no progress for 2s, or over 40s)"* ]]
  nothing_installed
  [[ "$(status .message)" == "download of "*" failed after 2 attempts (last: timed out"* ]]
}

@test "download: an asset the mirror does not have (HTTP 404) is not retried" {
  rm -r "${RELEASES:?}/$PINNED_K3S"
  serve_release ok
  GPUPROV_K3S_DOWNLOAD_ATTEMPTS=4 \
    run "$INSTALLER" --no-metadata --k3s-download-url "$MIRROR" --k3s-sha256 "$RELEASE_SHA"
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$(requests)" -eq 1 ]
  [[ "$(status .message)" == *"HTTP 404 (no such release asset; check --k3s-version and --k3s-download-url)" ]]
  nothing_installed
}

@test "download: bad mirror URLs and download bounds are usage errors; nothing is touched" {
  run "$INSTALLER" --k3s-download-url ftp://127.0.0.1/x
  [ "$status" -eq 2 ]
  [[ "$output" == *"--k3s-download-url: expected an http:// or https:// URL, got 'ftp://127.0.0.1/x'"* ]]
  run "$INSTALLER" --k3s-download-url https://user:hunter2@127.0.0.1/x
  [ "$status" -eq 2 ]
  [[ "$output" == *"--k3s-download-url: no user name or password in the URL (it is logged)"* ]]
  [[ "$output" != *hunter2* ]]
  GPUPROV_K3S_DOWNLOAD_ATTEMPTS=0 run "$INSTALLER"
  [ "$status" -eq 2 ]
  [[ "$output" == *"GPUPROV_K3S_DOWNLOAD_ATTEMPTS: 1 to 99, got '0'"* ]]
  GPUPROV_K3S_DOWNLOAD_STALL_SECONDS=soon run "$INSTALLER"
  [ "$status" -eq 2 ]
  [[ "$output" == *"GPUPROV_K3S_DOWNLOAD_STALL_SECONDS"* ]]
  [ ! -e "$SANDBOX/var/lib/gpuprov/install-status.json" ]
}
