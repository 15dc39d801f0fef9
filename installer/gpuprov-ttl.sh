#!/bin/bash
# gpuprov-ttl: powers this VM off when its deadline passes or when it has been idle long
# enough. gpuprov puts it on the node at /usr/local/sbin/gpuprov-ttl (over SSH, as root) and
# runs `gpuprov-ttl install`; a systemd timer then runs `gpuprov-ttl check` every few seconds.
# It holds no cloud credential: it only runs `systemctl poweroff`.
#
#   gpuprov-ttl install --check-seconds N   write and start gpuprov-ttl.timer (+ .service);
#                                           systemd reloads only when a unit file changed
#   gpuprov-ttl set [--deadline EPOCH|none] [--idle-seconds N|none] [--gpu-util-max PCT]
#                                           write the settings (keys not given stay as they are)
#   gpuprov-ttl off                         stop and remove the timer, the service, the settings
#   gpuprov-ttl check                       one check: power off when due
#   gpuprov-ttl status                      the settings and the idle clock, as KEY=VALUE lines
#
# Idle means, at every check: no SSH connection established to this host (ss) and nobody
# logged in (who), no running Kubernetes pod asking for nvidia.com/gpu (kubectl: on a k3s
# server any such pod of the cluster, so a control plane stays up under busy agents; on a k3s
# agent those bound to its own node, read with the kubelet's credentials), no
# gpuprov-install run holding its lock, k3s not still starting (installed but not answering
# within K3S_START_GRACE_SECONDS of boot), and every GPU's utilisation below gpu_util_max percent
# (nvidia-smi). The idle clock starts at the first idle check and restarts at any busy one; it
# lives under /run (emptied at boot) and carries the boot id, so every boot starts it afresh.
#
# No command here runs `systemctl daemon-reload` unless a unit file changed, and enable/disable
# run with --no-reload (systemctl reloads after them otherwise): a reload makes running GPU
# containers lose their devices under the systemd cgroup driver (NVIDIA container toolkit
# install guide, "known issue" on daemon-reload).
#
# GPUPROV_TTL_ROOT prefixes every path (tests run it in a sandbox); GPUPROV_TTL_NOW replaces
# the clock (epoch seconds). Tests also put fake ss, who, kubectl, nvidia-smi, ps and systemctl
# first on PATH.
set -euo pipefail

readonly ROOT="${GPUPROV_TTL_ROOT:-}"
readonly CONF="$ROOT/etc/gpuprov/ttl.conf"
readonly IDLE_FILE="$ROOT/run/gpuprov/ttl-idle-since"         # "EPOCH BOOT_ID"
readonly OLD_IDLE_FILE="$ROOT/var/lib/gpuprov/ttl-idle-since" # where older versions kept it
readonly BOOT_ID_FILE="$ROOT/proc/sys/kernel/random/boot_id"
readonly INSTALL_LOCK="$ROOT/run/lock/gpuprov-install.lock" # held by gpuprov-install.sh
readonly K3S_UNIT_FILE="$ROOT/etc/systemd/system/k3s.service"
readonly K3S_AGENT_UNIT_FILE="$ROOT/etc/systemd/system/k3s-agent.service"
# A k3s agent's kubelet kubeconfig (client certificate CN system:node:<node>), written at its
# join; it reaches the server through the agent's load balancer on 127.0.0.1:6444.
readonly KUBELET_KUBECONFIG="$ROOT/var/lib/rancher/k3s/agent/kubelet.kubeconfig"
readonly K3S_CONFIG="$ROOT/etc/rancher/k3s/config.yaml"
readonly UNIT_DIR="$ROOT/etc/systemd/system"
readonly LOCK="$ROOT/run/lock/gpuprov-ttl.lock"
readonly SELF="/usr/local/sbin/gpuprov-ttl"
readonly DEFAULT_GPU_UTIL_MAX=5
# After boot, k3s (and its API) may take minutes to answer; until then no GPU pod can be seen.
readonly K3S_START_GRACE_SECONDS=600

deadline=""
idle_seconds=""
gpu_util_max="$DEFAULT_GPU_UTIL_MAX"

log() { printf 'gpuprov-ttl: %s\n' "$*" >&2; }
die() {
  log "$*"
  exit 2
}

now() { printf '%s\n' "${GPUPROV_TTL_NOW:-$(date +%s)}"; }

is_count() { [[ $1 =~ ^[0-9]+$ ]]; }

# Holds the node's TTL lock until this process exits: set, install and off change the settings
# and the units, and on the boot route the boot script and gpuprov over SSH run them at once.
take_lock() {
  mkdir -p "$(dirname "$LOCK")"
  exec 9>"$LOCK"
  flock -w 120 9 || die "another gpuprov-ttl held $LOCK for 120 s"
}

# Reads the settings file (KEY=VALUE lines; unknown keys are ignored).
load_conf() {
  [ -f "$CONF" ] || return 0
  local key value
  while IFS='=' read -r key value; do
    case "$key" in
      deadline) deadline="$value" ;;
      idle_seconds) idle_seconds="$value" ;;
      gpu_util_max) gpu_util_max="$value" ;;
    esac
  done <"$CONF"
}

write_conf() {
  mkdir -p "$(dirname "$CONF")"
  printf 'deadline=%s\nidle_seconds=%s\ngpu_util_max=%s\n' "$deadline" "$idle_seconds" \
    "$gpu_util_max" >"$CONF.tmp.$$"
  mv -f "$CONF.tmp.$$" "$CONF"
}

# Number of established TCP connections whose local port is sshd's (22), plus logged-in users.
ssh_sessions() {
  local conns users
  conns=$(ss -Htn state established '( sport = :22 )' 2>/dev/null | grep -c . || true)
  users=$(who 2>/dev/null | grep -c . || true)
  printf '%s\n' "$((conns + users))"
}

# This node's Kubernetes name: config.yaml's node-name, else the host name in lower case (k3s's
# default, https://docs.k3s.io/cli/agent#node).
node_name() {
  local name=""
  if [ -f "$K3S_CONFIG" ]; then
    name=$(sed -n 's/^node-name:[[:space:]]*"\{0,1\}\([^"]*\)"\{0,1\}[[:space:]]*$/\1/p' "$K3S_CONFIG" | tail -n1)
  fi
  [ -n "$name" ] || name=$(uname -n)
  printf '%s\n' "${name,,}"
}

# Running pods whose containers ask for nvidia.com/gpu, one "namespace/name" a line: on a k3s
# server every such pod of the cluster, on a k3s agent those bound to its node (the Node
# authorizer lets a kubelet list only its own node's pods, selected by spec.nodeName:
# https://kubernetes.io/docs/reference/access-authn-authz/node/). Nothing when there is no
# kubectl or no k3s; nothing and status 1 when k3s is installed but its API does not answer
# (no pod can then be found running).
gpu_pods() {
  command -v kubectl >/dev/null 2>&1 || return 0
  local kubeconfig="$ROOT/etc/rancher/k3s/k3s.yaml" selector=status.phase=Running out pod counts n
  if [ ! -f "$kubeconfig" ]; then
    # k3s writes k3s.yaml at its first start: a k3s unit without it is a k3s not up yet.
    [ ! -f "$K3S_UNIT_FILE" ] || return 1
    [ -f "$K3S_AGENT_UNIT_FILE" ] || return 0
    # An agent writes its kubelet's kubeconfig once it has joined.
    [ -f "$KUBELET_KUBECONFIG" ] || return 1
    kubeconfig="$KUBELET_KUBECONFIG"
    selector="$selector,spec.nodeName=$(node_name)"
  fi
  out=$(KUBECONFIG="$kubeconfig" timeout 20 kubectl get pods --all-namespaces \
    --field-selector="$selector" -o \
    'jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{" "}{.spec.containers[*].resources.limits.nvidia\.com/gpu}{"\n"}{end}' \
    2>/dev/null) || return 1
  while read -r pod counts; do
    [ -n "$pod" ] || continue
    for n in $counts; do
      if is_count "$n" && [ "$n" -gt 0 ]; then
        printf '%s\n' "$pod"
        break
      fi
    done
  done <<<"$out"
}

# The highest GPU utilisation in percent, or nothing without a working nvidia-smi.
gpu_util_peak() {
  command -v nvidia-smi >/dev/null 2>&1 || return 0
  local out line peak=""
  out=$(timeout 20 nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits \
    2>/dev/null) || return 0
  while read -r line; do
    line="${line%% *}"
    is_count "$line" || continue
    if [ -z "$peak" ] || [ "$line" -gt "$peak" ]; then peak="$line"; fi
  done <<<"$out"
  [ -z "$peak" ] || printf '%s\n' "$peak"
}

# Seconds since this machine booted: the age of PID 1. A test VM (a container) shares
# /proc/uptime with its host, but not its PID 1. Nothing when unknown.
seconds_since_boot() {
  local age
  age=$(ps -o etimes= -p 1 2>/dev/null | tr -d ' ') || return 0
  if is_count "$age"; then printf '%s\n' "$age"; fi
}

# This boot's id (the kernel's random boot_id), or nothing.
boot_id() {
  [ -r "$BOOT_ID_FILE" ] || return 0
  head -n1 "$BOOT_ID_FILE" 2>/dev/null || true
}

# Whether a gpuprov-install run (at boot or pushed over SSH) holds its lock now.
install_running() {
  [ -e "$INSTALL_LOCK" ] || return 1
  ! flock -n -s "$INSTALL_LOCK" true 2>/dev/null
}

# Why the node is busy (one phrase), or nothing when it is idle.
busy_reason() {
  local n pods peak age
  n=$(ssh_sessions)
  if [ "$n" -gt 0 ]; then
    printf '%s SSH session(s)\n' "$n"
    return
  fi
  if install_running; then
    printf 'gpuprov-install is running (it holds %s)\n' "${INSTALL_LOCK#"$ROOT"}"
    return
  fi
  if ! pods=$(gpu_pods); then
    age=$(seconds_since_boot)
    if [ -n "$age" ] && [ "$age" -lt "$K3S_START_GRACE_SECONDS" ]; then
      printf 'k3s not answering yet, %s s after boot (grace %s s)\n' "$age" \
        "$K3S_START_GRACE_SECONDS"
      return
    fi
  fi
  if [ -n "$pods" ]; then
    printf 'GPU pod(s) running: %s\n' "$(printf '%s' "$pods" | tr '\n' ' ')"
    return
  fi
  peak=$(gpu_util_peak)
  if [ -n "$peak" ] && [ "$peak" -ge "$gpu_util_max" ]; then
    printf 'GPU utilisation %s%% (threshold %s%%)\n' "$peak" "$gpu_util_max"
  fi
}

power_off() {
  log "powering off: $1"
  logger -t gpuprov-ttl "powering off: $1" 2>/dev/null || true
  systemctl poweroff
}

# The idle clock's start (epoch seconds) when it was started during this boot, else nothing.
idle_since() {
  local since="" id=""
  [ -f "$IDLE_FILE" ] || return 0
  read -r since id <"$IDLE_FILE" || true
  is_count "$since" || return 0
  [ "$id" = "$(boot_id)" ] || return 0
  printf '%s\n' "$since"
}

cmd_check() {
  load_conf
  local t reason since
  t=$(now)
  if is_count "$deadline" && [ "$t" -ge "$deadline" ]; then
    power_off "the deadline $(date -u -d "@$deadline" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null || echo "$deadline") has passed"
    return
  fi
  if ! is_count "$idle_seconds"; then
    rm -f "$IDLE_FILE" "$OLD_IDLE_FILE"
    return
  fi
  reason=$(busy_reason)
  if [ -n "$reason" ]; then
    rm -f "$IDLE_FILE"
    log "busy: $reason"
    return
  fi
  rm -f "$OLD_IDLE_FILE" # a clock kept on disk by an older version, maybe from an earlier boot
  since=$(idle_since)
  if [ -z "$since" ]; then
    mkdir -p "$(dirname "$IDLE_FILE")"
    printf '%s %s\n' "$t" "$(boot_id)" >"$IDLE_FILE"
    since="$t"
  fi
  if [ $((t - since)) -ge "$idle_seconds" ]; then
    power_off "idle for $((t - since)) s (idle TTL $idle_seconds s)"
    return
  fi
  log "idle for $((t - since)) s of $idle_seconds s"
}

cmd_set() {
  take_lock
  load_conf
  while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || die "$1 needs a value"
    case "$1" in
      --deadline) deadline="$2" ;;
      --idle-seconds) idle_seconds="$2" ;;
      --gpu-util-max) gpu_util_max="$2" ;;
      *) die "unknown option $1 for set" ;;
    esac
    shift 2
  done
  [ "$deadline" != none ] || deadline=""
  [ "$idle_seconds" != none ] || idle_seconds=""
  [ -z "$deadline" ] || is_count "$deadline" || die "--deadline: epoch seconds or none, not '$deadline'"
  if [ -n "$idle_seconds" ] && ! { is_count "$idle_seconds" && [ "$idle_seconds" -gt 0 ]; }; then
    die "--idle-seconds: a positive number of seconds or none, not '$idle_seconds'"
  fi
  if ! { is_count "$gpu_util_max" && [ "$gpu_util_max" -le 100 ]; }; then
    die "--gpu-util-max: a percentage 0-100, not '$gpu_util_max'"
  fi
  write_conf
  # A new idle TTL starts its clock afresh.
  rm -f "$IDLE_FILE" "$OLD_IDLE_FILE"
}

# write_unit NAME: stdin to $UNIT_DIR/NAME unless it already holds exactly that. Status 0 when
# the file changed, 1 when it was up to date.
write_unit() {
  local dest="$UNIT_DIR/$1" tmp
  mkdir -p "$UNIT_DIR"
  tmp="$dest.tmp.$$"
  cat >"$tmp"
  if [ -f "$dest" ] && cmp -s "$tmp" "$dest"; then
    rm -f "$tmp"
    return 1
  fi
  mv -f "$tmp" "$dest"
}

cmd_install() {
  local check=60
  while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || die "$1 needs a value"
    case "$1" in
      --check-seconds) check="$2" ;;
      *) die "unknown option $1 for install" ;;
    esac
    shift 2
  done
  if ! { is_count "$check" && [ "$check" -gt 0 ]; }; then
    die "--check-seconds: a positive number, not '$check'"
  fi
  take_lock
  local changed=0
  write_unit gpuprov-ttl.service <<EOF && changed=1
[Unit]
Description=gpuprov TTL: power the VM off when its deadline passes or it is idle too long

[Service]
Type=oneshot
ExecStart=$SELF check
EOF
  write_unit gpuprov-ttl.timer <<EOF && changed=1
[Unit]
Description=gpuprov TTL check every ${check}s

[Timer]
OnBootSec=${check}s
OnUnitActiveSec=${check}s
AccuracySec=1s

[Install]
WantedBy=timers.target
EOF
  systemctl --no-reload enable gpuprov-ttl.timer
  if [ "$changed" = 1 ]; then
    log "timer or service unit changed: systemctl daemon-reload"
    systemctl daemon-reload
  fi
  systemctl restart gpuprov-ttl.timer
}

# Stops the timer and removes it without a daemon-reload: the stopped timer's definition stays
# loaded in systemd, inert, until the next reload or boot.
cmd_off() {
  take_lock
  systemctl --no-reload disable --now gpuprov-ttl.timer 2>/dev/null || true
  rm -f "$UNIT_DIR/gpuprov-ttl.timer" "$UNIT_DIR/gpuprov-ttl.service" "$CONF" "$IDLE_FILE" \
    "$OLD_IDLE_FILE"
}

cmd_status() {
  load_conf
  local since
  since=$(idle_since)
  printf 'deadline=%s\nidle_seconds=%s\ngpu_util_max=%s\nidle_since=%s\nnow=%s\n' \
    "$deadline" "$idle_seconds" "$gpu_util_max" "$since" "$(now)"
}

main() {
  [ $# -ge 1 ] || die "usage: gpuprov-ttl install|set|off|check|status [options]"
  local cmd="$1"
  shift
  case "$cmd" in
    install) cmd_install "$@" ;;
    set) cmd_set "$@" ;;
    off) cmd_off ;;
    check) cmd_check ;;
    status) cmd_status ;;
    *) die "unknown command '$cmd'" ;;
  esac
}

main "$@"
