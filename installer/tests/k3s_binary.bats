#!/usr/bin/env bats
# The k3s binary: the air-gap binary of the wanted version is used as is (no network); otherwise a
# download checked by sha256, and a clear refusal when no hash is known.

load helpers

setup() { common_setup; }
teardown() { common_teardown; }

# serve_fake_release VERSION: a fake k3s release on a local server; sets FAKE_SHA.
serve_fake_release() {
  local dir="$BATS_TEST_TMPDIR/releases/$1"
  mkdir -p "$dir"
  # shellcheck disable=SC2016 # $1 belongs to the generated script
  printf '#!/bin/sh\n[ "$1" = --version ] && echo "k3s version %s (fake)"\nexit 0\n' "$1" >"$dir/k3s"
  FAKE_SHA="$(sha256sum "$dir/k3s" | cut -d' ' -f1)"
  start_http_server "$BATS_TEST_TMPDIR/releases"
  export GPUPROV_K3S_DOWNLOAD_URL="$HTTP_URL"
}

@test "the air-gap binary of the pinned version is used: no download, no network" {
  run "$INSTALLER" --no-metadata
  [ "$status" -eq 0 ]
  [[ "$output" == *"already at /usr/local/bin/k3s: using it as is (no download)"* ]]
  [ ! -s "$CURL_LOG" ]
  cmp "$FAKES/k3s" "$SANDBOX/usr/local/bin/k3s"
}

@test "another version with no hash known: a clear refusal, nothing downloaded" {
  run "$INSTALLER" --k3s-version v1.30.2+k3s1 --no-metadata
  [ "$status" -eq 1 ]
  [[ "$output" == *"failed step: k3s-binary"* ]]
  [[ "$output" == *"no sha256 pinned for k3s v1.30.2+k3s1"* ]]
  [[ "$output" == *"refusing to download an unverified binary"* ]]
  [ ! -s "$CURL_LOG" ]
  [ "$(status .failed_step)" = k3s-binary ]
  cmp "$FAKES/k3s" "$SANDBOX/usr/local/bin/k3s" # old binary untouched
  [ "$(k3s_starts)" -eq 0 ]
}

@test "another version with --k3s-sha256 is downloaded, verified and installed; k3s restarted" {
  run "$INSTALLER"
  [ "$(k3s_starts)" -eq 1 ]
  serve_fake_release v1.30.2+k3s1
  run "$INSTALLER" --k3s-version v1.30.2+k3s1 --k3s-sha256 "$FAKE_SHA"
  [ "$status" -eq 0 ]
  grep -q "$HTTP_URL/v1.30.2%2Bk3s1/k3s" "$CURL_LOG"
  [ "$("$SANDBOX/usr/local/bin/k3s" --version)" = "k3s version v1.30.2+k3s1 (fake)" ]
  [ "$(status .k3s_version)" = v1.30.2+k3s1 ]
  [ "$(k3s_starts)" -eq 2 ] # a new binary is a restart
  # Now present: the next run does not download again.
  : >"$CURL_LOG"
  run "$INSTALLER" --k3s-version v1.30.2+k3s1 --no-metadata
  [ "$status" -eq 0 ]
  [ ! -s "$CURL_LOG" ]
  [ "$(k3s_starts)" -eq 2 ]
}

@test "a download whose sha256 does not match is discarded" {
  serve_fake_release v1.30.2+k3s1
  run "$INSTALLER" --k3s-version v1.30.2+k3s1 --k3s-sha256 "$(printf '0%.0s' {1..64})"
  [ "$status" -eq 1 ]
  [[ "$output" == *"sha256 mismatch"* ]]
  [ "$(status .failed_step)" = k3s-binary ]
  cmp "$FAKES/k3s" "$SANDBOX/usr/local/bin/k3s"
  [ -z "$(find "$SANDBOX/usr/local/bin" -name '.k3s.download.*')" ]
}

@test "no binary at all and the pinned version: downloaded with the pinned hash (here refused)" {
  rm "$SANDBOX/usr/local/bin/k3s"
  export GPUPROV_K3S_DOWNLOAD_ATTEMPTS=1 GPUPROV_K3S_DOWNLOAD_STALL_SECONDS=1 # this test only
  run "$INSTALLER" --no-metadata
  echo "$output"
  # A hash is pinned, so the download is attempted (from 127.0.0.1:1 here, so it fails).
  [ "$status" -eq 1 ]
  [[ "$output" == *"download of http://127.0.0.1:1/${PINNED_K3S//+/%2B}/k3s failed after 1 attempts"* ]]
  [ "$(wc -l <"$CURL_LOG")" -eq 1 ]
  [ ! -e "$SANDBOX/usr/local/bin/k3s" ]
}
