#!/usr/bin/env bats
# The installer under real systemd and cloud-init, in a test VM (tests/fixtures/testvm), with a
# stub k3s that speaks sd_notify. Slow and needs docker and the image, so it runs only with
# GPUPROV_INSTALLER_VM_TESTS=1 (image: $GPUPROV_TESTVM_IMAGE, default the current recipe's tag).
# The VM publishes no ports and the installer is told there is no metadata service: no traffic
# leaves the machine.

load vm_helpers

setup_file() {
  [[ "${GPUPROV_INSTALLER_VM_TESTS:-0}" == 1 ]] || return 0
  REPO="$BATS_TEST_DIRNAME/../.."
  IMAGE="${GPUPROV_TESTVM_IMAGE:-$(bash "$REPO/tests/fixtures/testvm/build-image.sh" --print-tag)}"
  VM="gpuprov-installer-test-$$"
  export IMAGE VM
  seed="$BATS_FILE_TMPDIR/seed"
  mkdir -p "$seed/var/lib/cloud/seed/nocloud" "$seed/usr/local/bin" "$seed/root"
  printf 'instance-id: i-installer-test\nlocal-hostname: vm1\n' >"$seed/var/lib/cloud/seed/nocloud/meta-data"
  # The boot route: cloud-init runs the installer; the test's own run races it.
  cat >"$seed/var/lib/cloud/seed/nocloud/user-data" <<'UD'
#!/bin/bash
exec /root/gpuprov-install.sh --public-ip 127.91.0.2 --no-metadata --toolkit skip
UD
  install -m 0755 "$BATS_TEST_DIRNAME/../gpuprov-install.sh" "$seed/root/gpuprov-install.sh"
  # Stub k3s: the pinned version for --version; `server` logs its start and signals READY=1 from
  # the main process (python exec'd), as k3s does once its API is up.
  cat >"$seed/usr/local/bin/k3s" <<'K3S'
#!/bin/sh
if [ "$1" = --version ]; then echo "k3s version @PINNED@ (stub)"; exit 0; fi
echo "$(date +%s.%N) $*" >>/var/log/k3s-stub.log
sleep 1
exec python3 -c '
import os, socket, time
addr = os.environ["NOTIFY_SOCKET"]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.connect("\0" + addr[1:] if addr.startswith("@") else addr)
s.send(b"READY=1")
while True:
    time.sleep(3600)
'
K3S
  pinned="$(sed -n 's/^readonly K3S_PINNED_VERSION="\(.*\)"$/\1/p' "$BATS_TEST_DIRNAME/../gpuprov-install.sh")"
  sed -i "s/@PINNED@/$pinned/" "$seed/usr/local/bin/k3s"
  chmod 0755 "$seed/usr/local/bin/k3s"
  start_vm vm1 "$seed" var usr root
}


@test "vm: a run racing the boot run waits for it; k3s starts once under systemd (Type=notify)" {
  wait_for 180 test -e /var/log/gpuprov-install.log
  run vm /root/gpuprov-install.sh --public-ip 127.91.0.2 --no-metadata --toolkit skip
  echo "$output"
  [ "$status" -eq 0 ]
  wait_for 180 sh -c 'cloud-init status | grep -q "status: done"'
  vm systemctl is-active k3s.service
  vm grep -qx 'Type=notify' /etc/systemd/system/k3s.service
  vm grep -qx '  - "127.91.0.2"' /etc/rancher/k3s/config.yaml
  [ "$(vm sh -c 'wc -l </var/log/k3s-stub.log')" -eq 1 ]
  # The two runs did not overlap (each run's lines between its "lock acquired" and "done").
  vm cat /var/log/gpuprov-install.log
  run vm sh -c "grep -E 'lock acquired|done:|another gpuprov-install run holds' /var/log/gpuprov-install.log | sed 's/.*\\[run \\([0-9]*\\)\\] \\(lock acquired\\|done\\|another\\).*/\\1 \\2/'"
  echo "$output"
  [ "${#lines[@]}" -ge 4 ]
  first="${lines[0]%% *}"
  [ "${lines[0]}" = "$first lock acquired" ]
  [[ "$output" == *"$first done"*"lock acquired"* ]]
  vm grep -q '"result": "ok"' /var/lib/gpuprov/install-status.json
}

@test "vm: a third run changes nothing; a GPU appearing adds the runtime and restarts k3s once" {
  run vm /root/gpuprov-install.sh --public-ip 127.91.0.2 --no-metadata --toolkit skip
  [ "$status" -eq 0 ]
  [[ "$output" == *"no restart"* ]]
  [ "$(vm sh -c 'wc -l </var/log/k3s-stub.log')" -eq 1 ]
  vm sh -c 'echo L4:1 >/etc/gpuprov-testvm/gpu; printf "#!/bin/sh\nexit 0\n" >/usr/bin/nvidia-container-runtime; chmod 755 /usr/bin/nvidia-container-runtime'
  run vm /root/gpuprov-install.sh --public-ip 127.91.0.2 --no-metadata --toolkit skip
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"GPU seen: 1 x NVIDIA L4"* ]]
  vm grep -qx 'default-runtime: "nvidia"' /etc/rancher/k3s/config.yaml
  vm grep -q 'nvcr.io/nvidia/k8s-device-plugin:v0.19.3' /var/lib/rancher/k3s/server/manifests/nvidia-device-plugin.yaml
  [ "$(vm sh -c 'wc -l </var/log/k3s-stub.log')" -eq 2 ]
  vm systemctl is-active k3s.service
}
