#!/usr/bin/env bats
# Failures: non-zero exit, the failing step named on stderr and in the status marker; a later run
# recovers.

load helpers

setup() { common_setup; }
teardown() { common_teardown; }

@test "a failing k3s start exits 1 naming k3s-start, in stderr and in the status marker" {
  mkdir -p "$FAKE_SYSTEMCTL_DIR"
  touch "$FAKE_SYSTEMCTL_DIR/fail-start"
  run "$INSTALLER"
  [ "$status" -eq 1 ]
  [[ "$output" == *"failed step: k3s-start"* ]]
  [[ "$output" == *"journalctl -u k3s"* ]]
  [ "$(status .result)" = failed ]
  [ "$(status .failed_step)" = k3s-start ]
  [[ "$(status .message)" == *"systemctl start k3s did not succeed"* ]]
  [ "$(status .finished_at)" != null ]
  grep -q 'FAILED at step k3s-start' "$SANDBOX/var/log/gpuprov-install.log"
  # Fixed: the next run starts k3s (nothing was recorded as applied).
  rm "$FAKE_SYSTEMCTL_DIR/fail-start"
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  [ "$(status .result)" = ok ]
  [ "$(status .failed_step)" = null ]
  [ "$(status .k3s_action)" = started ]
}

@test "a restart interrupted after the config was written is retried by the next run" {
  run "$INSTALLER"
  touch "$FAKE_SYSTEMCTL_DIR/fail-start"
  run "$INSTALLER" --public-ip 203.0.113.7
  [ "$status" -eq 1 ]
  rm "$FAKE_SYSTEMCTL_DIR/fail-start"
  touch "$FAKE_SYSTEMCTL_DIR/active.k3s" # Restart=always brought the old one back
  run "$INSTALLER" --public-ip 203.0.113.7
  [ "$status" -eq 0 ]
  [ "$(status .k3s_action)" = restarted ]
}

@test "a hanging k3s start is cut off by --restart-timeout" {
  mkdir -p "$FAKE_SYSTEMCTL_DIR"
  touch "$FAKE_SYSTEMCTL_DIR/hang-start"
  SECONDS=0
  run "$INSTALLER" --restart-timeout 1
  [ "$status" -eq 1 ]
  [ "$SECONDS" -lt 20 ]
  [[ "$output" == *"failed step: k3s-start"* ]]
  [[ "$(status .message)" == *"within 1s"* ]]
}

@test "not root on the real root: preflight refuses (exit 1)" {
  if [ "$(id -u)" = 0 ]; then
    command -v setpriv >/dev/null || skip "setpriv missing"
    unset GPUPROV_INSTALL_ROOT
    # A copy nobody can reach: the checkout may sit below a folder only root may enter (a clone
    # in /root, or CI's mktemp -d folder, mode 0700).
    local copy
    copy=$(mktemp -d)
    chmod 755 "$copy"
    install -m 755 "$INSTALLER" "$copy/gpuprov-install.sh"
    run setpriv --reuid=65534 --regid=65534 --clear-groups "$copy/gpuprov-install.sh" --log-file /tmp/gpuprov-nobody.log
    rm -rf "$copy"
  else
    unset GPUPROV_INSTALL_ROOT
    run "$INSTALLER"
  fi
  [ "$status" -eq 1 ]
  [[ "$output" == *"failed step: preflight"* ]]
  [[ "$output" == *"must run as root"* ]]
}

@test "the status marker stays valid JSON with quotes, backslashes and tabs in the message" {
  printf '#!/bin/sh\nprintf "%%s\\n" "we\\"ird\\\\arch\tx"\n' >"$SPY_DIR/uname"
  chmod +x "$SPY_DIR/uname"
  run "$INSTALLER" --k3s-version v1.30.2+k3s1
  [ "$status" -eq 1 ]
  [ "$(status .failed_step)" = k3s-binary ]
  [ "$(status .message)" = "unsupported machine type 'we\"ird\\arch"$'\t'"x' (k3s assets exist for x86_64 and aarch64 here)" ]
  [ "$(status .pid)" -gt 0 ]
  [ "$(status .log_file)" = /var/log/gpuprov-install.log ]
}
