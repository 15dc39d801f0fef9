#!/usr/bin/env bats
# An active ufw or firewalld on the image (fakes): k3s's pod and service networks are allowed before
# k3s starts, or the step fails naming what to do; an inactive one is not touched.

load helpers

setup() { common_setup; }
teardown() { common_teardown; }

@test "neither ufw nor firewalld active: only asked, nothing changed" {
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  [ "$(grep -c . "$FAKE_FIREWALL_DIR/calls.log")" -eq 2 ]
  grep -qx 'ufw status' "$FAKE_FIREWALL_DIR/calls.log"
  grep -qx 'firewall-cmd --state' "$FAKE_FIREWALL_DIR/calls.log"
}

@test "ufw active: k3s's pod and service networks allowed before k3s starts" {
  mkdir -p "$FAKE_FIREWALL_DIR"
  touch "$FAKE_FIREWALL_DIR/ufw-active"
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  grep -qx 'ufw allow from 10.42.0.0/16' "$FAKE_FIREWALL_DIR/calls.log"
  grep -qx 'ufw allow from 10.43.0.0/16' "$FAKE_FIREWALL_DIR/calls.log"
  log="$SANDBOX/var/log/gpuprov-install.log"
  grep -q 'ufw is active: allowed from 10.42.0.0/16 10.43.0.0/16' "$log"
  [ "$(grep -n 'ufw is active' "$log" | cut -d: -f1)" -lt "$(grep -n 'step k3s-start' "$log" | cut -d: -f1)" ]
}

@test "ufw active with the networks set in config.yaml.d: those are allowed" {
  mkdir -p "$FAKE_FIREWALL_DIR" "$SANDBOX/etc/rancher/k3s/config.yaml.d"
  touch "$FAKE_FIREWALL_DIR/ufw-active"
  printf 'cluster-cidr: "10.52.0.0/16,fd00:42::/56"\nservice-cidr: 10.53.0.0/16\n' \
    >"$SANDBOX/etc/rancher/k3s/config.yaml.d/cidr.yaml"
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  grep -qx 'ufw allow from 10.52.0.0/16' "$FAKE_FIREWALL_DIR/calls.log"
  grep -qx 'ufw allow from fd00:42::/56' "$FAKE_FIREWALL_DIR/calls.log"
  grep -qx 'ufw allow from 10.53.0.0/16' "$FAKE_FIREWALL_DIR/calls.log"
  refute grep -q '10.42.0.0' "$FAKE_FIREWALL_DIR/calls.log"
}

@test "ufw active and its rule failing: the step fails with the hint, k3s not started" {
  mkdir -p "$FAKE_FIREWALL_DIR"
  touch "$FAKE_FIREWALL_DIR/ufw-active" "$FAKE_FIREWALL_DIR/fail"
  run "$INSTALLER"
  [ "$status" -eq 1 ]
  [ "$(status .failed_step)" = host-firewall ]
  [ "$(status .message)" = "ufw is active and 'ufw allow from 10.42.0.0/16' failed: allow k3s's networks (10.42.0.0/16 10.43.0.0/16) by hand, then run again" ]
  [ "$(k3s_starts)" -eq 0 ]
}

@test "firewalld running: the networks join its trusted zone, permanently and now (no reload)" {
  mkdir -p "$FAKE_FIREWALL_DIR"
  touch "$FAKE_FIREWALL_DIR/firewalld-running"
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  for c in 10.42.0.0/16 10.43.0.0/16; do
    grep -qx "firewall-cmd --permanent --zone=trusted --add-source=$c" "$FAKE_FIREWALL_DIR/calls.log"
    grep -qx "firewall-cmd --zone=trusted --add-source=$c" "$FAKE_FIREWALL_DIR/calls.log"
  done
  refute grep -q -- '--reload' "$FAKE_FIREWALL_DIR/calls.log"
}
