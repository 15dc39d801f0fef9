#!/usr/bin/env bats
# A re-run on a live node: no `systemctl daemon-reload` unless a unit file changed (the fake
# systemctl logs the reload an enable or disable without --no-reload implies), and the /dev/char
# links NVIDIA documents for that reload issue (nvidia-ctk and its udev rule).

load helpers

setup() { common_setup; }
teardown() { common_teardown; }

DEV_CHAR_RULE=lib/udev/rules.d/71-nvidia-dev-char.rules

reloads() { grep -c ' daemon-reload' "$FAKE_SYSTEMCTL_DIR/calls.log" || true; }

# with_nvidia_ctk: a fake nvidia-ctk first on PATH that logs its arguments.
with_nvidia_ctk() {
  # shellcheck disable=SC2016 # expanded when the fake runs
  printf '#!/bin/sh\nprintf "%%s\\n" "$*" >>"%s/nvidia-ctk.log"\n' "$BATS_TEST_TMPDIR" >"$SPY_DIR/nvidia-ctk"
  chmod +x "$SPY_DIR/nvidia-ctk"
}

@test "a re-run with nothing changed reloads nothing: enable runs with --no-reload" {
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  [ "$(reloads)" -eq 1 ]
  grep -q ' --no-reload enable k3s.service' "$FAKE_SYSTEMCTL_DIR/calls.log"
  run "$INSTALLER" --public-ip 203.0.113.7 # a config change restarts k3s, but no unit changed
  [ "$status" -eq 0 ]
  [ "$(k3s_starts)" -eq 2 ]
  run "$INSTALLER" --public-ip 203.0.113.7
  [ "$status" -eq 0 ]
  [ "$(reloads)" -eq 1 ]
  refute grep -q 'implied' "$FAKE_SYSTEMCTL_DIR/calls.log"
}

@test "the node firewall reloads systemd only when its unit changed" {
  install -m 0755 /dev/null "$SPY_DIR/nft"
  run "$INSTALLER" --node-firewall ssh-only
  [ "$status" -eq 0 ]
  [ "$(reloads)" -eq 2 ] # the firewall unit and the k3s unit, both new
  # Inactive firewall: applied again, without a reload.
  rm "$FAKE_SYSTEMCTL_DIR/active.gpuprov-firewall"
  run "$INSTALLER" --node-firewall ssh-only
  [ "$status" -eq 0 ]
  [ "$(grep -c ' reload-or-restart gpuprov-firewall' "$FAKE_SYSTEMCTL_DIR/calls.log")" -eq 2 ]
  [ "$(reloads)" -eq 2 ]
  # Its unit edited by hand: put back and reloaded.
  echo "# local edit" >>"$SANDBOX/etc/systemd/system/gpuprov-firewall.service"
  run "$INSTALLER" --node-firewall ssh-only
  [ "$status" -eq 0 ]
  [ "$(reloads)" -eq 3 ]
}

@test "a GPU node gets the /dev/char links and their udev rule from nvidia-ctk" {
  with_gpu L4:1
  with_toolkit
  with_nvidia_ctk
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  grep -qx 'system create-dev-char-symlinks --create-all' "$BATS_TEST_TMPDIR/nvidia-ctk.log"
  grep -qx "ACTION==\"add\", DEVPATH==\"/bus/pci/drivers/nvidia\", RUN+=\"$SPY_DIR/nvidia-ctk system create-dev-char-symlinks --create-all\"" \
    "$SANDBOX/$DEV_CHAR_RULE"
  refute grep -q WARNING "$SANDBOX/var/log/gpuprov-install.log"
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  [ "$(reloads)" -eq 1 ]
}

@test "without nvidia-ctk the installer says so and goes on; a failing nvidia-ctk does not fail it" {
  with_gpu L4:1
  with_toolkit
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  [[ "$output" == *"WARNING: no nvidia-ctk: no /dev/char links"* ]]
  [ ! -e "$SANDBOX/$DEV_CHAR_RULE" ]
  printf '#!/bin/sh\necho "nvidia-ctk: missing required device major" >&2\nexit 1\n' >"$SPY_DIR/nvidia-ctk"
  chmod +x "$SPY_DIR/nvidia-ctk"
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  [[ "$output" == *"WARNING: nvidia-ctk create-dev-char-symlinks failed"* ]]
  [ "$(status .result)" = ok ]
}

@test "a node without a GPU gets no udev rule" {
  with_nvidia_ctk
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  [ ! -e "$SANDBOX/$DEV_CHAR_RULE" ]
  [ ! -e "$BATS_TEST_TMPDIR/nvidia-ctk.log" ]
}

@test "a GPU node gets the device plugin boot helper: its script and a unit started after k3s" {
  with_gpu L4:1
  with_toolkit
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  [ -x "$SANDBOX/usr/local/sbin/gpuprov-device-plugin-boot" ]
  grep -qx 'After=k3s.service' "$SANDBOX/etc/systemd/system/gpuprov-device-plugin-boot.service"
  grep -qx 'ExecStart=/usr/local/sbin/gpuprov-device-plugin-boot' \
    "$SANDBOX/etc/systemd/system/gpuprov-device-plugin-boot.service"
  grep -q ' --no-reload enable gpuprov-device-plugin-boot.service' "$FAKE_SYSTEMCTL_DIR/calls.log"
  [ "$(reloads)" -eq 1 ] # one reload for both new units
  run shellcheck -s sh "$SANDBOX/usr/local/sbin/gpuprov-device-plugin-boot"
  [ "$status" -eq 0 ]
  run "$INSTALLER"
  [ "$(reloads)" -eq 1 ]
}

@test "a node without a GPU gets no device plugin boot helper" {
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  [ ! -e "$SANDBOX/etc/systemd/system/gpuprov-device-plugin-boot.service" ]
  [ ! -e "$SANDBOX/usr/local/sbin/gpuprov-device-plugin-boot" ]
}
