# Shared by the installer's test-VM bats files (testvm.bats, firewall_vm.bats, apt_vm.bats): a test
# VM (tests/fixtures/testvm) created with the parameters its README gives, and commands in it.
# shellcheck shell=bash
# A file that loads this one gets its setup (skip unless GPUPROV_INSTALLER_VM_TESTS=1) and
# teardown_file (the VM removed); its setup_file makes $VM from $IMAGE with start_vm.

setup() {
  [[ "${GPUPROV_INSTALLER_VM_TESTS:-0}" == 1 ]] || skip "set GPUPROV_INSTALLER_VM_TESTS=1"
}

teardown_file() {
  if [[ -n "${VM:-}" ]]; then docker rm -f "$VM" >/dev/null 2>&1 || true; fi
}

# start_vm HOSTNAME SEED ENTRY...: creates $VM from $IMAGE, copies SEED's top-level ENTRY...
# (var, root, etc, ...) over its / before the first boot (cloud-init reads the seed then), starts it.
start_vm() {
  local host="$1" seed="$2"
  shift 2
  docker create --name "$VM" --hostname "$host" --cap-add SYS_ADMIN --cap-add NET_ADMIN --cgroupns host \
    -v /sys/fs/cgroup:/sys/fs/cgroup:ro --tmpfs /run:rw,nosuid,nodev,exec,mode=755 \
    --tmpfs /run/lock:rw,nosuid,nodev,noexec --stop-signal SIGRTMIN+3 \
    "$IMAGE" /lib/systemd/systemd >/dev/null
  tar -C "$seed" -cf - "$@" | docker cp - "$VM:/"
  docker start "$VM" >/dev/null
}

# vm CMD...: CMD in the VM.
vm() { docker exec "$VM" "$@"; }

# wait_for SECONDS CMD...: poll CMD in the VM until it succeeds.
wait_for() {
  local limit="$1" i
  shift
  for ((i = 0; i < limit * 2; i++)); do
    vm "$@" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  return 1
}
