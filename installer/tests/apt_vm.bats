#!/usr/bin/env bats
# The toolkit's apt path with real apt in a test VM (tests/fixtures/testvm, `--variant apt`: no
# runtime pre-installed, a signed NVIDIA repo stand-in on the VM's 127.0.0.1:8090, a broken
# third-party source, apt timers on, apt's locks held for 25 s from before cloud-final), the
# installer run by cloud-init at boot as the boot route does, with a fake GPU. Nothing leaves the
# machine (Debian's sources are removed; no port is published). Needs docker and the image: runs
# only with GPUPROV_INSTALLER_VM_TESTS=1, like testvm.bats.

load helpers
load vm_helpers

setup_file() {
  [[ "${GPUPROV_INSTALLER_VM_TESTS:-0}" == 1 ]] || return 0
  REPO="$BATS_TEST_DIRNAME/../.."
  IMAGE="${GPUPROV_TESTVM_APT_IMAGE:-$(bash "$REPO/tests/fixtures/testvm/build-image.sh" --variant apt)}"
  VM="gpuprov-installer-apt-$$"
  export IMAGE VM
  fpr="$(docker image inspect -f '{{index .Config.Labels "org.gpuprov.testvm.nvidia-key"}}' "$IMAGE")"
  seed="$BATS_FILE_TMPDIR/seed"
  mkdir -p "$seed/var/lib/cloud/seed/nocloud" "$seed/root" "$seed/etc/gpuprov-testvm"
  printf 'instance-id: i-installer-apt\nlocal-hostname: apt1\n' >"$seed/var/lib/cloud/seed/nocloud/meta-data"
  printf '#!/bin/bash\nexec /root/gpuprov-install.sh --public-ip 127.91.0.4 --no-metadata %s\n' \
    "--nvidia-repo-url http://127.0.0.1:8090 --nvidia-key-fingerprint $fpr" \
    >"$seed/var/lib/cloud/seed/nocloud/user-data"
  install -m 0755 "$BATS_TEST_DIRNAME/../gpuprov-install.sh" "$seed/root/gpuprov-install.sh"
  echo L4:1 >"$seed/etc/gpuprov-testvm/gpu"
  echo 25 >"$seed/etc/gpuprov-testvm/apt-busy-seconds"
  start_vm apt1 "$seed" var root etc
}


@test "apt vm: the boot install waits for apt's locks, updates NVIDIA's list only, installs the toolkit" {
  wait_for 300 sh -c 'cloud-init status | grep -qE "status: (done|error)"'
  vm cat /var/log/gpuprov-install.log
  vm grep -q '"result": "ok"' /var/lib/gpuprov/install-status.json
  vm grep -q "waiting for apt's lock (.*): Could not get lock /var/lib/apt/lists/lock. It is held by process [0-9]* (python3)" \
    /var/log/gpuprov-install.log
  # shellcheck disable=SC2016 # dpkg-query's format
  [ "$(vm dpkg-query -W -f '${Status}' nvidia-container-toolkit)" = "install ok installed" ]
  vm test -x /usr/bin/nvidia-container-runtime
  vm grep -qx 'default-runtime: "nvidia"' /etc/rancher/k3s/config.yaml
  vm systemctl is-active k3s.service
  # No gpg on this image: the keyring was written without it, and real apt verified the repo with it.
  refute vm sh -c 'command -v gpg'
  vm test -s /usr/share/keyrings/nvidia-container-toolkit-keyring.gpg
}

@test "apt vm: the broken source is real (an update of every source fails) and did not matter" {
  wait_for 120 sh -c '! systemctl is-active --quiet gpuprov-testvm-apt-busy.service'
  run vm apt-get update
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" == *"no-such-vendor-repo"*"404"* ]]
}

@test "apt vm: apt reads the unattended-upgrades blacklist for NVIDIA's packages" {
  run vm apt-config dump Unattended-Upgrade::Package-Blacklist
  echo "$output"
  for p in nvidia- libnvidia- cuda- libcuda linux-modules-nvidia-; do
    [[ "$output" == *"Unattended-Upgrade::Package-Blacklist:: \"$p\";"* ]]
  done
}

@test "apt vm: kubectl is linked; k3s-uninstall.sh removes k3s and gpuprov's files" {
  [ "$(vm readlink /usr/local/bin/kubectl)" = k3s ]
  run vm /usr/local/bin/k3s-uninstall.sh
  echo "$output"
  [ "$status" -eq 0 ]
  refute vm systemctl is-active --quiet k3s.service
  for f in /etc/systemd/system/k3s.service /usr/local/bin/k3s /usr/local/bin/kubectl /var/lib/gpuprov \
    /etc/rancher/k3s /etc/apt/apt.conf.d/51gpuprov-nvidia-hold /usr/local/bin/k3s-killall.sh \
    /usr/local/bin/k3s-uninstall.sh; do
    refute vm test -e "$f"
  done
  vm test -x /usr/bin/nvidia-container-runtime # NVIDIA's packages stay
}
