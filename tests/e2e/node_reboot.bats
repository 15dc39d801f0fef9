#!/usr/bin/env bats
# A GPU node rebooted with its NVIDIA driver answering late (issue 32, F11e): the device plugin
# crash-loops under kubelet's back-off (the k3s simulator models it: 10 s doubling to 5 min), and
# the installer's boot helper (gpuprov-device-plugin-boot.service) deletes the crash-looping pod
# once nvidia-smi answers, so the GPUs come back at once instead of at the next back-off expiry.
# The reboot is `docker restart` of the emulated DigitalOcean VM's container
# (tests/fixtures/testvm/README.md), with the simulator's back-off base raised to 30 s; the GPUs
# must be back before the plugin pod's next start (its gpuprov-sim/plugin-start-due annotation).
# The node's API is read from inside the VM, with k3s's admin certificate, as the helper does.

load helpers

setup_file() {
  start_docker_clouds reboot digitalocean
}

teardown_file() {
  stop_emulators
}

setup() { use_emulator emu; }

teardown() {
  end_docker_test
}

vm_container() { docker ps -aq --filter label=io.gpuprov.emulator=1 --filter "label=io.gpuprov.emulator.name=$1"; }

# node_api NAME PATH: GET PATH of the k3s API inside VM NAME.
node_api() {
  docker exec "$(vm_container "$1")" sh -c "t=/var/lib/rancher/k3s/server/tls; curl -fsS \
    --cacert \$t/server-ca.crt --cert \$t/client-admin.crt --key \$t/client-admin.key \
    'https://127.0.0.1:6443$2'" 2>/dev/null
}

# plugin_annotation NAME KEY: a k3s simulator annotation of the device plugin pod (README there).
plugin_annotation() {
  node_api "$1" '/api/v1/namespaces/kube-system/pods?labelSelector=name%3Dnvidia-device-plugin-ds' |
    grep -Eo "\"gpuprov-sim/$2\": ?\"[0-9.]+\"" | grep -Eo '[0-9.]+' | tail -n1
}
plugin_failed_starts() { plugin_annotation "$1" plugin-failures; }

at_least_failed_starts() { [ "$(plugin_failed_starts "$1")" -ge "$2" ] 2>/dev/null; }
gpu_allocatable() { node_api "$1" /api/v1/nodes | grep -Eq '"nvidia.com/gpu": ?"1"'; }

@test "after a reboot with the driver late, the GPUs come back once nvidia-smi answers, not after the back-off" {
  run "$GPUPROV" provision --name rb --cloud digitalocean --gpus H100:1
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"nvidia.com/gpu: 1"* ]]
  local ctr
  ctr=$(vm_container rb)
  docker exec "$ctr" systemctl is-enabled gpuprov-device-plugin-boot.service
  # Reboot with no driver answering: the plugin's starts fail and kubelet backs off (30 s, then
  # 60 s: the simulator's base is raised from 10 s, k3s's unit reads /etc/default/k3s).
  docker exec "$ctr" sh -c 'echo GPUPROV_K3S_SIM_BACKOFF_SECONDS=30 >>/etc/default/k3s'
  docker exec "$ctr" rm -f /etc/gpuprov-testvm/gpu
  docker restart "$ctr"
  wait_for 120 at_least_failed_starts rb 2
  run gpu_allocatable rb
  [ "$status" -ne 0 ]
  # The driver answers now; kubelet's next start is at `due` (up to 60 s away): the GPUs are
  # back before it.
  local due
  due=$(plugin_annotation rb plugin-start-due)
  docker exec "$ctr" sh -c 'echo H100:1 >/etc/gpuprov-testvm/gpu'
  wait_for 60 gpu_allocatable rb
  echo "GPU back at $(date +%s), the back-off ended at $due"
  [ "$(date +%s)" -lt "${due%.*}" ]
  run docker exec "$ctr" journalctl -u gpuprov-device-plugin-boot -o cat --no-pager
  echo "$output"
  [[ "$output" == *"device plugin crash-looping: deleting its pod"* ]]
}

boot_id_of() { "$GPUPROV" ssh "$1" -- cat /proc/sys/kernel/random/boot_id; }
booted_again() { local now; now=$(boot_id_of "$1" 2>/dev/null) && [ -n "$now" ] && [ "$now" != "$2" ]; }
backend_state() {
  curl -fsS "$CONTROL/instances?cloud=digitalocean" | /usr/bin/python3 -c '
import json, sys
print(*[i["state"] for i in json.load(sys.stdin)["instances"] if i["name"] == sys.argv[1]])' "$1"
}
backend_state_is() { [ "$(backend_state "$1")" = "$2" ]; }

@test "a reboot inside the VM boots it again (same address and disk, new boot_id); a power-off stops it" {
  run "$GPUPROV" provision --name rr --cloud digitalocean --no-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  local ctr boot address
  ctr=$(vm_container rr)
  address=$(field rr address)
  boot=$(boot_id_of rr)
  [ -n "$boot" ]
  [ "$boot" != "$(cat /proc/sys/kernel/random/boot_id)" ] # not the host kernel's
  "$GPUPROV" ssh rr -- sudo touch /var/tmp/kept-across-reboot
  "$GPUPROV" ssh rr -- sudo systemctl reboot || true
  wait_for 90 booted_again rr "$boot"
  [ "$(vm_container rr)" = "$ctr" ]
  [ "$(field rr address)" = "$address" ]
  "$GPUPROV" ssh rr -- test -e /var/tmp/kept-across-reboot
  backend_state_is rr running
  "$GPUPROV" ssh rr -- sudo systemctl poweroff || true
  wait_for 60 backend_state_is rr stopped
  run docker inspect -f '{{.State.ExitCode}}' "$ctr"
  [ "$output" = 130 ] # init ended by SIGINT: reboot(2)'s power-off in a PID namespace
}
