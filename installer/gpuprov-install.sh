#!/usr/bin/env bash
# gpuprov-install.sh: makes this machine a single-node k3s cluster (NVIDIA runtime and device
# plugin when `nvidia-smi` works). Runs as root at boot or pushed over SSH; a second run changes
# nothing. Steps (status marker phases): preflight, lock, gpu-detect, firewall, k3s-binary,
# nvidia-toolkit, public-ip, config, unit, device-plugin, host-firewall, k3s-start. Paths are below
# $GPUPROV_INSTALL_ROOT (tests). installer/README.md: steps, flags, marker, exit codes.
set -euo pipefail
set -E # the ERR trap also fires inside functions
umask 022
export TZ=UTC

readonly INSTALLER_VERSION="0.1.0"
readonly STATUS_SCHEMA_VERSION=1

# ---- Pins
# The k3s release installed unless present; >= v1.29 for `default-runtime` in config.yaml.
readonly K3S_PINNED_VERSION="v1.36.4+k3s1"
readonly K3S_MIN_VERSION_FOR_DEFAULT_RUNTIME="v1.29.0"
# >>> PINNED K3S HASHES: sha256 of the assets `k3s` (amd64) and `k3s-arm64` of K3S_PINNED_VERSION
# >>> from its sha256sum-<arch>.txt (a unit test compares them with docs/k3s-pin.md's table).
# >>> Other versions need --k3s-sha256. gpuprov reads these lines at build time.
readonly K3S_SHA256_AMD64="835873f37245fc615f547a2fe2af9402a347875f13fa64a1f136de644955ea3f"
readonly K3S_SHA256_ARM64="c920706346d5ad4e5cd3c7bf1bb09ce71ebe07fec829e513e40f1caf98aed8bb"
# NVIDIA device plugin image, pinned.
readonly DEVICE_PLUGIN_IMAGE="nvcr.io/nvidia/k8s-device-plugin:v0.19.3"
# The server driver branch --nvidia-driver install puts on Ubuntu (R580, long-term support).
readonly NVIDIA_DRIVER_BRANCH="580"

# ---- Exit codes
readonly EXIT_OK=0
readonly EXIT_STEP_FAILED=1
readonly EXIT_USAGE=2
readonly EXIT_LOCK_TIMEOUT=3

# ---- Settings (flags > environment > defaults)
ROOT="${GPUPROV_INSTALL_ROOT:-}"
ROOT="${ROOT%/}"
PUBLIC_IP=""
EXTRA_SANS=()
K3S_VERSION="$K3S_PINNED_VERSION"
K3S_SHA256_OVERRIDE=""
STATUS_FILE="/var/lib/gpuprov/install-status.json"
LOG_FILE="/var/log/gpuprov-install.log"
LOCK_FILE="/run/lock/gpuprov-install.lock"
LOCK_TIMEOUT_S=1800
RESTART_TIMEOUT_S=600
METADATA_URL="${GPUPROV_METADATA_URL:-}"
METADATA_ENABLED=1
PUBLIC_IP_SOURCE="auto"
TOOLKIT_MODE="${GPUPROV_TOOLKIT:-auto}"
UNIT_TYPE="${GPUPROV_K3S_UNIT_TYPE:-notify}"
NODE_FIREWALL="" # ssh-only, or empty: left as it is
ROLE=server CLUSTER_NODES=1 NODE_IP="" NODE_EXTERNAL_IP="" SERVER_URL="" TOKEN_FILE="" TOKEN=""
PEERS=() # --peer: the cluster's other nodes, admitted by the node firewall
PEERS_ONLY=0
K3S_DOWNLOAD_URL="${GPUPROV_K3S_DOWNLOAD_URL:-https://github.com/k3s-io/k3s/releases/download}"
# Download attempts, and seconds without connect or progress (< 1 KiB/s) before one is given up.
K3S_DOWNLOAD_ATTEMPTS="${GPUPROV_K3S_DOWNLOAD_ATTEMPTS:-4}"
K3S_DOWNLOAD_STALL_S="${GPUPROV_K3S_DOWNLOAD_STALL_SECONDS:-30}"
NVIDIA_REPO_URL="${GPUPROV_NVIDIA_REPO_URL:-https://nvidia.github.io/libnvidia-container}"
NVIDIA_DRIVER_MODE="${GPUPROV_NVIDIA_DRIVER:-image}" # image: use the image's; install: add one
# The PCI bus as sysfs shows it (the test VM points this at a fake tree).
SYSFS_ROOT="${GPUPROV_SYSFS_ROOT:-/sys}"
# The primary key fingerprint of NVIDIA's repo key (its install guide); another repo needs its own.
NVIDIA_KEY_FPR="${GPUPROV_NVIDIA_KEY_FINGERPRINT:-C95B321B61E88C1809C4F759DDCAE044F796ECB0}"
APT_LOCK_TIMEOUT_S="${GPUPROV_APT_LOCK_TIMEOUT_SECONDS:-900}"

# Paths on the node (prefix with $ROOT to touch them).
readonly K3S_BIN="/usr/local/bin/k3s"
readonly K3S_CONFIG="/etc/rancher/k3s/config.yaml"
readonly K3S_MANIFESTS_DIR="/var/lib/rancher/k3s/server/manifests"
readonly DEVICE_PLUGIN_MANIFEST="$K3S_MANIFESTS_DIR/nvidia-device-plugin.yaml"
readonly STATE_DIR="/var/lib/gpuprov"
readonly APPLIED_FINGERPRINT="$STATE_DIR/k3s-applied.sha256" # what k3s last (re)started with
readonly GPU_ENABLED_MARKER="$STATE_DIR/gpu-enabled"         # a GPU was configured once
readonly PUBLIC_IP_MEMORY="$STATE_DIR/public-ip"             # last known public IP
readonly DRIVER_INSTALLED="$STATE_DIR/nvidia-driver-installed"  # --nvidia-driver install ran
readonly KEPT_FLAGS="$STATE_DIR/k3s-kept-flags" # a found k3s unit's ExecStart flags, one a line
readonly DRIVER_INSTALLED_THIS_BOOT="/run/gpuprov/nvidia-driver-installed" # ... in this boot
# Where k3s looks for the NVIDIA runtime at start (besides its PATH).
readonly NVIDIA_RUNTIME_DIRS=("/usr/local/nvidia/toolkit" "/usr/bin")
readonly FW_SCRIPT="/etc/gpuprov/node-firewall.sh"
readonly FW_UNIT="/etc/systemd/system/gpuprov-firewall.service"
readonly FW_PEERS="/etc/gpuprov/node-firewall.peers" # the peer set in force, one a line
K3S_SVC=k3s # k3s-agent on an agent, as k3s's installer names it
readonly APT_HOLD_CONF="/etc/apt/apt.conf.d/51gpuprov-nvidia-hold"
# installer/README.md, "No daemon-reload on a live node" and "After a reboot".
readonly DEV_CHAR_RULE="/lib/udev/rules.d/71-nvidia-dev-char.rules"
readonly PLUGIN_BOOT_SCRIPT="/usr/local/sbin/gpuprov-device-plugin-boot"

# ---- Run state (what the status marker reports)
PHASE="preflight"
RESULT="running"
FAILED_STEP=""
MESSAGE=""
STARTED_AT=""
FINISHED_AT=""
GPU_PRESENT=false
GPU_NAME=""
GPU_COUNT=0
GPU_CONFIGURED=false
PCI_NVIDIA=0         # NVIDIA GPUs on the PCI bus, driver or not
GPU_DRIVER="none"    # ok | missing (no nvidia-smi) | failing | reboot-needed | none (no NVIDIA GPU)
GPU_DRIVER_ERROR=""  # what nvidia-smi said when it failed
NVSWITCH=false
FABRIC_MANAGER=""    # with NVSwitch: active | started (by this run)
REBOOT_REQUIRED=false
K3S_ACTION="none"
FW_STATE=""
NODE_STATE="" # server, agent-prepared or agent-joined once done
STATUS_ENABLED=0 # status is written only while this run holds the lock
LAST_ERR_CMD=""

# ---- Small helpers

# now_utc: sets NOW to the ISO-8601 UTC time with milliseconds (no fork: runs often).
now_utc() {
  local t="$EPOCHREALTIME"
  printf -v NOW '%(%Y-%m-%dT%H:%M:%S)T.%sZ' "${t%.*}" "${t#*.}"
  NOW="${NOW:0:23}Z"
}

# log MESSAGE...: one line on stderr and in the log file, tagged with this run's pid.
log() {
  now_utc
  printf 'gpuprov-install: %s\n' "$*" >&2
  if [[ -n "${LOG_PATH:-}" ]]; then
    printf '%s [run %s] %s\n' "$NOW" "$$" "$*" >>"$LOG_PATH" 2>/dev/null || true
  fi
}

# usage_error MESSAGE: bad invocation; nothing changed.
usage_error() {
  printf 'gpuprov-install: %s (see --help)\n' "$1" >&2
  exit "$EXIT_USAGE"
}

# fail MESSAGE: the current step failed; the EXIT trap records it.
fail() {
  MESSAGE="$*"
  exit "$EXIT_STEP_FAILED"
}

# step NAME: enter a phase; written to the status marker.
step() {
  PHASE="$1"
  log "step $PHASE"
  write_status
}

# json_str VALUE: sets JSON to VALUE as a JSON string literal (no fork).
json_str() {
  local s="$1" out="" c i
  s="${s//\\/\\\\}"
  s="${s//\"/\\\"}"
  s="${s//$'\n'/\\n}"
  s="${s//$'\t'/\\t}"
  s="${s//$'\r'/\\r}"
  if [[ "$s" == *[$'\001'-$'\037']* ]]; then
    for ((i = 0; i < ${#s}; i++)); do
      c="${s:i:1}"
      if [[ "$c" < ' ' ]]; then printf -v c '\\u%04x' "'$c"; fi
      out+="$c"
    done
    s="$out"
  fi
  JSON="\"$s\""
}

# json_or_null VALUE: sets JSON to a JSON string, or null when VALUE is empty.
json_or_null() { if [[ -n "$1" ]]; then json_str "$1"; else JSON=null; fi; }

# atomic_write DEST MODE: stdin to DEST via a temp file in the same folder and a rename.
atomic_write() {
  local dest="$1" mode="$2" tmp
  mkdir -p "${dest%/*}"
  tmp="${dest%/*}/.${dest##*/}.tmp.$$"
  cat >"$tmp"
  chmod "$mode" "$tmp"
  mv -f "$tmp" "$dest"
}

# write_if_changed DEST MODE: stdin to DEST atomically unless DEST already holds exactly that.
# Returns 0 when DEST changed, 1 when it was already up to date (mode is fixed either way).
write_if_changed() {
  local dest="$1" mode="$2" tmp
  mkdir -p "${dest%/*}"
  tmp="${dest%/*}/.${dest##*/}.tmp.$$"
  cat >"$tmp"
  if [[ -f "$dest" ]] && cmp -s "$tmp" "$dest"; then
    rm -f "$tmp"
    chmod "$mode" "$dest"
    return 1
  fi
  chmod "$mode" "$tmp"
  mv -f "$tmp" "$dest"
  return 0
}

# json_field NAME VALUE [last]: append '  "NAME": VALUE,' to DOC (VALUE already JSON).
json_field() {
  DOC+="  \"$1\": $2"
  if [[ "${3:-}" == last ]]; then DOC+=$'\n'; else DOC+=$',\n'; fi
}

# write_status: the status marker, atomically, while this run holds the lock (forks only for mv).
write_status() {
  [[ "$STATUS_ENABLED" == 1 ]] || return 0
  local sans="" s tmp="$STATUS_PATH.tmp.$$"
  DOC=$'{\n'
  json_field schema_version "$STATUS_SCHEMA_VERSION"
  json_str "$INSTALLER_VERSION"; json_field installer_version "$JSON"
  json_field pid "$$"
  json_str "$PHASE"; json_field phase "$JSON"
  json_str "$RESULT"; json_field result "$JSON"
  json_or_null "$FAILED_STEP"; json_field failed_step "$JSON"
  json_or_null "$MESSAGE"; json_field message "$JSON"
  json_or_null "$GPU_NAME"
  local gpu_seen="{\"present\": $GPU_PRESENT, \"name\": $JSON, \"count\": $GPU_COUNT"
  json_str "$GPU_DRIVER"
  gpu_seen+=", \"pci_nvidia\": $PCI_NVIDIA, \"driver\": $JSON"
  json_or_null "$GPU_DRIVER_ERROR"
  gpu_seen+=", \"driver_error\": $JSON, \"nvswitch\": $NVSWITCH}"
  json_field gpu_seen "$gpu_seen"
  json_or_null "$FABRIC_MANAGER"; json_field fabric_manager "$JSON"
  json_field reboot_required "$REBOOT_REQUIRED"
  json_field gpu_configured "$GPU_CONFIGURED"
  json_str "$K3S_VERSION"; json_field k3s_version "$JSON"
  json_str "$K3S_ACTION"; json_field k3s_action "$JSON"
  json_or_null "$PUBLIC_IP"; json_field public_ip "$JSON"
  json_or_null "$FW_STATE"; json_field node_firewall "$JSON"
  json_field role "\"$ROLE\""
  json_or_null "$NODE_STATE"; json_field state "$JSON"
  for s in "${TLS_SANS[@]}"; do json_str "$s"; sans+="${sans:+, }$JSON"; done
  json_field tls_san "[$sans]"
  json_str "$LOG_FILE"; json_field log_file "$JSON"
  json_or_null "$STARTED_AT"; json_field started_at "$JSON"
  json_or_null "$FINISHED_AT"; json_field finished_at "$JSON" last
  DOC+=$'}\n'
  printf '%s' "$DOC" >"$tmp"
  mv -f "$tmp" "$STATUS_PATH"
}

# on_exit: final status and the one-line verdict on stderr.
on_exit() {
  local rc=$?
  trap - EXIT
  if [[ "$rc" == 0 ]]; then return 0; fi
  if [[ "$rc" == "$EXIT_USAGE" ]]; then exit "$rc"; fi
  if [[ -z "$MESSAGE" ]]; then
    MESSAGE="command failed (exit $rc)${LAST_ERR_CMD:+: $LAST_ERR_CMD}"
  fi
  RESULT="failed"
  FAILED_STEP="$PHASE"
  now_utc
  FINISHED_AT="$NOW"
  write_status || true
  log "FAILED at step $PHASE: $MESSAGE"
  # The last line says what failed and why (gpuprov shows it to the user).
  printf 'gpuprov-install: failed step: %s: %s (log: %s, status: %s)\n' "$PHASE" "$MESSAGE" \
    "$LOG_FILE" "$STATUS_FILE" >&2
  exit "$rc"
}

# need_cmd NAME...: each must be on PATH.
need_cmd() {
  local c
  for c in "$@"; do
    command -v "$c" >/dev/null 2>&1 || fail "required command '$c' not found on PATH"
  done
}

# valid_host VALUE: an IPv4/IPv6 address or DNS name (no characters that could break the YAML).
valid_host() { [[ "$1" =~ ^[A-Za-z0-9]([A-Za-z0-9.:-]{0,252})$ ]]; }

# valid_ipv4 VALUE
valid_ipv4() {
  local IFS=. o
  [[ "$1" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] || return 1
  for o in $1; do ((10#$o <= 255)) || return 1; done
}

# version_ge A B: release tag A >= B (ignores the +k3sN suffix).
version_ge() {
  local a="${1#v}" b="${2#v}"
  a="${a%%+*}"
  b="${b%%+*}"
  [[ "$(printf '%s\n%s\n' "$a" "$b" | sort -V | head -n1)" == "$b" ]]
}

# k3s_version_of BINARY: the release tag printed by `BINARY --version`, or nothing.
k3s_version_of() {
  local out
  out="$(timeout 30 "$1" --version 2>/dev/null)" || return 0
  awk 'NR == 1 && $1 == "k3s" && $2 == "version" { print $3 }' <<<"$out"
}

# ---- Arguments
parse_args() {
  local opt val
  while [[ $# -gt 0 ]]; do
    opt="$1"
    val=""
    case "$opt" in
      --*=*)
        val="${opt#*=}"
        opt="${opt%%=*}"
        ;;
      --no-metadata | --peers-only | --help | --version) ;;
      --*) # every other option takes a value
        [[ $# -ge 2 ]] || usage_error "$opt needs a value"
        val="$2"
        shift
        ;;
    esac
    case "$opt" in
      --public-ip) valid_host "$val" || usage_error "--public-ip: not an address: '$val'"; PUBLIC_IP="$val" ;;
      --tls-san) valid_host "$val" || usage_error "--tls-san: not a name or address: '$val'"; EXTRA_SANS+=("$val") ;;
      --k3s-version)
        [[ "$val" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-rc[0-9]+)?\+k3s[0-9]+$ ]] ||
          usage_error "--k3s-version: expected a release tag like $K3S_PINNED_VERSION, got '$val'"
        K3S_VERSION="$val"
        ;;
      --k3s-sha256)
        [[ "$val" =~ ^[0-9a-fA-F]{64}$ ]] || usage_error "--k3s-sha256: expected 64 hex digits"
        K3S_SHA256_OVERRIDE="${val,,}"
        ;;
      --k3s-download-url)
        [[ "$val" =~ ^https?://[^[:space:]]+$ ]] ||
          usage_error "--k3s-download-url: expected an http:// or https:// URL, got '$val'"
        [[ ! "$val" =~ ^https?://[^/]*@ ]] ||
          usage_error "--k3s-download-url: no user name or password in the URL (it is logged)"
        K3S_DOWNLOAD_URL="$val"
        ;;
      --status-file) STATUS_FILE="$val" ;;
      --log-file) LOG_FILE="$val" ;;
      --lock-file) LOCK_FILE="$val" ;;
      --lock-timeout) [[ "$val" =~ ^[0-9]+$ ]] || usage_error "--lock-timeout: seconds"; LOCK_TIMEOUT_S="$val" ;;
      --restart-timeout) [[ "$val" =~ ^[1-9][0-9]*$ ]] || usage_error "--restart-timeout: seconds"; RESTART_TIMEOUT_S="$val" ;;
      --metadata-url) METADATA_URL="$val" ;;
      --no-metadata) METADATA_ENABLED=0 ;;
      --public-ip-source)
        [[ "$val" =~ ^(auto|ec2|openstack|gce|digitalocean|nebius|interface|none)$ ]] || usage_error "--public-ip-source: '$val'?"
        PUBLIC_IP_SOURCE="$val"
        ;;
      --toolkit) TOOLKIT_MODE="$val" ;;
      --nvidia-driver) NVIDIA_DRIVER_MODE="$val" ;;
      --unit-type) UNIT_TYPE="$val" ;;
      --node-firewall) [[ "$val" == ssh-only ]] || usage_error "--node-firewall: ssh-only, got '$val'"; NODE_FIREWALL="$val" ;;
      --peer | --node-ip | --node-external-ip)
        valid_ipv4 "$val" || [[ "$val" =~ ^[0-9A-Fa-f:]{2,39}$ && "$val" == *:*:* || "$opt$val" == --node-ipmetadata ]] ||
          usage_error "$opt: not an IP address: '$val'"
        [[ "$opt" != --peer ]] || PEERS+=("$val")
        ;;&
      --role | --cluster-nodes | --server-url | --token-file | --node-ip | --node-external-ip)
        [[ "$opt$val" =~ ^--(role(server|agent)|cluster-nodes[1-9][0-9]{0,3}|server-urlhttps://[][A-Za-z0-9.:-]+|token-file/.+|node.*)$ ]] ||
          usage_error "$opt: not valid: '$val'"
        opt="${opt#--}" && opt="${opt//-/_}"
        printf -v "${opt^^}" %s "$val"
        ;;
      --peer) ;;
      --peers-only) PEERS_ONLY=1 NODE_FIREWALL=ssh-only ;;
      --nvidia-repo-url) NVIDIA_REPO_URL="$val" ;;
      --nvidia-key-fingerprint) NVIDIA_KEY_FPR="$val" ;;
      --apt-lock-timeout) APT_LOCK_TIMEOUT_S="$val" ;;
      -h | --help)
        echo "usage: gpuprov-install.sh [--public-ip IP] [options] (see installer/README.md)"
        exit "$EXIT_OK"
        ;;
      --version) printf '%s\n' "$INSTALLER_VERSION"; exit "$EXIT_OK" ;;
      *) usage_error "unknown argument '$opt'" ;;
    esac
    shift
  done
  case "$TOOLKIT_MODE" in auto | skip) ;; *) usage_error "--toolkit: auto or skip, got '$TOOLKIT_MODE'" ;; esac
  case "$UNIT_TYPE" in notify | exec) ;; *) usage_error "--unit-type: notify or exec, got '$UNIT_TYPE'" ;; esac
  case "$NVIDIA_DRIVER_MODE" in
    image | install) ;;
    *) usage_error "--nvidia-driver: image or install, got '$NVIDIA_DRIVER_MODE'" ;;
  esac
  [[ "$STATUS_FILE" == /* && "$LOG_FILE" == /* && "$LOCK_FILE" == /* ]] ||
    usage_error "--status-file, --log-file and --lock-file take absolute paths"
  [[ -z "$SERVER_URL$TOKEN_FILE" || ("$ROLE" == agent && -n "$SERVER_URL" && -n "$TOKEN_FILE") ]] ||
    usage_error "--server-url and --token-file go together, with --role agent"
  [[ "$ROLE" == server ]] || K3S_SVC=k3s-agent
  K3S_UNIT="/etc/systemd/system/$K3S_SVC.service"
  K3S_ENV="$K3S_UNIT.env"
  [[ "$NVIDIA_REPO_URL" =~ ^https?://[^[:space:]@]+$ ]] ||
    usage_error "--nvidia-repo-url: an http:// or https:// URL without user name, got '$NVIDIA_REPO_URL'"
  NVIDIA_KEY_FPR="${NVIDIA_KEY_FPR//[[:space:]]/}"
  NVIDIA_KEY_FPR="${NVIDIA_KEY_FPR^^}"
  [[ "$NVIDIA_KEY_FPR" =~ ^[0-9A-F]{40}$ ]] || usage_error "--nvidia-key-fingerprint: 40 hex digits"
  [[ "$APT_LOCK_TIMEOUT_S" =~ ^[0-9]{1,5}$ ]] || usage_error "--apt-lock-timeout: seconds"
  METADATA_URL="${METADATA_URL%/}"
  NVIDIA_REPO_URL="${NVIDIA_REPO_URL%/}"
  K3S_DOWNLOAD_URL="${K3S_DOWNLOAD_URL%/}"
  [[ "$K3S_DOWNLOAD_ATTEMPTS" =~ ^[1-9][0-9]?$ ]] ||
    usage_error "GPUPROV_K3S_DOWNLOAD_ATTEMPTS: 1 to 99, got '$K3S_DOWNLOAD_ATTEMPTS'"
  [[ "$K3S_DOWNLOAD_STALL_S" =~ ^[1-9][0-9]{0,3}$ ]] ||
    usage_error "GPUPROV_K3S_DOWNLOAD_STALL_SECONDS: 1 to 9999, got '$K3S_DOWNLOAD_STALL_S'"
}

# ---- Steps

preflight() {
  if [[ -z "$ROOT" && "$(id -u)" != 0 ]]; then
    fail "must run as root (use sudo)"
  fi
  need_cmd flock timeout sha256sum cmp mktemp awk sort uname systemctl
  [[ -n "$TOKEN_FILE" ]] || return 0
  # The join token: read, the file removed at once (whatever happens next), never logged.
  TOKEN="$(head -c 4096 "$ROOT$TOKEN_FILE")" || true
  rm -f "$ROOT$TOKEN_FILE"
  [[ "$TOKEN" =~ ^[A-Za-z0-9:._+/=@-]+$ ]] || fail "--token-file $TOKEN_FILE: missing, or not a k3s token"
}

take_lock() {
  mkdir -p "$(dirname "$LOCK_PATH")"
  exec 9>>"$LOCK_PATH"
  if ! flock -n 9; then
    log "another gpuprov-install run holds $LOCK_FILE: waiting up to ${LOCK_TIMEOUT_S}s"
    if ! flock -w "$LOCK_TIMEOUT_S" 9; then
      MESSAGE="another run still holds $LOCK_FILE after ${LOCK_TIMEOUT_S}s; nothing changed"
      exit "$EXIT_LOCK_TIMEOUT"
    fi
  fi
  log "lock acquired"
  mkdir -p "${STATUS_PATH%/*}"
  STATUS_ENABLED=1
}

# NVIDIA GPUs on the PCI bus (vendor 0x10de, class 0x03xxxx; NVSwitches are 0x0680xx), driver or not.
count_pci_nvidia_gpus() {
  local d v c
  PCI_NVIDIA=0
  for d in "$SYSFS_ROOT"/bus/pci/devices/*; do
    v="$(cat "$d/vendor" 2>/dev/null)" || continue
    c="$(cat "$d/class" 2>/dev/null)" || continue
    [[ "${v,,}" == 0x10de && "${c,,}" == 0x03* ]] && PCI_NVIDIA=$((PCI_NVIDIA + 1))
  done
  return 0
}

detect_gpu() {
  local out=""
  GPU_PRESENT=false
  GPU_DRIVER=failing
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    GPU_DRIVER=missing GPU_DRIVER_ERROR="nvidia-smi is not installed"
  elif out="$(timeout 60 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null)" &&
    [[ -n "${out//[[:space:]]/}" ]]; then
    GPU_PRESENT=true GPU_DRIVER=ok
    GPU_NAME="$(head -n1 <<<"$out")"
    GPU_COUNT="$(grep -c . <<<"$out")"
  else
    GPU_DRIVER_ERROR="$({ timeout 60 nvidia-smi -L 2>&1 || true; } | grep -m1 .)" || GPU_DRIVER_ERROR="nvidia-smi failed"
  fi
  count_pci_nvidia_gpus
  if [[ "$GPU_PRESENT" == true ]]; then
    log "GPU seen: $GPU_COUNT x $GPU_NAME (on the PCI bus: $PCI_NVIDIA)"
    GPU_CONFIGURED=true
  elif [[ -f "$ROOT$GPU_ENABLED_MARKER" ]]; then
    log "WARNING: nvidia-smi does not work now, but an earlier run configured a GPU: keeping the" \
      "NVIDIA runtime and device plugin (check the driver with 'nvidia-smi')"
    GPU_CONFIGURED=true
  elif ((PCI_NVIDIA > 0)); then
    gpu_without_driver
  else
    GPU_DRIVER=none
    log "no GPU (none on the PCI bus, nvidia-smi missing or failing): plain k3s"
  fi
}

# A GPU without a working driver: fail saying what to do, or (--nvidia-driver install) install
# one; the run then goes on with plain k3s and a reboot loads the driver (installer/README.md).
gpu_without_driver() {
  local what="$PCI_NVIDIA NVIDIA GPU(s) on the PCI bus but no working NVIDIA driver (nvidia-smi: $GPU_DRIVER_ERROR)"
  [[ "$GPU_DRIVER_ERROR" != *"version mismatch"* ]] ||
    fail "$what: the driver was upgraded without a reboot; reboot the machine, then run again"
  if [[ -f "$ROOT$DRIVER_INSTALLED" ]]; then
    [[ -f "$ROOT$DRIVER_INSTALLED_THIS_BOOT" ]] ||
      fail "$what, although an earlier run installed $(<"$ROOT$DRIVER_INSTALLED") and the machine" \
        "rebooted since; look at 'dmesg | grep -i nvidia' (Secure Boot, kernel headers)"
  elif [[ "$NVIDIA_DRIVER_MODE" == install ]]; then
    step nvidia-driver
    install_nvidia_driver
  else
    fail "$what: use a GPU image of this cloud (one with the NVIDIA driver), or let the installer" \
      "add the distribution's server driver with --nvidia-driver install (gpuprov: the same flag)"
  fi
  GPU_DRIVER=reboot-needed REBOOT_REQUIRED=true
  log "NVIDIA driver installed ($(<"$ROOT$DRIVER_INSTALLED")): it loads at the next boot; plain k3s until then"
}

# apt_get ARGS...: apt-get through apt_run (waits out other apt runs' locks; SIGINT, never
# SIGTERM, at the bound so dpkg is not cut mid-unpack).
apt_get() {
  apt_run timeout --foreground -s INT 1800 apt-get -o DPkg::Lock::Timeout=30 "$@" ||
    fail "apt-get $* failed: $APT_ERROR"
}

# The distribution's server driver as its documentation says (installer/README.md, nvidia-driver).
install_nvidia_driver() {
  local id codename b="$NVIDIA_DRIVER_BRANCH"
  id="$(sed -n 's/^ID=["'\'']\{0,1\}\([^"'\'']*\).*/\1/p' "$ROOT/etc/os-release" 2>/dev/null)" || true
  codename="$(sed -n 's/^VERSION_CODENAME=["'\'']\{0,1\}\([^"'\'']*\).*/\1/p' "$ROOT/etc/os-release" 2>/dev/null)" || true
  need_cmd apt-get
  log "installing the NVIDIA driver on ${id:-?} ${codename:-?} (output in $LOG_FILE)"
  case "$id" in
    ubuntu)
      apt_get update
      if command -v ubuntu-drivers >/dev/null 2>&1; then
        apt_run timeout --foreground -s INT 1800 ubuntu-drivers install --gpgpu "nvidia:$b-server" ||
          fail "ubuntu-drivers install --gpgpu nvidia:$b-server failed: $APT_ERROR"
        apt_get install -y "nvidia-utils-$b-server"
      else
        apt_get install -y "nvidia-driver-$b-server"
      fi
      b="nvidia-driver $b-server"
      ;;
    debian)
      printf 'deb http://deb.debian.org/debian %s main contrib non-free non-free-firmware\n' "$codename" |
        write_if_changed "$ROOT/etc/apt/sources.list.d/gpuprov-nvidia-driver.list" 0644 || true
      apt_get update
      apt_get install -y "linux-headers-$(uname -r)" nvidia-driver firmware-misc-nonfree
      b="Debian's nvidia-driver ($codename non-free)"
      ;;
    *) fail "--nvidia-driver install supports Ubuntu and Debian; this machine is '${id:-unknown}'" ;;
  esac
  mkdir -p "$ROOT$STATE_DIR" "$ROOT${DRIVER_INSTALLED_THIS_BOOT%/*}"
  printf '%s\n' "$b" | atomic_write "$ROOT$DRIVER_INSTALLED" 0644
  : >"$ROOT$DRIVER_INSTALLED_THIS_BOOT"
}

# NVSwitch machines: CUDA fails (error 802) until nvidia-fabricmanager runs. Start it when
# installed, else fail naming the package of the driver's branch.
ensure_fabric_manager() {
  local fm=nvidia-fabricmanager.service br d state
  state="$(timeout 60 nvidia-smi -q 2>/dev/null | awk '/^ *Fabric *$/ { f = 1 } f && /State/ { print $NF; exit }')" || true
  if [[ "$state" == "" || "$state" == "N/A" ]] && ! compgen -G "$ROOT/dev/nvidia-nvswitch*" >/dev/null; then
    return 0
  fi
  NVSWITCH=true
  if ! timeout 60 systemctl is-active --quiet "$fm"; then
    br="$(timeout 60 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n1)" || true
    br="${br%%.*}"
    for d in /etc/systemd/system /lib/systemd/system /usr/lib/systemd/system ""; do
      [[ -e "$ROOT$d/$fm" ]] && break
    done
    [[ -n "$d" ]] || command -v nv-fabricmanager >/dev/null 2>&1 ||
      fail "this machine has NVSwitch, and CUDA fails (error 802) until NVIDIA fabric manager runs," \
        "which is not installed: install nvidia-fabricmanager-${br:-<driver branch>}, then run again"
    log "NVSwitch: starting $fm"
    timeout 120 systemctl enable "$fm" >>"$LOG_PATH" 2>&1 || log "WARNING: systemctl enable $fm failed"
    { timeout 300 systemctl start "$fm" 9>&- && timeout 60 systemctl is-active --quiet "$fm"; } ||
      fail "nvidia-fabricmanager did not start (it must match driver branch $br); see 'journalctl -u nvidia-fabricmanager'"
    FABRIC_MANAGER=started
  fi
  FABRIC_MANAGER="${FABRIC_MANAGER:-active}"
  log "NVSwitch: nvidia-fabricmanager $FABRIC_MANAGER"
}

# k3s_asset_and_hash: sets ASSET (release file name) and EXPECTED_SHA256 (may be empty).
k3s_asset_and_hash() {
  local machine
  machine="$(uname -m)"
  case "$machine" in
    x86_64 | amd64) ASSET="k3s"; EXPECTED_SHA256="$K3S_SHA256_AMD64" ;;
    aarch64 | arm64) ASSET="k3s-arm64"; EXPECTED_SHA256="$K3S_SHA256_ARM64" ;;
    *) fail "unsupported machine type '$machine' (k3s assets exist for x86_64 and aarch64 here)" ;;
  esac
  if [[ "$K3S_VERSION" != "$K3S_PINNED_VERSION" ]]; then EXPECTED_SHA256=""; fi
  if [[ -n "$K3S_SHA256_OVERRIDE" ]]; then EXPECTED_SHA256="$K3S_SHA256_OVERRIDE"; fi
}

# fetch_release URL DEST: URL to DEST in up to K3S_DOWNLOAD_ATTEMPTS bounded attempts (see the
# settings); HTTP 4xx but 408/429 is not retried. On failure sets FETCH_ERROR to why.
fetch_release() {
  local url="$1" dest="$2" attempt code rc err
  local max_s=$((K3S_DOWNLOAD_STALL_S * 20)) pause=$(((K3S_DOWNLOAD_STALL_S + 4) / 5))
  local err_file="$dest.err"
  for ((attempt = 1; attempt <= K3S_DOWNLOAD_ATTEMPTS; attempt++)); do
    log "downloading $url (attempt $attempt of $K3S_DOWNLOAD_ATTEMPTS)"
    rc=0
    code="$(timeout "$((max_s + 10))" curl -fsS -L --proto '=http,https' --proto-redir '=http,https' \
      --connect-timeout "$K3S_DOWNLOAD_STALL_S" --speed-limit 1024 \
      --speed-time "$K3S_DOWNLOAD_STALL_S" --max-time "$max_s" -w '%{http_code}' -o "$dest" \
      "$url" 2>"$err_file")" || rc=$?
    if [[ "$rc" == 0 ]]; then
      rm -f "$err_file"
      return 0
    fi
    err="$(tail -n1 "$err_file" 2>/dev/null)"
    case "$rc" in
      124) err="no answer within $((max_s + 10))s" ;;
      28) err="timed out (no progress for ${K3S_DOWNLOAD_STALL_S}s, or over ${max_s}s): ${err:-curl exit 28}" ;;
      18) err="the transfer ended early (partial file): ${err:-curl exit 18}" ;;
      *) err="${err:-curl exit $rc}" ;;
    esac
    log "download attempt $attempt of $K3S_DOWNLOAD_ATTEMPTS failed: $err"
    if [[ "$rc" == 22 && "$code" == 4?? && "$code" != 408 && "$code" != 429 ]]; then
      rm -f "$err_file"
      FETCH_ERROR="download of $url failed: HTTP $code (no such release asset; check"
      FETCH_ERROR+=" --k3s-version and --k3s-download-url)"
      return 1
    fi
    if ((attempt < K3S_DOWNLOAD_ATTEMPTS)); then sleep "$pause"; fi
  done
  rm -f "$err_file"
  FETCH_ERROR="download of $url failed after $K3S_DOWNLOAD_ATTEMPTS attempts (last: $err);"
  FETCH_ERROR+=" check the node's network or --k3s-download-url (log: $LOG_FILE)"
  return 1
}

ensure_k3s_binary() {
  local bin="$ROOT$K3S_BIN" have="" tmp got url
  if [[ -x "$bin" ]]; then
    have="$(k3s_version_of "$bin")"
    if [[ "$have" == "$K3S_VERSION" ]]; then
      log "k3s $K3S_VERSION already at $K3S_BIN: using it as is (no download)"
      return 0
    fi
    log "k3s at $K3S_BIN reports '${have:-no version}', want $K3S_VERSION: replacing it"
  fi
  k3s_asset_and_hash
  if [[ -z "$EXPECTED_SHA256" ]]; then
    fail "no sha256 pinned for k3s $K3S_VERSION ($ASSET): refusing to download an unverified" \
      "binary. Pre-stage the binary at $K3S_BIN (air gap), or pass --k3s-sha256 with the hash" \
      "from the release's sha256sum file"
  fi
  need_cmd curl
  url="$K3S_DOWNLOAD_URL/${K3S_VERSION//+/%2B}/$ASSET"
  mkdir -p "$(dirname "$bin")"
  tmp="$(mktemp "$(dirname "$bin")/.k3s.download.XXXXXX")"
  if ! fetch_release "$url" "$tmp"; then
    rm -f "$tmp"
    fail "$FETCH_ERROR"
  fi
  got="$(sha256sum "$tmp" | awk '{ print $1 }')"
  if [[ "$got" != "$EXPECTED_SHA256" ]]; then
    rm -f "$tmp"
    fail "sha256 mismatch for $url: got $got, want $EXPECTED_SHA256 (binary discarded)"
  fi
  chmod 0755 "$tmp"
  have="$(k3s_version_of "$tmp")"
  if [[ "$have" != "$K3S_VERSION" ]]; then
    rm -f "$tmp"
    fail "downloaded k3s reports version '${have:-none}', want $K3S_VERSION"
  fi
  mv -f "$tmp" "$bin"
  log "installed k3s $K3S_VERSION at $K3S_BIN (sha256 $got)"
}

# k3s_links: kubectl, crictl and ctr as links to k3s where no such command exists (any route).
k3s_links() {
  local link
  for link in kubectl crictl ctr; do
    if [[ ! -e "$ROOT/usr/local/bin/$link" ]] && ! command -v "$link" >/dev/null 2>&1; then
      ln -s k3s "$ROOT/usr/local/bin/$link"
      log "linked /usr/local/bin/$link to k3s"
    fi
  done
}

# find_nvidia_runtime: print where k3s will find nvidia-container-runtime, or nothing.
find_nvidia_runtime() {
  local d
  for d in "${NVIDIA_RUNTIME_DIRS[@]}"; do
    if [[ -x "$ROOT$d/nvidia-container-runtime" ]]; then
      printf '%s\n' "$d/nvidia-container-runtime"
      return 0
    fi
  done
  command -v nvidia-container-runtime 2>/dev/null || true
}

# apt_run CMD...: CMD (apt-get or dpkg), output in the log. While it fails on a lock another apt
# holds (cloud-init, apt-daily, unattended-upgrades; `apt-get update` never waits for its lists
# lock) it runs again every 5 s up to APT_LOCK_TIMEOUT_S, saying who holds it. On failure
# APT_ERROR is apt's last `E:` line but the "ignored" summary, or the lock it could not get.
apt_run() {
  local out="$LOG_PATH.apt" t0=$SECONDS rc held
  while :; do
    rc=0 held=""
    DEBIAN_FRONTEND=noninteractive "$@" >"$out" 2>&1 9>&- || rc=$?
    cat "$out" >>"$LOG_PATH"
    [[ "$rc" == 0 ]] || held="$(grep -m1 -E 'Could not get lock|dpkg frontend (lock )?(is|was) locked' "$out")" || true
    if [[ -z "$held" ]] || ((SECONDS - t0 >= APT_LOCK_TIMEOUT_S)); then break; fi
    log "waiting for apt's lock ($((SECONDS - t0))s of ${APT_LOCK_TIMEOUT_S}s): ${held#E: }"
    # The running marker says it too (gpuprov's progress); MESSAGE is "" while a run goes on.
    [[ -n "$MESSAGE" ]] || { MESSAGE="waiting for apt's lock (at most ${APT_LOCK_TIMEOUT_S}s): ${held#E: }" && write_status; }
    sleep 5
  done
  [[ -z "$MESSAGE" ]] || { MESSAGE="" && write_status; }
  [[ "$rc" != 0 ]] || { rm -f "$out"; return 0; }
  APT_ERROR="$(grep -E '^E: |^dpkg: error' "$out" | grep -v 'Some index files failed' | tail -n1)" || true
  [[ -z "$held" ]] || APT_ERROR="${held#E: } (still after ${APT_LOCK_TIMEOUT_S}s)"
  APT_ERROR="${APT_ERROR:-$1 exit $rc}"
  rm -f "$out"
  return 1
}

# pgp_fingerprint FILE: the v4 fingerprint of the first key in binary OpenPGP FILE: SHA-1 over
# 0x99, a 2-octet length and the key packet body (RFC 4880 12.2). In shell because gpg may be
# missing (apt needs only gpgv, which prints no fingerprint).
pgp_fingerprint() {
  local -a b
  local len off
  read -ra b < <(od -An -tu1 -N6 -v "$1")
  if ((b[0] >> 6 == 3 && (b[0] & 63) == 6)); then
    if ((b[1] < 192)); then len=${b[1]} off=2
    elif ((b[1] < 224)); then len=$(((b[1] - 192) * 256 + b[2] + 192)) off=3
    else len=$((b[2] << 24 | b[3] << 16 | b[4] << 8 | b[5])) off=6; fi
  elif ((b[0] >> 2 == 38)); then
    case $((b[0] & 3)) in
      0) len=${b[1]} off=2 ;; 1) len=$((b[1] << 8 | b[2])) off=3 ;; *) len=$((b[1] << 24 | b[2] << 16 | b[3] << 8 | b[4])) off=5 ;;
    esac
  else return 0; fi
  { printf '%b' "$(printf '\\x99\\x%02x\\x%02x' $((len >> 8 & 255)) $((len & 255)))"
    tail -c +$((off + 1)) "$1" | head -c "$len"; } | sha1sum | awk '{ print toupper($1) }'
}

# fetch_nvidia_key KEYRING: NVIDIA's armoured key, its fingerprint checked against the pin, to
# KEYRING in binary form (what `gpg --dearmor` writes; apt's signed-by reads .gpg as binary),
# replacing a stale or expired keyring there.
fetch_nvidia_key() {
  local dest="$ROOT$1" tmp fpr
  mkdir -p "${dest%/*}"
  tmp="$(mktemp "$dest.XXXXXX")"
  log "fetching NVIDIA's apt key from $NVIDIA_REPO_URL/gpgkey"
  if timeout 120 curl -fsSL --retry 3 "$NVIDIA_REPO_URL/gpgkey" 2>>"$LOG_PATH" | tr -d '\r' |
    sed -E -e '1,/^[[:space:]]*$/d' -e '/^(=|-----END)/,$d' | base64 -d >"$tmp" 2>>"$LOG_PATH"; then
    fpr="$(pgp_fingerprint "$tmp")"
  fi
  if [[ "${fpr:-}" != "$NVIDIA_KEY_FPR" ]]; then
    rm -f "$tmp"
    local why="could not fetch or read it (see $LOG_FILE)"
    [[ -z "${fpr:-}" ]] || why="fingerprint $fpr, want $NVIDIA_KEY_FPR (pinned; --nvidia-key-fingerprint)"
    fail "NVIDIA's apt key from $NVIDIA_REPO_URL/gpgkey: $why"
  fi
  if write_if_changed "$dest" 0644 <"$tmp"; then log "wrote $1 (key $fpr)"; fi
  rm -f "$tmp"
}

install_toolkit() {
  local keyring="/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
  local list="/etc/apt/sources.list.d/nvidia-container-toolkit.list"
  need_cmd apt-get dpkg curl base64 od sha1sum
  fetch_nvidia_key "$keyring"
  # \$(ARCH) is for apt to expand, literally.
  # shellcheck disable=SC2016
  printf 'deb [signed-by=%s] %s/stable/deb/$(ARCH) /\n' "$keyring" "$NVIDIA_REPO_URL" |
    write_if_changed "$ROOT$list" 0644 || true
  if compgen -G "$ROOT/var/lib/dpkg/updates/[0-9]*" >/dev/null; then
    log "dpkg was interrupted earlier: dpkg --configure -a"
    apt_run timeout --foreground -s INT 1800 dpkg --configure -a ||
      fail "dpkg --configure -a failed: $APT_ERROR (see $LOG_FILE)"
  fi
  log "apt-get update of $list only, then install nvidia-container-toolkit (output in $LOG_FILE)"
  apt_run timeout 600 apt-get -o Dir::Etc::sourcelist="$list" -o Dir::Etc::sourceparts=- \
    -o APT::Get::List-Cleanup=0 update || fail "apt-get update of $list failed: $APT_ERROR"
  # SIGINT only to apt itself (--foreground): apt then stops between dpkg runs, never inside one.
  apt_run timeout --foreground -s INT 1800 apt-get -o DPkg::Lock::Timeout=30 install -y \
    nvidia-container-toolkit || fail "apt-get install nvidia-container-toolkit failed: $APT_ERROR"
}

# hold_nvidia_packages: unattended-upgrades leaves the driver, CUDA and toolkit alone (a newer
# userspace under the loaded kernel module fails NVML in every new container until reboot).
hold_nvidia_packages() {
  printf '%s\n' '// Written by gpuprov-install.sh (installer/README.md).' \
    'Unattended-Upgrade::Package-Blacklist {' '  "nvidia-"; "libnvidia-"; "cuda-"; "libcuda";' \
    '  "linux-modules-nvidia-"; "linux-objects-nvidia-"; "linux-signatures-nvidia-";' '};' |
    write_if_changed "$ROOT$APT_HOLD_CONF" 0644 || return 0
  log "wrote $APT_HOLD_CONF"
}

ensure_toolkit() {
  local rt
  rt="$(find_nvidia_runtime)"
  if [[ -n "$rt" ]]; then
    log "NVIDIA container runtime present: $rt"
    return 0
  fi
  if [[ "$TOOLKIT_MODE" == skip ]]; then
    fail "GPU present but nvidia-container-runtime not found, and --toolkit skip forbids" \
      "installing nvidia-container-toolkit; install it, then run again"
  fi
  install_toolkit
  rt="$(find_nvidia_runtime)"
  [[ -n "$rt" ]] || fail "nvidia-container-toolkit installed but nvidia-container-runtime not found"
  log "NVIDIA container runtime installed: $rt"
}

# dev_char_links: NVIDIA's /dev/char links, now and (udev rule) at each boot.
dev_char_links() {
  local ctk
  ctk="$(command -v nvidia-ctk)" || { log "WARNING: no nvidia-ctk: no /dev/char links"; return 0; }
  printf 'ACTION=="add", DEVPATH=="/bus/pci/drivers/nvidia", RUN+="%s system create-dev-char-symlinks --create-all"\n' \
    "$ctk" | write_if_changed "$ROOT$DEV_CHAR_RULE" 0644 || true
  timeout 60 "$ctk" system create-dev-char-symlinks --create-all >>"$LOG_PATH" 2>&1 9>&- ||
    log "WARNING: nvidia-ctk create-dev-char-symlinks failed"
}

# metadata_get CURL_ARGS...: body on stdout; returns curl's exit code (22 = HTTP error).
metadata_get() {
  curl -sS -f --noproxy '*' --connect-timeout 1 --max-time 3 "$@" 2>/dev/null
}

# public_ip_by_source [private]: the public address (private: the private one, metadata sources
# only) where --public-ip-source says the cloud gives it (installer/README.md). The test VM's
# 127.x on an interface stands in for a public address.
public_ip_by_source() {
  local mds="${METADATA_URL:-http://169.254.169.254}" s ip="" rc t p="${1:-public}" g=access-configs/0/external-ip
  [[ -z "${1:-}" ]] || g=ip
  [[ "$PUBLIC_IP_SOURCE" != none ]] || log "the cloud tells no VM its public address"
  [[ "$PUBLIC_IP_SOURCE${1:-}" != interface ]] || ip="$(ip -4 -o addr show scope global | awk '$2 != "lo" {sub("/.*", "", $4); print $4}' |
    grep -Ev '^(10|192\.168|169\.254|172\.(1[6-9]|2.|3[01])|100\.(6[4-9]|[7-9].|1[01].|12[0-7]))\.')" || ip=""
  [[ "$METADATA_ENABLED" == 1 ]] && command -v curl >/dev/null || s=none
  t="${PUBLIC_IP_SOURCE/auto/ec2 gce digitalocean}"
  for s in ${s:-${t/nebius/nebius gce}}; do # nebius: then Yandex Cloud's GCE-compatible path
    case "$s" in
      ec2 | openstack)
        rc=0
        t="$(metadata_get -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' "$mds/latest/api/token")" || rc=$?
        if [[ "$rc" == 7 || "$rc" == 28 ]]; then
          log "metadata service at $mds does not answer (curl exit $rc)"
          break
        fi
        [[ "$rc" == 0 ]] || t=""
        ip="$(metadata_get ${t:+-H "X-aws-ec2-metadata-token: $t"} "$mds/latest/meta-data/${p/private/local}-ipv4")"
        ;;
      gce) ip="$(metadata_get -H 'Metadata-Flavor: Google' "$mds/computeMetadata/v1/instance/network-interfaces/0/$g")" ;;
      digitalocean) ip="$(metadata_get "$mds/metadata/v1/interfaces/$p/0/ipv4/address")" ;;
      nebius)
        t='"public_' && [[ -z "${1:-}" ]] || t='[{,]"'
        ip="$(metadata_get -H 'Metadata: true' "${METADATA_URL:-http://metadata.nebius.internal}/v1/network-data" |
          tr -d ' \n' | grep -o "${t}ip_address\":{\"address\":\"[0-9.]*" | cut -d'"' -f6)"
        ;;
    esac || ip=""
    valid_ipv4 "${ip%%$'\n'*}" && break
  done
  ! valid_ipv4 "${ip%%$'\n'*}" || printf '%s\n' "${ip%%$'\n'*}"
}

resolve_public_ip() {
  local ip=""
  if [[ -n "$PUBLIC_IP" ]]; then
    log "public address from --public-ip: $PUBLIC_IP"
  elif ip="$(public_ip_by_source)" && [[ -n "$ip" ]]; then
    PUBLIC_IP="$ip"
    local from="the metadata service"
    [[ "$PUBLIC_IP_SOURCE" != interface ]] || from="a network interface"
    log "public address from $from: $PUBLIC_IP"
  elif [[ -s "$ROOT$PUBLIC_IP_MEMORY" ]] &&
    ip="$(head -n1 "$ROOT$PUBLIC_IP_MEMORY")" && valid_host "$ip"; then
    PUBLIC_IP="$ip"
    log "public address from an earlier run: $PUBLIC_IP"
  else
    log "no public address known: the certificate covers 127.0.0.1 and the node's own addresses;" \
      "run again with --public-ip to add it"
  fi
  if [[ -n "$PUBLIC_IP" ]]; then
    printf '%s\n' "$PUBLIC_IP" | write_if_changed "$ROOT$PUBLIC_IP_MEMORY" 0644 || true
  fi
  # --node-ip metadata: k3s's addresses as gpuprov gives them over SSH (the private address, the
  # public one external; no private address: the public one); none known: k3s chooses.
  if [[ "$NODE_IP" == metadata ]]; then
    NODE_IP="$(public_ip_by_source private)"
    [[ -n "$NODE_IP" ]] && NODE_EXTERNAL_IP="${NODE_EXTERNAL_IP:-$PUBLIC_IP}" || NODE_IP="$PUBLIC_IP"
    log "k3s addresses from the metadata service: '$NODE_IP' '$NODE_EXTERNAL_IP'"
  fi
  TLS_SANS=("127.0.0.1")
  local s x seen
  for s in "$PUBLIC_IP" "${EXTRA_SANS[@]}"; do
    [[ -n "$s" ]] || continue
    seen=0
    for x in "${TLS_SANS[@]}"; do [[ "$x" == "$s" ]] && seen=1; done
    [[ "$seen" == 1 ]] || TLS_SANS+=("$s")
  done
}

# keep_unit_flags: the `k3s server` flags of a k3s.service gpuprov did not write (get.k3s.io's, a
# user's) are saved once to $KEPT_FLAGS, one word a line, as k3s's install.sh keeps them on a
# re-install; KEPT_K3S_FLAGS holds them. k3s puts its config file's values before the command
# line's, so a slice flag (--tls-san) adds to config.yaml's and any other flag replaces its value
# (https://github.com/k3s-io/k3s/blob/master/pkg/configfilearg/parser.go, Parse): the flags
# gpuprov sets itself (default-runtime, write-kubeconfig*, and config, which names another
# file) are not kept, nor words holding a quote (each word is single-quoted in the unit).
keep_unit_flags() {
  if [[ -f "$ROOT$K3S_UNIT" ]] && ! grep -q '^# Written by gpuprov' "$ROOT$K3S_UNIT"; then
    # ExecStart= and its continuation lines, split into words as systemd does (quotes).
    awk '/^ExecStart=/{o=1;sub(/^ExecStart=[-@:+!]*/,"")}o{c=sub(/\\$/,"");printf "%s ",$0;if(!c)exit}' \
      "$ROOT$K3S_UNIT" | xargs -r printf '%s\n' |
      awk 'NR==1&&!/k3s$/||NR==2&&!/^server$/{exit}NR<3||/\x27/{next}d{d=0;next}{k=$0;sub(/=.*/,"",k)}k~/^--?([co]|config|default-runtime|write-kubeconfig.*)$/{d=!/=/;next}1' |
      atomic_write "$ROOT$KEPT_FLAGS" 0600 || true
    log "kept the k3s server flags of $K3S_UNIT"
  fi
  KEPT_K3S_FLAGS=()
  [[ ! -s "$ROOT$KEPT_FLAGS" ]] || mapfile -t KEPT_K3S_FLAGS <"$ROOT$KEPT_FLAGS"
}

render_config() {
  local s
  printf '# Written by gpuprov-install.sh on every run: edits here are overwritten.\n'
  printf '# Local additions go in /etc/rancher/k3s/config.yaml.d/*.yaml.\n'
  if [[ "$ROLE" == server ]]; then
    printf 'write-kubeconfig-mode: "0600"\n'
    printf 'tls-san:\n'
    for s in "${TLS_SANS[@]}"; do printf '  - "%s"\n' "$s"; done
    # Pod traffic between nodes, encrypted (k3s docs, "Basic Network Options"); kept once set:
    # switching a running cluster's backend is unsupported (k3s-io/k3s#3409).
    ((CLUSTER_NODES < 2)) && ! grep -qs ^flannel "$ROOT$K3S_CONFIG" || printf 'flannel-backend: "wireguard-native"\n'
  fi
  [[ -z "$NODE_IP" ]] || printf 'node-ip: "%s"\n' "$NODE_IP"
  [[ -z "$NODE_EXTERNAL_IP" ]] || printf 'node-external-ip: "%s"\n' "$NODE_EXTERNAL_IP"
  if [[ "$GPU_CONFIGURED" == true ]]; then
    printf '# Every container, the device plugin included, runs under the NVIDIA runtime.\n'
    printf 'default-runtime: "nvidia"\n'
  fi
}

write_config() {
  if [[ "$GPU_CONFIGURED" == true ]] &&
    ! version_ge "$K3S_VERSION" "$K3S_MIN_VERSION_FOR_DEFAULT_RUNTIME"; then
    fail "k3s $K3S_VERSION has no default-runtime setting (needs >= $K3S_MIN_VERSION_FOR_DEFAULT_RUNTIME)"
  fi
  if render_config | write_if_changed "$ROOT$K3S_CONFIG" 0600; then
    log "wrote $K3S_CONFIG (changed)"
  else
    log "$K3S_CONFIG unchanged"
  fi
  if [[ "$GPU_CONFIGURED" == true && ! -f "$ROOT$GPU_ENABLED_MARKER" ]]; then
    printf '%s\n' "${GPU_NAME:-unknown}:$GPU_COUNT" | atomic_write "$ROOT$GPU_ENABLED_MARKER" 0644
  fi
}

# render_unit: k3s.service. Type=notify makes `systemctl start` return once the API is up (k3s
# sends READY=1); exec is for stand-ins that do not speak sd_notify.
render_unit() {
  local what="k3s $ROLE"
  [[ "$ROLE" == agent ]] || grep -qs ^flannel "$ROOT$K3S_CONFIG" || what="k3s, single node"
  cat <<EOF
# Written by gpuprov-install.sh on every run: edits here are overwritten.
[Unit]
Description=Lightweight Kubernetes ($what, managed by gpuprov)
Documentation=https://docs.k3s.io
Wants=network-online.target
After=network-online.target

[Install]
WantedBy=multi-user.target

[Service]
Type=$UNIT_TYPE
EnvironmentFile=-/etc/default/%N
EnvironmentFile=-$K3S_ENV
# Restarting k3s leaves running pods alone.
KillMode=process
Delegate=yes
LimitNOFILE=1048576
LimitNPROC=infinity
LimitCORE=infinity
TasksMax=infinity
# No start timeout here (a first start can be slow); the installer bounds its own wait.
TimeoutStartSec=0
Restart=always
RestartSec=5s
ExecStartPre=-/sbin/modprobe br_netfilter
ExecStartPre=-/sbin/modprobe overlay
ExecStart=$K3S_BIN $ROLE${KEPT_K3S_FLAGS[*]+$(printf " '%s'" "${KEPT_K3S_FLAGS[@]}")}
EOF
}

# write_k3s_env: the proxy settings this run has, for k3s and its containerd (as k3s's install.sh
# copies them), when it has any; a file gpuprov did not write is kept as it is. An agent's join
# puts the server and token there as k3s's install.sh does (K3S_URL, K3S_TOKEN); a later agent
# run without --server-url keeps the file.
write_k3s_env() {
  local vars
  vars="$(env | grep -E '^(CONTAINERD_[A-Z_]+|(HTTPS?|NO)_PROXY|(https?|no)_proxy)=' | sort)" || true
  if [[ -n "$SERVER_URL" ]]; then
    vars="K3S_URL=$SERVER_URL"$'\n'"K3S_TOKEN=$TOKEN${vars:+$'\n'}$vars"
  elif [[ "$ROLE" == agent ]]; then
    return 0
  elif [[ -f "$ROOT$K3S_ENV" ]] && ! grep -q '^# Written by gpuprov-install' "$ROOT$K3S_ENV"; then
    log "$K3S_ENV was not written by gpuprov: kept"
    return 0
  fi
  if [[ -n "$vars" ]] && printf '# Written by gpuprov-install.sh: %sthe proxy settings it ran with.\n%s\n' \
    "${SERVER_URL:+the server to join, its token, }" "$vars" | write_if_changed "$ROOT$K3S_ENV" 0600; then
    vars="${vars//$'\n'/ }"
    log "wrote $K3S_ENV (${vars//"$TOKEN"/(token)})"
  fi
}

# render_killall: k3s-killall.sh as k3s's installer has it: k3s (server or agent) and its pods
# stopped, their mounts, network namespaces, links and rules removed.
render_killall() {
  cat <<'EOF'
#!/bin/sh
# Written by gpuprov-install.sh: stops k3s and its pods.
[ "$(id -u)" = 0 ] || exec sudo "$0" "$@"
systemctl stop k3s k3s-agent 2>/dev/null
tree() { for p in "$@"; do echo "$p"; tree $(pgrep -P "$p"); done; }
kill -9 $(tree $(pgrep -f 'k3s/data/[^/]*/bin/containerd-shim')) 2>/dev/null
for d in /run/k3s /var/lib/kubelet/pods /var/lib/kubelet/plugins /run/netns/cni-; do
  awk -v d=$d 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r | xargs -r -n1 umount -f
done
ip netns show 2>/dev/null | grep -o '^cni-[^ ]*' | xargs -r -n1 ip netns delete
for l in cni0 flannel.1 flannel-v6.1 kube-ipvs0 flannel-wg flannel-wg-v6; do ip link delete $l 2>/dev/null; done
rm -rf /var/lib/cni /run/k3s
for t in iptables ip6tables; do $t-save | grep -viE 'KUBE-|CNI-|flannel' | $t-restore; done 2>/dev/null
exit 0
EOF
}

# render_uninstall: k3s-uninstall.sh (an agent's: k3s-agent-uninstall.sh, as k3s's installer
# names it): k3s and every file gpuprov put on the node removed (the NVIDIA packages stay).
render_uninstall() {
  cat <<'EOF'
#!/bin/sh
# Written by gpuprov-install.sh: removes k3s and its files.
[ "$(id -u)" = 0 ] || exec sudo "$0" "$@"
/usr/local/bin/k3s-killall.sh
for u in k3s k3s-agent gpuprov-firewall gpuprov-ttl.timer gpuprov-ttl gpuprov-device-plugin-boot; do systemctl disable --now $u 2>/dev/null; done
[ ! -f /etc/gpuprov/node-firewall.sh ] || sh /etc/gpuprov/node-firewall.sh stop
for l in kubectl crictl ctr; do [ "$(readlink /usr/local/bin/$l)" != k3s ] || rm -f /usr/local/bin/$l; done
cd /etc/systemd/system && rm -f k3s.service k3s.service.env gpuprov-firewall.service gpuprov-ttl.* gpuprov-device-plugin-boot.service k3s-agent.service*
rm -rf /etc/rancher/k3s /run/flannel /var/lib/rancher/k3s /var/lib/kubelet /var/lib/gpuprov /etc/gpuprov \
  /usr/local/bin/k3s /usr/local/sbin/gpuprov-ttl /usr/local/sbin/gpuprov-device-plugin-boot /etc/apt/apt.conf.d/51gpuprov-nvidia-hold \
  /usr/local/bin/k3s-killall.sh /usr/local/bin/k3s-uninstall.sh /usr/local/bin/k3s-agent-uninstall.sh
systemctl daemon-reload
EOF
}

# write_unit: k3s's unit and env file; systemd reloads only for a changed unit
# (installer/README.md, "No daemon-reload").
write_unit() {
  local changed=0
  write_k3s_env
  render_unit | write_if_changed "$ROOT$K3S_UNIT" 0644 && changed=1
  [[ "$GPU_CONFIGURED$ROLE" == trueserver ]] && plugin_boot_helper && changed=1
  timeout 120 systemctl --no-reload enable "$K3S_SVC.service" >>"$LOG_PATH" 2>&1 ||
    fail "systemctl enable $K3S_SVC failed"
  if [[ "$changed" == 1 ]]; then
    log "wrote $K3S_UNIT or $PLUGIN_BOOT_SCRIPT.service (changed): daemon-reload"
    timeout 120 systemctl daemon-reload || fail "systemctl daemon-reload failed"
  else
    log "$K3S_UNIT unchanged"
  fi
}

# plugin_boot_helper: at boot, once nvidia-smi answers, deletes a crash-looping device plugin pod
# (installer/README.md, "After a reboot"). Status 0 when its unit changed.
plugin_boot_helper() {
  local unit="/etc/systemd/system/${PLUGIN_BOOT_SCRIPT##*/}.service" rc=1
  write_if_changed "$ROOT$PLUGIN_BOOT_SCRIPT" 0755 <<'EOF' || true
#!/bin/sh
# Written by gpuprov-install.sh (installer/README.md)
t=/var/lib/rancher/k3s/server/tls
u='https://127.0.0.1:6443/api/v1/namespaces/kube-system/pods?labelSelector=name%3Dnvidia-device-plugin-ds'
a() { curl -sSf -m 20 --cacert $t/server-ca.crt --cert $t/client-admin.crt --key $t/client-admin.key "$@" "$u"; }
for _ in $(seq 180); do
  if nvidia-smi -L >/dev/null 2>&1; then
    case $(a) in
      *CrashLoopBackOff*) echo "device plugin crash-looping: deleting its pod" && a -X DELETE >/dev/null && exit ;;
      *'"ready": true'* | *'"ready":true'*) echo "device plugin running" && exit ;;
    esac
  fi
  sleep 5
done
EOF
  printf '[Unit]\nAfter=k3s.service\n[Service]\nType=exec\nExecStart=%s\n[Install]\nWantedBy=multi-user.target\n' \
    "$PLUGIN_BOOT_SCRIPT" | write_if_changed "$ROOT$unit" 0644 && rc=0
  timeout 120 systemctl --no-reload enable "${unit##*/}" >>"$LOG_PATH" 2>&1 ||
    log "WARNING: systemctl enable ${unit##*/} failed"
  return "$rc"
}

render_device_plugin() {
  cat <<EOF
# Written by gpuprov-install.sh (NVIDIA device plugin; k3s applies this folder).
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: nvidia-device-plugin-daemonset
  namespace: kube-system
spec:
  selector:
    matchLabels:
      name: nvidia-device-plugin-ds
  updateStrategy:
    type: RollingUpdate
  template:
    metadata:
      labels:
        name: nvidia-device-plugin-ds
    spec:
      priorityClassName: system-node-critical
      tolerations:
        - key: nvidia.com/gpu
          operator: Exists
          effect: NoSchedule
      containers:
        - name: nvidia-device-plugin-ctr
          image: $DEVICE_PLUGIN_IMAGE
          env: []
          securityContext:
            allowPrivilegeEscalation: false
            capabilities:
              drop: ["ALL"]
          volumeMounts:
            - name: device-plugin
              mountPath: /var/lib/kubelet/device-plugins
      volumes:
        - name: device-plugin
          hostPath:
            path: /var/lib/kubelet/device-plugins
            type: Directory
EOF
}

write_device_plugin() {
  if render_device_plugin | write_if_changed "$ROOT$DEVICE_PLUGIN_MANIFEST" 0644; then
    log "wrote $DEVICE_PLUGIN_MANIFEST ($DEVICE_PLUGIN_IMAGE)"
  else
    log "$DEVICE_PLUGIN_MANIFEST unchanged"
  fi
}

# render_firewall nft|iptables: the node firewall script (installer/README.md, Node firewall);
# PEERS get k3s's ports between nodes (k3s docs, "Inbound Rules for K3s Nodes").
render_firewall() {
  local a p4="" p6="" r='tcp dport { 6443, 10250 } accept\n    ip%s saddr { %s } udp dport %s accept\n'
  for a in "${PEERS[@]}"; do if [[ "$a" == *:* ]]; then p6+="${p6:+,}$a"; else p4+="${p4:+,}$a"; fi; done
  printf '#!/bin/sh\n# Written by gpuprov-install.sh --node-firewall ssh-only\n'
  if [[ "$1" == nft ]]; then
    cat <<'EOF'
{ echo 'table inet gpuprov'; echo 'delete table inet gpuprov'; [ "$1" = stop ] || cat <<'R'
table inet gpuprov {
  chain inbound {
    type filter hook prerouting priority mangle; policy accept;
    iif lo accept
    iifname { "cni0", "flannel.1" } accept
    ip saddr { 10.42.0.0/16, 10.43.0.0/16 } accept
    ct state established,related accept
    meta l4proto { icmp, ipv6-icmp } accept
    tcp dport 22 accept
    udp dport { 68, 546 } accept
EOF
    [[ -z "$p4" ]] || printf "    ip saddr { %s } $r" "$p4" "" "$p4" 51820
    [[ -z "$p6" ]] || printf "    ip6 saddr { %s } $r" "$p6" 6 "$p6" "{ 51820, 51821 }"
    cat <<'EOF'
    counter drop
  }
}
R
} | nft -f -
EOF
    return 0
  fi
  [[ -z "$p4$p6" ]] || printf 'p4=%s p6=%s\n' "$p4" "$p6"
  cat <<'EOF'
set -e
for t in iptables ip6tables; do
  m="$t -w -t mangle"
  if [ "$1" = stop ]; then $m -D PREROUTING -j GPUPROV && $m -F GPUPROV && $m -X GPUPROV; continue; fi
  i=icmp c='-s 10.42.0.0/16,10.43.0.0/16' p=$p4 u=51820
  [ $t = iptables ] || i=ipv6-icmp c='-i lo' p=$p6 u=51820,51821
  { echo '*mangle'; echo ':GPUPROV - [0:0]'
    for r in '-i lo' '-i cni0' '-i flannel.1' "$c" '-m conntrack --ctstate ESTABLISHED,RELATED' "-p $i" \
      '-p tcp --dport 22' '-p udp -m multiport --dports 68,546'; do echo "-A GPUPROV $r -j RETURN"; done
    [ -z "$p" ] || printf -- "-A GPUPROV -s $p -p %s -m multiport --dports %s -j RETURN\n" tcp 6443,10250 udp $u
    echo '-A GPUPROV -j DROP'; echo COMMIT; } | $t-restore -w -n
  $m -C PREROUTING -j GPUPROV 2>/dev/null || $m -I PREROUTING -j GPUPROV
done
EOF
}

# node_firewall: that script and its boot unit, applied unless unchanged and in force. An active
# unit is reloaded (ExecReload runs the script): k3s Requires it, so a restart would restart k3s.
node_firewall() {
  local tool=nft changed=1 unit_changed=0
  command -v nft >/dev/null || tool=iptables
  [[ "$tool" == nft ]] || { command -v iptables-restore && command -v ip6tables-restore; } >/dev/null ||
    fail "--node-firewall needs nft (package nftables) or iptables; install one, then run again"
  # The peer set: this run's --peer list, else the one in force (--peers-only: this run's, even none).
  if [[ "${#PEERS[@]}$PEERS_ONLY" != 00 ]]; then
    printf '%s\n' "${PEERS[@]}" | grep . | write_if_changed "$ROOT$FW_PEERS" 0644 || true
  elif [[ -f "$ROOT$FW_PEERS" ]]; then
    mapfile -t PEERS <"$ROOT$FW_PEERS"
  fi
  render_firewall "$tool" | write_if_changed "$ROOT$FW_SCRIPT" 0755 || changed=0
  [[ "$PEERS_ONLY" == 1 && -f "$ROOT$FW_UNIT" ]] || if printf '[Unit]\nDescription=gpuprov node firewall: inbound SSH only\nDefaultDependencies=no
Wants=network-pre.target\nAfter=nftables.service netfilter-persistent.service
Before=network-pre.target %s.service\n[Service]\nType=oneshot\nRemainAfterExit=yes
ExecStart=/bin/sh %s\nExecReload=/bin/sh %s\n[Install]\nWantedBy=sysinit.target\nRequiredBy=%s.service\n' "$K3S_SVC" "$FW_SCRIPT" "$FW_SCRIPT" "$K3S_SVC" |
    write_if_changed "$ROOT$FW_UNIT" 0644; then changed=1 unit_changed=1; fi
  FW_STATE="ssh-only ($tool)"
  if [[ "$changed" == 0 ]] && timeout 60 systemctl is-active --quiet gpuprov-firewall &&
    if [[ "$tool" == nft ]]; then nft list table inet gpuprov; else iptables -w -t mangle -C PREROUTING -j GPUPROV; fi >/dev/null 2>&1; then
    log "node firewall unchanged: $FW_STATE"
    return 0
  fi
  if ! { { [[ "$unit_changed" == 0 ]] || timeout 120 systemctl daemon-reload; } &&
    timeout 120 systemctl --no-reload enable gpuprov-firewall >>"$LOG_PATH" 2>&1 &&
    timeout 120 systemctl reload-or-restart gpuprov-firewall 9>&-; }; then
    fail "the node firewall did not apply; look at 'journalctl -u gpuprov-firewall'"
  fi
  log "node firewall applied: $FW_STATE, peers: ${PEERS[*]:-none}"
}

# host_firewall: an active ufw or firewalld drops pods' traffic to services (k3s docs, "Known
# issues"): k3s's pod and service networks are allowed; an inactive one is left alone.
host_firewall() {
  local c cidrs pod svc conf=("$ROOT"/etc/rancher/k3s/config.yaml.d/*.yaml)
  pod="$(sed -nE 's/^cluster-cidr: *"?([^"]*)"?.*/\1/p' "${conf[@]}" 2>/dev/null | tail -n1)" || true
  svc="$(sed -nE 's/^service-cidr: *"?([^"]*)"?.*/\1/p' "${conf[@]}" 2>/dev/null | tail -n1)" || true
  cidrs="${pod:-10.42.0.0/16},${svc:-10.43.0.0/16}"
  cidrs="${cidrs//,/ }"
  if command -v ufw >/dev/null && LC_ALL=C timeout 60 ufw status 2>/dev/null | grep -q '^Status: active'; then
    for c in $cidrs; do
      timeout 60 ufw allow from "$c" >>"$LOG_PATH" 2>&1 ||
        fail "ufw is active and 'ufw allow from $c' failed: allow k3s's networks ($cidrs) by hand, then run again"
    done
    log "ufw is active: allowed from $cidrs"
  elif command -v firewall-cmd >/dev/null && timeout 60 firewall-cmd --state >/dev/null 2>&1; then
    for c in $cidrs; do
      { timeout 60 firewall-cmd --permanent --zone=trusted --add-source="$c" &&
        timeout 60 firewall-cmd --zone=trusted --add-source="$c"; } >>"$LOG_PATH" 2>&1 ||
        fail "firewalld is running and adding $c to its trusted zone failed: add k3s's networks" \
          "($cidrs) with 'firewall-cmd --permanent --zone=trusted --add-source=...', then run again"
    done
    log "firewalld is running: $cidrs in its trusted zone"
  fi
}

# k3s_inputs_fingerprint: sha256 over everything k3s reads only at start.
k3s_inputs_fingerprint() {
  {
    printf 'config\n'
    cat "$ROOT$K3S_CONFIG"
    printf 'unit\n'
    cat "$ROOT$K3S_UNIT"
    cat "$ROOT$K3S_ENV" 2>/dev/null || true
    printf 'binary\n'
    sha256sum <"$ROOT$K3S_BIN"
    printf 'nvidia-runtime %s\n' "$(find_nvidia_runtime)"
  } | sha256sum | awk '{ print $1 }'
}

start_k3s() {
  local want have="" verb
  want="$(k3s_inputs_fingerprint)"
  if [[ -f "$ROOT$APPLIED_FINGERPRINT" ]]; then have="$(head -n1 "$ROOT$APPLIED_FINGERPRINT")"; fi
  if timeout 60 systemctl is-active --quiet "$K3S_SVC.service"; then
    if [[ "$want" == "$have" ]]; then
      log "k3s running with the current config: no restart"
      K3S_ACTION="none"
      return 0
    fi
    verb="restart"
    log "k3s running with an older config, unit, binary or runtime set: restarting it"
  else
    verb="start"
    log "k3s not running: starting it"
  fi
  if ! timeout "$RESTART_TIMEOUT_S" systemctl "$verb" "$K3S_SVC.service" 9>&-; then
    fail "systemctl $verb $K3S_SVC did not succeed within ${RESTART_TIMEOUT_S}s; look at" \
      "'journalctl -u $K3S_SVC' and 'systemctl status $K3S_SVC'"
  fi
  if ! timeout 60 systemctl is-active --quiet "$K3S_SVC.service"; then
    fail "k3s is not active after systemctl $verb; look at 'journalctl -u $K3S_SVC'"
  fi
  printf '%s\n' "$want" | atomic_write "$ROOT$APPLIED_FINGERPRINT" 0644
  K3S_ACTION="${verb}ed"
  log "k3s ${K3S_ACTION}"
}

main() {
  parse_args "$@"
  STATUS_PATH="$ROOT$STATUS_FILE"
  LOG_PATH="$ROOT$LOG_FILE"
  LOCK_PATH="$ROOT$LOCK_FILE"
  TLS_SANS=("127.0.0.1")
  trap 'LAST_ERR_CMD=$BASH_COMMAND' ERR
  trap on_exit EXIT
  mkdir -p "$(dirname "$LOG_PATH")"

  log "gpuprov-install $INSTALLER_VERSION starting (k3s $K3S_VERSION)"
  preflight
  PHASE="lock"
  take_lock
  if [[ "$PEERS_ONLY" == 1 ]]; then
    STATUS_ENABLED=0 # the marker keeps the last install's result
    node_firewall
    exit 0
  fi
  now_utc
  STARTED_AT="$NOW"
  step gpu-detect
  detect_gpu
  if [[ -n "$NODE_FIREWALL" ]]; then
    step firewall
    node_firewall
  fi
  step k3s-binary
  ensure_k3s_binary
  k3s_links
  if [[ "$GPU_PRESENT" == true ]]; then
    step fabric-manager
    ensure_fabric_manager
  fi
  if [[ "$GPU_CONFIGURED" == true ]]; then
    step nvidia-toolkit
    ensure_toolkit
    hold_nvidia_packages
    dev_char_links
  fi
  if [[ "$ROLE" == server ]]; then
    step public-ip
    resolve_public_ip
  fi
  step config
  write_config
  step unit
  local f state=server start=k3s-start
  # k3s-killall.sh and k3s-uninstall.sh (k3s-agent-uninstall.sh on an agent).
  for f in k3s-killall "$K3S_SVC-uninstall"; do
    if "render_${f##*-}" | write_if_changed "$ROOT/usr/local/bin/$f.sh" 0755; then log "wrote $f.sh"; fi
  done
  # An agent joins with --server-url (or was joined by an earlier run); else it is only prepared.
  [[ "$ROLE" == server ]] || state=agent-joined start=agent-join
  [[ "$ROLE" == server || -n "$SERVER_URL" ]] || grep -qs '^K3S_URL=' "$ROOT$K3S_ENV" || state=agent-prepared
  [[ "$ROLE" != server ]] || keep_unit_flags
  [[ "$state" == agent-prepared ]] || write_unit
  if [[ "$GPU_CONFIGURED$ROLE" == trueserver ]]; then
    step device-plugin
    write_device_plugin
  fi
  step host-firewall
  host_firewall
  if [[ "$state" != agent-prepared ]]; then
    step "$start"
    start_k3s
  fi
  NODE_STATE="$state"
  PHASE="done"
  RESULT="ok"
  now_utc
  FINISHED_AT="$NOW"
  write_status
  log "done: k3s $K3S_VERSION ($K3S_ACTION), $NODE_STATE, GPU configured: $GPU_CONFIGURED, tls-san: ${TLS_SANS[*]}"
  if [[ "$REBOOT_REQUIRED" == true ]]; then
    log "reboot required: the NVIDIA driver loads at the next boot; run this installer again after it"
  fi
}

main "$@"
