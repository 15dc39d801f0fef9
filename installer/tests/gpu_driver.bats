#!/usr/bin/env bats
# An NVIDIA GPU on the PCI bus without a working driver (fail fast, or --nvidia-driver install and
# a reboot), and NVSwitch machines that need nvidia-fabricmanager.

load helpers

setup() { common_setup; }
teardown() { common_teardown; }

os_release() { mkdir -p "$SANDBOX/etc"; printf 'ID=%s\nVERSION_CODENAME=%s\n' "$1" "$2" >"$SANDBOX/etc/os-release"; }
reboot_machine() { rm -rf "$SANDBOX/run"; }

@test "a GPU on the PCI bus without a driver fails fast at gpu-detect, saying what to do" {
  with_pci_gpus 2
  SECONDS=0
  run "$INSTALLER"
  [ "$status" -eq 1 ]
  ((SECONDS < 10))
  [[ "$output" == *"failed step: gpu-detect"* ]]
  [ "$(status .failed_step)" = gpu-detect ]
  [[ "$(status .message)" == *"2 NVIDIA GPU(s) on the PCI bus but no working NVIDIA driver"* ]]
  [[ "$(status .message)" == *"use a GPU image of this cloud"* ]]
  [[ "$(status .message)" == *"--nvidia-driver install"* ]]
  [ "$(status .gpu_seen.present)" = false ]
  [ "$(status .gpu_seen.pci_nvidia)" = 2 ]
  [ "$(status .gpu_seen.driver)" = failing ]
  [[ "$(status .gpu_seen.driver_error)" == *"couldn't communicate with the NVIDIA driver"* ]]
  [ "$(status .reboot_required)" = false ]
  [ "$(k3s_starts)" -eq 0 ]
  [ ! -e "$FAKE_APT_LOG" ]
}

@test "no NVIDIA GPU on the PCI bus (a NIC, an NVSwitch bridge): plain k3s, driver none" {
  with_pci_device 0000:00:03.0 0x1af4 0x020000
  with_pci_device 0000:80:00.0 0x10de 0x068000
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  [ "$(status .gpu_seen.pci_nvidia)" = 0 ]
  [ "$(status .gpu_seen.driver)" = none ]
  [ "$(status .gpu_configured)" = false ]
}

@test "a working driver: driver ok, pci_nvidia counted" {
  with_pci_gpus 1
  with_gpu L4:1
  with_toolkit
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  [ "$(status .gpu_seen.driver)" = ok ]
  [ "$(status .gpu_seen.pci_nvidia)" = 1 ]
  [ "$(status .gpu_seen.driver_error)" = null ]
  [ "$(status .gpu_seen.nvswitch)" = false ]
  [ "$(status .fabric_manager)" = null ]
}

@test "a driver/library version mismatch fails at gpu-detect asking for a reboot" {
  with_pci_gpus 1
  with_gpu L4:1
  export FAKE_NVIDIA_SMI_ERROR="Failed to initialize NVML: Driver/library version mismatch"
  run "$INSTALLER" --nvidia-driver install
  [ "$status" -eq 1 ]
  [[ "$(status .message)" == *"version mismatch"*"reboot the machine"* ]]
  [ ! -e "$FAKE_APT_LOG" ]
}

@test "--nvidia-driver install on Ubuntu: the pinned server branch, reboot required, then the GPU after the reboot" {
  os_release ubuntu noble
  with_pci_gpus 1
  run "$INSTALLER" --nvidia-driver install
  [ "$status" -eq 0 ]
  grep -qx 'update' <(sed 's/^-o DPkg::Lock::Timeout=[0-9]* //' "$FAKE_APT_LOG")
  grep -qx 'ubuntu-drivers install --gpgpu nvidia:580-server' "$FAKE_APT_LOG"
  grep -q 'install -y nvidia-utils-580-server$' "$FAKE_APT_LOG"
  [ "$(status .result)" = ok ]
  [ "$(status .reboot_required)" = true ]
  [ "$(status .gpu_seen.driver)" = reboot-needed ]
  [ "$(status .gpu_configured)" = false ]
  [[ "$output" == *"reboot required"* ]]
  # Again before the reboot: nothing installed twice.
  lines_before=$(wc -l <"$FAKE_APT_LOG")
  GPUPROV_NVIDIA_DRIVER=install run "$INSTALLER"
  [ "$status" -eq 0 ]
  [ "$(wc -l <"$FAKE_APT_LOG")" -eq "$lines_before" ]
  [ "$(status .reboot_required)" = true ]
  # After the reboot the driver works: the GPU is configured, no reboot pending.
  reboot_machine
  with_gpu L4:1
  with_toolkit
  run "$INSTALLER" --nvidia-driver install
  [ "$status" -eq 0 ]
  [ "$(status .gpu_configured)" = true ]
  [ "$(status .reboot_required)" = false ]
  [ "$(status .gpu_seen.driver)" = ok ]
  [ "$(wc -l <"$FAKE_APT_LOG")" -eq "$lines_before" ]
}

@test "--nvidia-driver install: a driver that still does not work after the reboot fails, not loops" {
  os_release ubuntu jammy
  with_pci_gpus 1
  run "$INSTALLER" --nvidia-driver install
  [ "$status" -eq 0 ]
  reboot_machine
  run "$INSTALLER" --nvidia-driver install
  [ "$status" -eq 1 ]
  [ "$(status .failed_step)" = gpu-detect ]
  [[ "$(status .message)" == *"earlier run installed nvidia-driver 580-server and the machine rebooted since"* ]]
}

@test "--nvidia-driver install on Debian: nvidia-driver from non-free with the kernel headers" {
  os_release debian bookworm
  with_pci_gpus 1
  run "$INSTALLER" --nvidia-driver install
  [ "$status" -eq 0 ]
  grep -qx 'deb http://deb.debian.org/debian bookworm main contrib non-free non-free-firmware' \
    "$SANDBOX/etc/apt/sources.list.d/gpuprov-nvidia-driver.list"
  grep -q "install -y linux-headers-$(uname -r) nvidia-driver firmware-misc-nonfree$" "$FAKE_APT_LOG"
  [ "$(status .reboot_required)" = true ]
}

@test "--nvidia-driver install elsewhere fails naming the supported systems; a bad value is a usage error" {
  os_release fedora ''
  with_pci_gpus 1
  run "$INSTALLER" --nvidia-driver install
  [ "$status" -eq 1 ]
  [ "$(status .failed_step)" = nvidia-driver ]
  [[ "$(status .message)" == *"supports Ubuntu and Debian; this machine is 'fedora'"* ]]
  run "$INSTALLER" --nvidia-driver maybe
  [ "$status" -eq 2 ]
}

@test "NVSwitch without fabric manager installed: fails at fabric-manager naming the package of the driver's branch" {
  with_gpu H100-80GB:8
  with_toolkit
  mkdir -p "$SANDBOX/dev"
  : >"$SANDBOX/dev/nvidia-nvswitch0"
  export FAKE_DRIVER_VERSION=550.90.07
  run "$INSTALLER"
  [ "$status" -eq 1 ]
  [ "$(status .failed_step)" = fabric-manager ]
  [[ "$(status .message)" == *"install nvidia-fabricmanager-550"* ]]
  [ "$(status .gpu_seen.nvswitch)" = true ]
  [ "$(k3s_starts)" -eq 0 ]
}

@test "NVSwitch (seen in nvidia-smi -q) with fabric manager installed and stopped: started and enabled" {
  with_gpu H100-80GB:8
  with_toolkit
  mkdir -p "$SANDBOX/lib/systemd/system"
  : >"$SANDBOX/lib/systemd/system/nvidia-fabricmanager.service"
  FAKE_FABRIC_STATE="In Progress" run "$INSTALLER"
  [ "$status" -eq 0 ]
  grep -q ' enable nvidia-fabricmanager.service' "$FAKE_SYSTEMCTL_DIR/calls.log"
  grep -q ' start nvidia-fabricmanager.service' "$FAKE_SYSTEMCTL_DIR/calls.log"
  [ "$(status .fabric_manager)" = started ]
  [ "$(status .gpu_seen.nvswitch)" = true ]
  # Running now: the next run only reports it.
  FAKE_FABRIC_STATE="In Progress" run "$INSTALLER"
  [ "$(status .fabric_manager)" = active ]
  [ "$(grep -c ' start nvidia-fabricmanager.service' "$FAKE_SYSTEMCTL_DIR/calls.log")" -eq 1 ]
}

@test "fabric manager that does not start fails at fabric-manager" {
  with_gpu H100-80GB:8
  with_toolkit
  mkdir -p "$SANDBOX/lib/systemd/system" "$FAKE_SYSTEMCTL_DIR"
  : >"$SANDBOX/lib/systemd/system/nvidia-fabricmanager.service"
  touch "$FAKE_SYSTEMCTL_DIR/fail-start"
  FAKE_FABRIC_STATE="In Progress" run "$INSTALLER"
  [ "$status" -eq 1 ]
  [ "$(status .failed_step)" = fabric-manager ]
  [[ "$(status .message)" == *"nvidia-fabricmanager did not start"* ]]
}
