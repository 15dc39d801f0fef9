#!/usr/bin/env bats
# Idempotency and restarts: k3s starts once, restarts only when what it reads at start changed.

load helpers

setup() { common_setup; }
teardown() { common_teardown; }

@test "--help and --version answer without touching anything" {
  run "$INSTALLER" --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"--public-ip IP"* ]]
  run "$INSTALLER" --version
  [ "$status" -eq 0 ]
  [[ "$output" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]
  [ ! -e "$SANDBOX/etc" ]
}

@test "a bad argument is a usage error (exit 2) and changes nothing" {
  run "$INSTALLER" --public-ip 'x"; rm -rf /'
  [ "$status" -eq 2 ]
  [[ "$output" == *"--public-ip: not an address"* ]]
  run "$INSTALLER" --frobnicate
  [ "$status" -eq 2 ]
  [ ! -e "$SANDBOX/etc/rancher" ]
}

@test "a fresh node without GPU gets config, unit, a started k3s and an ok status marker" {
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  grep -qx 'write-kubeconfig-mode: "0600"' "$SANDBOX/etc/rancher/k3s/config.yaml"
  grep -qx '  - "127.0.0.1"' "$SANDBOX/etc/rancher/k3s/config.yaml"
  refute grep -q 'default-runtime' "$SANDBOX/etc/rancher/k3s/config.yaml"
  [ "$(stat -c %a "$SANDBOX/etc/rancher/k3s/config.yaml")" = 600 ]
  grep -qx 'Type=notify' "$SANDBOX/etc/systemd/system/k3s.service"
  grep -qx 'ExecStart=/usr/local/bin/k3s server' "$SANDBOX/etc/systemd/system/k3s.service"
  [ ! -e "$SANDBOX/var/lib/rancher/k3s/server/manifests/nvidia-device-plugin.yaml" ]
  [ "$(k3s_starts)" -eq 1 ]
  grep -q ' daemon-reload' "$FAKE_SYSTEMCTL_DIR/calls.log"
  grep -q ' enable k3s.service' "$FAKE_SYSTEMCTL_DIR/calls.log"
  [ "$(status .result)" = ok ]
  [ "$(status .phase)" = "done" ]
  [ "$(status .failed_step)" = null ]
  [ "$(status .gpu_seen.present)" = false ]
  [ "$(status .k3s_version)" = "$PINNED_K3S" ]
  [ "$(status .k3s_action)" = started ]
  [ "$(status .installer_version)" != null ]
  [[ "$(status .started_at)" =~ ^20[0-9-]+T[0-9:.]+Z$ ]]
  [[ "$(status .finished_at)" =~ ^20[0-9-]+T[0-9:.]+Z$ ]]
  grep -q 'step k3s-start' "$SANDBOX/var/log/gpuprov-install.log"
}

@test "running twice starts k3s once; the second run changes nothing" {
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  cp -p "$SANDBOX/etc/rancher/k3s/config.yaml" "$BATS_TEST_TMPDIR/config.before"
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  [ "$(k3s_starts)" -eq 1 ]
  [ "$(grep -c ' daemon-reload' "$FAKE_SYSTEMCTL_DIR/calls.log")" -eq 1 ]
  [ "$(status .k3s_action)" = none ]
  [ "$(status .result)" = ok ]
  [[ "$output" == *"/etc/rancher/k3s/config.yaml unchanged"* ]]
  [[ "$output" == *"/etc/systemd/system/k3s.service unchanged"* ]]
  [[ "$output" == *"no restart"* ]]
  [ "$(stat -c %Y "$SANDBOX/etc/rancher/k3s/config.yaml")" = "$(stat -c %Y "$BATS_TEST_TMPDIR/config.before")" ]
}

@test "a config change (new --public-ip) restarts k3s once more, then is remembered" {
  run "$INSTALLER"
  [ "$(k3s_starts)" -eq 1 ]
  run "$INSTALLER" --public-ip 203.0.113.7
  [ "$status" -eq 0 ]
  [ "$(k3s_starts)" -eq 2 ]
  grep -q ' restart k3s' "$FAKE_SYSTEMCTL_DIR/calls.log"
  grep -qx '  - "203.0.113.7"' "$SANDBOX/etc/rancher/k3s/config.yaml"
  [ "$(status .public_ip)" = 203.0.113.7 ]
  [ "$(status .k3s_action)" = restarted ]
  [ "$(status '.tls_san | join(",")')" = "127.0.0.1,203.0.113.7" ]
  # The same IP again, or none (metadata silent): nothing changes.
  run "$INSTALLER" --public-ip 203.0.113.7
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  [ "$(k3s_starts)" -eq 2 ]
  grep -qx '  - "203.0.113.7"' "$SANDBOX/etc/rancher/k3s/config.yaml"
  # A different IP replaces it.
  run "$INSTALLER" --public-ip 198.51.100.9 --tls-san gpu1.example.com
  [ "$(k3s_starts)" -eq 3 ]
  refute grep -q '203.0.113.7' "$SANDBOX/etc/rancher/k3s/config.yaml"
  grep -qx '  - "gpu1.example.com"' "$SANDBOX/etc/rancher/k3s/config.yaml"
}

@test "k3s stopped since the last run is started again, with the same config" {
  run "$INSTALLER"
  rm -f "$FAKE_SYSTEMCTL_DIR/active.k3s"
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  [ "$(k3s_starts)" -eq 2 ]
  [ "$(status .k3s_action)" = started ]
}

@test "a unit edited by hand is put back and daemon-reloaded; k3s runs that unit already" {
  run "$INSTALLER"
  echo "# local edit" >>"$SANDBOX/etc/systemd/system/k3s.service"
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  [ "$(grep -c ' daemon-reload' "$FAKE_SYSTEMCTL_DIR/calls.log")" -eq 2 ]
  [ "$(k3s_starts)" -eq 1 ]
  refute grep -q 'local edit' "$SANDBOX/etc/systemd/system/k3s.service"
}

@test "a unit change (--unit-type) is daemon-reloaded and restarts k3s" {
  run "$INSTALLER"
  run "$INSTALLER" --unit-type exec
  [ "$status" -eq 0 ]
  [ "$(grep -c ' daemon-reload' "$FAKE_SYSTEMCTL_DIR/calls.log")" -eq 2 ]
  [ "$(k3s_starts)" -eq 2 ]
  [ "$(status .k3s_action)" = restarted ]
}

@test "--unit-type exec (for stand-ins without sd_notify) is written into the unit" {
  run "$INSTALLER" --unit-type exec
  [ "$status" -eq 0 ]
  grep -qx 'Type=exec' "$SANDBOX/etc/systemd/system/k3s.service"
  GPUPROV_K3S_UNIT_TYPE=bogus run "$INSTALLER"
  [ "$status" -eq 2 ]
}
