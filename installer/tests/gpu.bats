#!/usr/bin/env bats
# GPU: the NVIDIA runtime as containerd default (config.yaml), the toolkit, the pinned device plugin.

load helpers

setup() { common_setup; }
teardown() { common_teardown; }

PLUGIN_MANIFEST=var/lib/rancher/k3s/server/manifests/nvidia-device-plugin.yaml

@test "a GPU present at the first run: default-runtime nvidia and the device plugin before k3s starts" {
  with_gpu L4:1
  with_toolkit
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  grep -qx 'default-runtime: "nvidia"' "$SANDBOX/etc/rancher/k3s/config.yaml"
  grep -qx '          image: nvcr.io/nvidia/k8s-device-plugin:v0.19.3' "$SANDBOX/$PLUGIN_MANIFEST"
  grep -qx '  name: nvidia-device-plugin-daemonset' "$SANDBOX/$PLUGIN_MANIFEST"
  [ "$(k3s_starts)" -eq 1 ]
  [ "$(status .gpu_seen.present)" = true ]
  [ "$(status .gpu_seen.name)" = "NVIDIA L4" ]
  [ "$(status .gpu_seen.count)" = 1 ]
  [ "$(status .gpu_configured)" = true ]
  # Order in the log: the runtime is checked and config/manifest written before k3s starts.
  log="$SANDBOX/var/log/gpuprov-install.log"
  [ "$(grep -n 'step nvidia-toolkit' "$log" | cut -d: -f1)" -lt "$(grep -n 'step k3s-start' "$log" | cut -d: -f1)" ]
  [ "$(grep -n 'step device-plugin' "$log" | cut -d: -f1)" -lt "$(grep -n 'step k3s-start' "$log" | cut -d: -f1)" ]
  # Idempotent with a GPU too.
  run "$INSTALLER"
  [ "$(k3s_starts)" -eq 1 ]
}

@test "a GPU appearing later adds default-runtime, the runtime, the device plugin, and restarts k3s once" {
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  [ "$(k3s_starts)" -eq 1 ]
  [ "$(status .gpu_seen.present)" = false ]
  [ ! -e "$SANDBOX/$PLUGIN_MANIFEST" ]
  with_gpu A100-80GB:4
  run "$INSTALLER" # the toolkit is missing: auto mode installs it (fake apt-get, local key server)
  [ "$status" -eq 1 ] # ... but the key server is 127.0.0.1:1 here: refused
  [ "$(status .failed_step)" = nvidia-toolkit ]
  serve_nvidia_repo
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  grep -q 'install -y nvidia-container-toolkit' "$FAKE_APT_LOG"
  [ -x "$SANDBOX/usr/bin/nvidia-container-runtime" ]
  grep -q "signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg.* $HTTP_URL/stable/deb/\$(ARCH) /" \
    "$SANDBOX/etc/apt/sources.list.d/nvidia-container-toolkit.list"
  /usr/bin/gpg --dearmor <"$TEST_KEY" | cmp - "$SANDBOX/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
  grep -qx 'default-runtime: "nvidia"' "$SANDBOX/etc/rancher/k3s/config.yaml"
  grep -q 'nvcr.io/nvidia/k8s-device-plugin:v0.19.3' "$SANDBOX/$PLUGIN_MANIFEST"
  [ "$(k3s_starts)" -eq 2 ]
  grep -q ' restart k3s' "$FAKE_SYSTEMCTL_DIR/calls.log"
  [ "$(status .gpu_seen.count)" = 4 ]
  [ "$(status .gpu_seen.name)" = "NVIDIA A100-80GB" ]
  [ "$(status .k3s_action)" = restarted ]
  # Present now: no second apt run, no restart.
  run "$INSTALLER"
  [ "$(grep -c 'install -y' "$FAKE_APT_LOG")" -eq 1 ]
  [ "$(k3s_starts)" -eq 2 ]
}

@test "a toolkit installed by someone else between runs restarts k3s (it reads runtimes at start)" {
  with_gpu L4:1
  mkdir -p "$SANDBOX/usr/local/nvidia/toolkit"
  install -m 0755 /dev/null "$SANDBOX/usr/local/nvidia/toolkit/nvidia-container-runtime"
  run "$INSTALLER"
  [ "$(k3s_starts)" -eq 1 ]
  with_toolkit # a distro package next to the GPU Operator one: k3s's choice does not change
  run "$INSTALLER"
  [ "$(k3s_starts)" -eq 1 ]
  rm "$SANDBOX/usr/local/nvidia/toolkit/nvidia-container-runtime" # now k3s would pick /usr/bin
  run "$INSTALLER"
  [ "$(k3s_starts)" -eq 2 ]
}

@test "--toolkit skip with a GPU and no runtime fails at nvidia-toolkit and never runs apt" {
  with_gpu L4:1
  run "$INSTALLER" --toolkit skip
  [ "$status" -eq 1 ]
  [[ "$output" == *"failed step: nvidia-toolkit"* ]]
  [ "$(status .failed_step)" = nvidia-toolkit ]
  [ ! -e "$FAKE_APT_LOG" ]
  [ "$(k3s_starts)" -eq 0 ]
}

@test "a failing apt-get is reported at nvidia-toolkit" {
  with_gpu L4:1
  serve_nvidia_repo
  FAKE_APT_FAIL=1 run "$INSTALLER"
  [ "$status" -eq 1 ]
  [ "$(status .failed_step)" = nvidia-toolkit ]
  [[ "$(status .message)" == "apt-get update of /etc/apt/sources.list.d/nvidia-container-toolkit.list failed: E: fake apt-get failure" ]]
}

@test "a GPU configured once stays configured when nvidia-smi fails later (no flapping restarts)" {
  with_gpu L4:1
  with_toolkit
  run "$INSTALLER"
  [ "$(k3s_starts)" -eq 1 ]
  rm "$FAKE_GPU_FILE"
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  [[ "$output" == *"keeping the NVIDIA runtime"* ]]
  grep -qx 'default-runtime: "nvidia"' "$SANDBOX/etc/rancher/k3s/config.yaml"
  [ "$(k3s_starts)" -eq 1 ]
  [ "$(status .gpu_seen.present)" = false ]
  [ "$(status .gpu_configured)" = true ]
}

@test "nvidia-smi reporting no devices counts as no GPU" {
  with_gpu L4:0
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  refute grep -q default-runtime "$SANDBOX/etc/rancher/k3s/config.yaml"
}

@test "a GPU with a k3s older than v1.29 (no default-runtime) is refused at config" {
  with_gpu L4:1
  with_toolkit
  export FAKE_K3S_VERSION=v1.28.5+k3s1
  run "$INSTALLER" --k3s-version v1.28.5+k3s1
  [ "$status" -eq 1 ]
  [ "$(status .failed_step)" = config ]
  [[ "$(status .message)" == *"needs >= v1.29.0"* ]]
}
