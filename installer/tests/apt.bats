#!/usr/bin/env bats
# The toolkit's apt path as on a real image (fake apt-get/dpkg that fail as apt does): only
# NVIDIA's list is updated, locks other apt runs hold are waited for, an interrupted dpkg is
# finished first, apt's error reaches the marker; the repo key needs no gpg and is pinned by
# fingerprint; with a GPU the NVIDIA packages are kept from unattended-upgrades.

load helpers

setup() {
  common_setup
  with_gpu L4:1
  serve_nvidia_repo
}
teardown() { common_teardown; }

LIST=/etc/apt/sources.list.d/nvidia-container-toolkit.list
KEYRING=usr/share/keyrings/nvidia-container-toolkit-keyring.gpg

@test "apt-get update reads NVIDIA's list only: a broken third-party source does not fail the install" {
  mkdir -p "$SANDBOX/etc/apt/sources.list.d"
  echo 'deb http://127.0.0.1:9/broken stable main' >"$SANDBOX/etc/apt/sources.list.d/vendor.list"
  run "$INSTALLER"
  echo "$output"
  [ "$status" -eq 0 ]
  grep -qx -- "-o Dir::Etc::sourcelist=$LIST -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0 update" "$FAKE_APT_LOG"
  [ -x "$SANDBOX/usr/bin/nvidia-container-runtime" ]
}

@test "a lists lock another apt holds is waited for, said in the log, then the install goes on" {
  FAKE_APT_LOCKED_UNTIL=$(($(date +%s) + 6)) run "$INSTALLER"
  echo "$output"
  [ "$status" -eq 0 ]
  grep -q "waiting for apt's lock (.*s of 900s): Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)" \
    "$SANDBOX/var/log/gpuprov-install.log"
  [ "$(grep -c ' update$' "$FAKE_APT_LOG")" -ge 2 ]
  [ -x "$SANDBOX/usr/bin/nvidia-container-runtime" ]
}

@test "while it waits for apt's lock the running marker says so (gpuprov's progress); then it is gone" {
  marker="$SANDBOX/var/lib/gpuprov/install-status.json"
  FAKE_APT_LOCKED_UNTIL=$(($(date +%s) + 8)) "$INSTALLER" >"$BATS_TEST_TMPDIR/out" 2>&1 &
  pid=$!
  seen=""
  for _ in $(seq 1 80); do
    if grep -q '"message": "waiting for apt.s lock (at most 900s): Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)"' "$marker" 2>/dev/null; then
      seen=1
      grep -q '"result": "running"' "$marker"
      grep -q '"phase": "nvidia-toolkit"' "$marker"
      break
    fi
    sleep 0.1
  done
  wait "$pid"
  [ "$seen" = 1 ]
  grep -q '"result": "ok"' "$marker"
  grep -q '"message": null' "$marker"
}

@test "a lock held past --apt-lock-timeout fails the step with apt's line in the marker and on stderr" {
  FAKE_APT_LOCKED_UNTIL=$(($(date +%s) + 300)) run "$INSTALLER" --apt-lock-timeout 2
  [ "$status" -eq 1 ]
  [ "$(status .failed_step)" = nvidia-toolkit ]
  want="apt-get update of $LIST failed: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get) (still after 2s)"
  [ "$(status .message)" = "$want" ]
  [[ "$output" == *"failed step: nvidia-toolkit: $want"* ]]
}

@test "apt's last E: line (not its 'ignored' summary) is the message" {
  printf '#!/bin/sh\necho "Err:1 x"; echo "E: Failed to fetch %s/stable/deb/amd64/InRelease  404  Not Found" >&2\necho "E: Some index files failed to download. They have been ignored, or old ones used instead." >&2\nexit 100\n' \
    "$HTTP_URL" >"$SPY_DIR/apt-get"
  chmod +x "$SPY_DIR/apt-get"
  run "$INSTALLER"
  [ "$status" -eq 1 ]
  [ "$(status .message)" = "apt-get update of $LIST failed: E: Failed to fetch $HTTP_URL/stable/deb/amd64/InRelease  404  Not Found" ]
}

@test "an interrupted dpkg is finished (dpkg --configure -a) before apt runs" {
  mkdir -p "$SANDBOX/var/lib/dpkg/updates"
  touch "$SANDBOX/var/lib/dpkg/updates/0001"
  run "$INSTALLER"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(head -n1 "$FAKE_APT_LOG")" = "dpkg --configure -a" ]
  grep -q 'dpkg was interrupted earlier: dpkg --configure -a' "$SANDBOX/var/log/gpuprov-install.log"
  [ -x "$SANDBOX/usr/bin/nvidia-container-runtime" ]
}

@test "the repo key: no gpg needed, binary keyring as gpg --dearmor writes it, a stale one replaced" {
  printf '#!/bin/sh\necho "gpg must not be called" >&2\nexit 127\n' >"$SPY_DIR/gpg"
  chmod +x "$SPY_DIR/gpg"
  mkdir -p "$SANDBOX/usr/share/keyrings"
  echo "an expired key" >"$SANDBOX/$KEYRING"
  run "$INSTALLER"
  echo "$output"
  [ "$status" -eq 0 ]
  /usr/bin/gpg --dearmor <"$TEST_KEY" | cmp - "$SANDBOX/$KEYRING"
  [ "$(stat -c %a "$SANDBOX/$KEYRING")" = 644 ]
  grep -q "wrote /$KEYRING (key $TEST_KEY_FPR)" "$SANDBOX/var/log/gpuprov-install.log"
}

@test "a repo key with another fingerprint is refused; nothing is installed" {
  cp "$BATS_TEST_DIRNAME/other-test-key.asc" "$BATS_TEST_TMPDIR/repo/gpgkey"
  run "$INSTALLER"
  [ "$status" -eq 1 ]
  [ "$(status .failed_step)" = nvidia-toolkit ]
  [ "$(status .message)" = "NVIDIA's apt key from $HTTP_URL/gpgkey: fingerprint 3C4AD05A53F57C81A56B077D26B4FDD197CBDC86, want $TEST_KEY_FPR (pinned; --nvidia-key-fingerprint)" ]
  [ ! -e "$SANDBOX/$KEYRING" ]
  [ ! -e "$FAKE_APT_LOG" ]
  # NVIDIA's own fingerprint is the default.
  unset GPUPROV_NVIDIA_KEY_FINGERPRINT
  run "$INSTALLER"
  [[ "$(status .message)" == *", want C95B321B61E88C1809C4F759DDCAE044F796ECB0 (pinned; --nvidia-key-fingerprint)" ]]
  run "$INSTALLER" --nvidia-key-fingerprint xyz
  [ "$status" -eq 2 ]
}

@test "with a GPU the NVIDIA packages are kept from unattended-upgrades; without one nothing is written" {
  conf="$SANDBOX/etc/apt/apt.conf.d/51gpuprov-nvidia-hold"
  rm -f "$FAKE_GPU_FILE"
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  [ ! -e "$conf" ]
  with_gpu L4:1
  with_toolkit
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  grep -qx 'Unattended-Upgrade::Package-Blacklist {' "$conf"
  grep -qF '"nvidia-"; "libnvidia-"; "cuda-"; "libcuda";' "$conf"
}
