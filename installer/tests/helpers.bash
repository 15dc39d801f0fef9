# Shared set-up for the installer's bats tests: a sandboxed root, fake commands first on PATH, and
# a metadata URL on 127.0.0.1 where nothing listens, so no test sends traffic off the machine.
# shellcheck shell=bash
# shellcheck disable=SC2034 # the variables set here are used by the .bats files

INSTALLER="$BATS_TEST_DIRNAME/../gpuprov-install.sh"
FAKES="$BATS_TEST_DIRNAME/fakes"
PINNED_K3S="$(sed -n 's/^readonly K3S_PINNED_VERSION="\(.*\)"$/\1/p' "$BATS_TEST_DIRNAME/../gpuprov-install.sh")"
REAL_PYTHON="$(command -v /usr/bin/python3 || command -v python3)"
REAL_CURL="$(command -v curl)"
TEST_KEY="$BATS_TEST_DIRNAME/nvidia-test-key.asc" # a test fixture key, no secret part
TEST_KEY_FPR=F467C4FBEE02FBB0CAB2EE4B9B71F0D446DD295B

common_setup() {
  unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
  SANDBOX="$BATS_TEST_TMPDIR/root"
  mkdir -p "$SANDBOX"
  export GPUPROV_INSTALL_ROOT="$SANDBOX"
  export FAKE_SYSTEMCTL_DIR="$BATS_TEST_TMPDIR/systemd"
  export FAKE_GPU_FILE="$BATS_TEST_TMPDIR/gpu"
  export FAKE_APT_LOG="$BATS_TEST_TMPDIR/apt.log"
  export GPUPROV_SYSFS_ROOT="$BATS_TEST_TMPDIR/sys" # an empty PCI bus unless a test adds devices
  export FAKE_FIREWALL_DIR="$BATS_TEST_TMPDIR/firewall"
  export GPUPROV_METADATA_URL="http://127.0.0.1:1" # refused at once
  export GPUPROV_K3S_DOWNLOAD_URL="http://127.0.0.1:1"
  export GPUPROV_NVIDIA_REPO_URL="http://127.0.0.1:1"
  unset GPUPROV_TOOLKIT GPUPROV_K3S_UNIT_TYPE FAKE_K3S_VERSION FAKE_SYSTEMCTL_START_DELAY
  unset GPUPROV_NVIDIA_DRIVER FAKE_NVIDIA_SMI_ERROR FAKE_DRIVER_VERSION FAKE_FABRIC_STATE
  unset GPUPROV_K3S_DOWNLOAD_ATTEMPTS GPUPROV_K3S_DOWNLOAD_STALL_SECONDS FAKE_APT_LOCKED_UNTIL FAKE_APT_FAIL
  # The repo key the tests serve (installer/tests/nvidia-test-key.asc) stands in for NVIDIA's.
  export GPUPROV_NVIDIA_KEY_FINGERPRINT="$TEST_KEY_FPR"
  export FAKE_K3S_PINNED="$PINNED_K3S"
  SPY_DIR="$BATS_TEST_TMPDIR/spy"
  CURL_LOG="$BATS_TEST_TMPDIR/curl.log"
  mkdir -p "$SPY_DIR"
  : >"$CURL_LOG"
  # curl spy: logs each call, then runs the real curl.
  printf '#!/bin/sh\nprintf "%%s\\n" "$*" >>"%s"\nexec "%s" "$@"\n' "$CURL_LOG" "$REAL_CURL" \
    >"$SPY_DIR/curl"
  chmod +x "$SPY_DIR/curl"
  export PATH="$SPY_DIR:$FAKES:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
  # The air-gap binary of the pinned version, as in the test VM image.
  install -D -m 0755 "$FAKES/k3s" "$SANDBOX/usr/local/bin/k3s"
  HTTP_PID=""
}

common_teardown() {
  if [[ -n "${HTTP_PID:-}" ]]; then kill "$HTTP_PID" 2>/dev/null || true; fi
}

# start_port_server CMD...: runs CMD (a local server that prints "port N" once it listens) in the
# background (HTTP_PID, killed by common_teardown) and waits up to 30 s for that line; sets
# SERVER_PORT. The output file exists before CMD starts, so the first read cannot race the fork.
start_port_server() {
  local out i
  out="$(mktemp "$BATS_TEST_TMPDIR/server.XXXXXX")"
  "$@" >"$out" 2>&1 &
  HTTP_PID=$!
  SERVER_PORT=""
  for ((i = 0; i < 300; i++)); do
    SERVER_PORT="$(sed -n 's/.*port \([0-9][0-9]*\).*/\1/p' "$out" | head -n1)"
    [[ -n "$SERVER_PORT" ]] && break
    sleep 0.1
  done
  [[ -n "$SERVER_PORT" ]] || { cat "$out" >&2; return 1; }
}

# start_http_server DIR: serve DIR on 127.0.0.1 (any free port); sets HTTP_URL and HTTP_PID.
start_http_server() {
  start_port_server "$REAL_PYTHON" -u -m http.server --bind 127.0.0.1 --directory "$1" 0
  HTTP_URL="http://127.0.0.1:$SERVER_PORT"
}

# k3s_starts: how many times k3s was started or restarted.
k3s_starts() {
  if [[ -f "$FAKE_SYSTEMCTL_DIR/calls.log" ]]; then
    grep -cE ' (start|restart) k3s' "$FAKE_SYSTEMCTL_DIR/calls.log" || true
  else
    echo 0
  fi
}

# status FIELD: a field of the status marker (jq path, e.g. .result).
status() { jq -r "$1" "$SANDBOX/var/lib/gpuprov/install-status.json"; }

# with_gpu TYPE:COUNT: the fake nvidia-smi sees that GPU.
with_gpu() { printf '%s\n' "$1" >"$FAKE_GPU_FILE"; }

# with_toolkit: nvidia-container-runtime where k3s looks for it.
with_toolkit() {
  install -D -m 0755 /dev/null "$SANDBOX/usr/bin/nvidia-container-runtime"
}

# serve_nvidia_repo: the test key as the repo's gpgkey on a local server (sets HTTP_URL).
serve_nvidia_repo() {
  mkdir -p "$BATS_TEST_TMPDIR/repo"
  cp "$TEST_KEY" "$BATS_TEST_TMPDIR/repo/gpgkey"
  start_http_server "$BATS_TEST_TMPDIR/repo"
  export GPUPROV_NVIDIA_REPO_URL="$HTTP_URL"
}

# refute CMD...: fails when CMD succeeds (bats ignores a plain `! cmd` that is not last).
refute() {
  if "$@"; then
    echo "expected to fail: $*" >&2
    return 1
  fi
}

# with_pci_device ADDRESS VENDOR CLASS: a device on the fake PCI bus ($GPUPROV_SYSFS_ROOT).
with_pci_device() {
  local d="$GPUPROV_SYSFS_ROOT/bus/pci/devices/$1"
  mkdir -p "$d"
  printf '%s\n' "$2" >"$d/vendor"
  printf '%s\n' "$3" >"$d/class"
}

# with_pci_gpus N: N NVIDIA GPUs (3D controllers) on the fake PCI bus, and a NIC.
with_pci_gpus() {
  local i
  with_pci_device 0000:00:03.0 0x1af4 0x020000
  for ((i = 0; i < $1; i++)); do with_pci_device "$(printf '0000:%02x:00.0' $((0x10 + i)))" 0x10de 0x030200; done
}
