#!/usr/bin/env bats
# Tests of installer/gpuprov-ttl.sh, the node's TTL check, in a sandbox: GPUPROV_TTL_ROOT
# prefixes its paths, GPUPROV_TTL_NOW is the clock, and fake ss, who, kubectl, nvidia-smi, ps,
# systemctl and logger come first on PATH, each printing what its FAKE_* file holds.

setup() {
  TTL="$BATS_TEST_DIRNAME/../gpuprov-ttl.sh"
  export GPUPROV_TTL_ROOT="$BATS_TEST_TMPDIR/root"
  mkdir -p "$GPUPROV_TTL_ROOT"
  FAKE="$BATS_TEST_TMPDIR/fake"
  BIN="$BATS_TEST_TMPDIR/bin"
  mkdir -p "$FAKE" "$BIN"
  export FAKE
  # Each fake prints $FAKE/<name>.out (when there) and exits with $FAKE/<name>.rc (else 0);
  # systemctl also logs its arguments, and a "daemon-reload" line after an enable or disable
  # without --no-reload, as the real one reloads then (systemd src/systemctl/systemctl-enable.c).
  local tool
  # shellcheck disable=SC2016 # the fakes expand $FAKE when they run
  for tool in ss who kubectl nvidia-smi ps logger; do
    printf '#!/bin/sh\nprintf "%%s %%s\\n" "${KUBECONFIG:-}" "$*" >>"$FAKE/%s.log"\n[ -f "$FAKE/%s.out" ] && cat "$FAKE/%s.out"\nexit "$(cat "$FAKE/%s.rc" 2>/dev/null || echo 0)"\n' \
      "$tool" "$tool" "$tool" "$tool" >"$BIN/$tool"
    chmod +x "$BIN/$tool"
  done
  # shellcheck disable=SC2016
  printf '#!/bin/sh\nprintf "%%s\\n" "$*" >>"$FAKE/systemctl.log"\ncase " $* " in *" --no-reload "*) ;; *" enable "* | *" disable "*) echo daemon-reload >>"$FAKE/systemctl.log" ;; esac\n' >"$BIN/systemctl"
  chmod +x "$BIN/systemctl"
  export PATH="$BIN:/usr/sbin:/usr/bin:/sbin:/bin"
  export GPUPROV_TTL_NOW=1000
}

reloads() { grep -cx daemon-reload "$FAKE/systemctl.log" 2>/dev/null || true; }

# booted_as ID: the kernel's boot id is ID.
booted_as() {
  mkdir -p "$GPUPROV_TTL_ROOT/proc/sys/kernel/random"
  printf '%s\n' "$1" >"$GPUPROV_TTL_ROOT/proc/sys/kernel/random/boot_id"
}

powered_off() { grep -qx poweroff "$FAKE/systemctl.log" 2>/dev/null; }
still_on() { ! powered_off; }

k3s_up() {
  mkdir -p "$GPUPROV_TTL_ROOT/etc/rancher/k3s"
  : >"$GPUPROV_TTL_ROOT/etc/rancher/k3s/k3s.yaml"
}

@test "shellcheck is clean" {
  run shellcheck "$TTL"
  [ "$status" -eq 0 ]
}

@test "deadline: no power-off before it, power-off at it" {
  run "$TTL" set --deadline 1100
  [ "$status" -eq 0 ]
  GPUPROV_TTL_NOW=1099 run "$TTL" check
  [ "$status" -eq 0 ]
  still_on
  GPUPROV_TTL_NOW=1100 run "$TTL" check
  [ "$status" -eq 0 ]
  powered_off
  [[ $output == *"deadline"*"has passed"* ]]
}

@test "a deadline fires even while someone is logged in" {
  "$TTL" set --deadline 900
  echo "ESTAB 0 0 10.0.0.5:22 203.0.113.9:51234" >"$FAKE/ss.out"
  run "$TTL" check
  powered_off
}

@test "no settings: check does nothing" {
  run "$TTL" check
  [ "$status" -eq 0 ]
  still_on
}

@test "idle TTL: the clock starts at the first idle check and fires after idle_seconds" {
  "$TTL" set --idle-seconds 60
  GPUPROV_TTL_NOW=1000 run "$TTL" check
  still_on
  [ "$(cat "$GPUPROV_TTL_ROOT/run/gpuprov/ttl-idle-since")" = "1000 " ]
  GPUPROV_TTL_NOW=1059 run "$TTL" check
  still_on
  [[ $output == *"idle for 59 s of 60 s"* ]]
  GPUPROV_TTL_NOW=1060 run "$TTL" check
  powered_off
  [[ $output == *"idle for 60 s"* ]]
}

@test "idle TTL: an SSH connection keeps it up and restarts the idle clock" {
  "$TTL" set --idle-seconds 60
  GPUPROV_TTL_NOW=1000 "$TTL" check
  echo "0 0 10.0.0.5:22 203.0.113.9:51234" >"$FAKE/ss.out"
  GPUPROV_TTL_NOW=1070 run "$TTL" check
  still_on
  [[ $output == *"busy: 1 SSH session(s)"* ]]
  [ ! -e "$GPUPROV_TTL_ROOT/run/gpuprov/ttl-idle-since" ]
  rm "$FAKE/ss.out"
  GPUPROV_TTL_NOW=1080 run "$TTL" check
  still_on
  GPUPROV_TTL_NOW=1139 run "$TTL" check
  still_on
  GPUPROV_TTL_NOW=1140 run "$TTL" check
  powered_off
}

@test "idle TTL: a logged-in user (who) counts as a session" {
  "$TTL" set --idle-seconds 1
  echo "ubuntu   pts/0        2026-12-04 17:00 (203.0.113.9)" >"$FAKE/who.out"
  GPUPROV_TTL_NOW=1000 "$TTL" check
  GPUPROV_TTL_NOW=2000 run "$TTL" check
  still_on
  [[ $output == *"1 SSH session(s)"* ]]
}

@test "idle TTL: a running pod asking for nvidia.com/gpu keeps it up; one without GPUs does not" {
  k3s_up
  "$TTL" set --idle-seconds 10
  printf 'default/train 1\nkube-system/coredns \n' >"$FAKE/kubectl.out"
  GPUPROV_TTL_NOW=1000 "$TTL" check
  GPUPROV_TTL_NOW=1100 run "$TTL" check
  still_on
  [[ $output == *"GPU pod(s) running: default/train"* ]]
  printf 'kube-system/coredns \ndefault/web 0\n' >"$FAKE/kubectl.out"
  GPUPROV_TTL_NOW=1200 "$TTL" check
  GPUPROV_TTL_NOW=1210 run "$TTL" check
  powered_off
}

# agent_joined: this sandbox is a k3s agent that has joined (its unit, its kubelet's
# kubeconfig; no k3s.yaml, which only a server writes).
agent_joined() {
  mkdir -p "$GPUPROV_TTL_ROOT/etc/systemd/system" "$GPUPROV_TTL_ROOT/var/lib/rancher/k3s/agent"
  : >"$GPUPROV_TTL_ROOT/etc/systemd/system/k3s-agent.service"
  : >"$GPUPROV_TTL_ROOT/var/lib/rancher/k3s/agent/kubelet.kubeconfig"
}

@test "idle TTL on a k3s agent: its own node's GPU pods, read with the kubelet's kubeconfig" {
  agent_joined
  "$TTL" set --idle-seconds 10
  printf 'default/train-worker-1 1\n' >"$FAKE/kubectl.out"
  GPUPROV_TTL_NOW=1000 "$TTL" check
  GPUPROV_TTL_NOW=1100 run "$TTL" check
  still_on
  [[ $output == *"GPU pod(s) running: default/train-worker-1"* ]]
  # The kubelet's credentials, and only the pods bound to this node (its host name, lower case).
  local node
  node=$(uname -n)
  grep -qF "$GPUPROV_TTL_ROOT/var/lib/rancher/k3s/agent/kubelet.kubeconfig get pods --all-namespaces --field-selector=status.phase=Running,spec.nodeName=${node,,} " "$FAKE/kubectl.log"
  # config.yaml's node-name wins over the host name.
  mkdir -p "$GPUPROV_TTL_ROOT/etc/rancher/k3s"
  printf 'node-ip: "10.0.0.2"\nnode-name: "Train-Agent-2"\n' >"$GPUPROV_TTL_ROOT/etc/rancher/k3s/config.yaml"
  GPUPROV_TTL_NOW=1200 "$TTL" check
  tail -n1 "$FAKE/kubectl.log" | grep -qF -- "--field-selector=status.phase=Running,spec.nodeName=train-agent-2 "
  : >"$FAKE/kubectl.out"
  GPUPROV_TTL_NOW=1300 "$TTL" check
  GPUPROV_TTL_NOW=1310 run "$TTL" check
  powered_off
}

@test "idle TTL on a k3s agent not joined yet: busy within the start grace, as a server" {
  mkdir -p "$GPUPROV_TTL_ROOT/etc/systemd/system"
  : >"$GPUPROV_TTL_ROOT/etc/systemd/system/k3s-agent.service"
  "$TTL" set --idle-seconds 10
  echo "     42" >"$FAKE/ps.out"
  GPUPROV_TTL_NOW=1000 "$TTL" check
  GPUPROV_TTL_NOW=1100 run "$TTL" check
  still_on
  [[ $output == *"busy: k3s not answering yet, 42 s after boot"* ]]
  [ ! -e "$FAKE/kubectl.log" ]
  echo 600 >"$FAKE/ps.out"
  GPUPROV_TTL_NOW=1200 "$TTL" check
  GPUPROV_TTL_NOW=1210 run "$TTL" check
  powered_off
}

@test "idle TTL: a failing kubectl is no evidence of a GPU pod" {
  k3s_up
  "$TTL" set --idle-seconds 10
  echo "default/train 1" >"$FAKE/kubectl.out"
  echo 1 >"$FAKE/kubectl.rc"
  GPUPROV_TTL_NOW=1000 "$TTL" check
  GPUPROV_TTL_NOW=1010 run "$TTL" check
  powered_off
}

@test "idle TTL: GPU utilisation at or above the threshold keeps it up, below does not" {
  "$TTL" set --idle-seconds 10 --gpu-util-max 20
  printf '3\n20\n' >"$FAKE/nvidia-smi.out"
  GPUPROV_TTL_NOW=1000 "$TTL" check
  GPUPROV_TTL_NOW=1100 run "$TTL" check
  still_on
  [[ $output == *"GPU utilisation 20% (threshold 20%)"* ]]
  printf '3\n19\n' >"$FAKE/nvidia-smi.out"
  GPUPROV_TTL_NOW=1200 "$TTL" check
  GPUPROV_TTL_NOW=1210 run "$TTL" check
  powered_off
}

@test "idle TTL: nvidia-smi failing (no driver) or printing no numbers is no evidence" {
  "$TTL" set --idle-seconds 10
  echo "NVIDIA-SMI has failed" >"$FAKE/nvidia-smi.out"
  echo 9 >"$FAKE/nvidia-smi.rc"
  GPUPROV_TTL_NOW=1000 "$TTL" check
  GPUPROV_TTL_NOW=1010 run "$TTL" check
  powered_off
  : >"$FAKE/systemctl.log"
  echo 0 >"$FAKE/nvidia-smi.rc"
  echo "[N/A]" >"$FAKE/nvidia-smi.out"
  GPUPROV_TTL_NOW=1020 "$TTL" check
  GPUPROV_TTL_NOW=1030 run "$TTL" check
  powered_off
}

@test "set keeps the keys it is not given, takes none, and refuses bad values" {
  "$TTL" set --deadline 5000 --idle-seconds 600
  "$TTL" set --gpu-util-max 30
  run "$TTL" status
  [[ $output == *"deadline=5000"* && $output == *"idle_seconds=600"* && $output == *"gpu_util_max=30"* ]]
  "$TTL" set --deadline none
  run "$TTL" status
  [[ $output == *"deadline="$'\n'* && $output == *"idle_seconds=600"* ]]
  run "$TTL" set --deadline 8h
  [ "$status" -eq 2 ]
  [[ $output == *"--deadline: epoch seconds or none"* ]]
  run "$TTL" set --idle-seconds 0
  [ "$status" -eq 2 ]
  run "$TTL" set --gpu-util-max 101
  [ "$status" -eq 2 ]
  run "$TTL" status
  [[ $output == *"idle_seconds=600"* ]]
}

@test "install writes the timer and service and starts the timer; off removes everything" {
  run "$TTL" install --check-seconds 7
  [ "$status" -eq 0 ]
  grep -qx 'OnUnitActiveSec=7s' "$GPUPROV_TTL_ROOT/etc/systemd/system/gpuprov-ttl.timer"
  grep -qx 'ExecStart=/usr/local/sbin/gpuprov-ttl check' \
    "$GPUPROV_TTL_ROOT/etc/systemd/system/gpuprov-ttl.service"
  grep -qx -- '--no-reload enable gpuprov-ttl.timer' "$FAKE/systemctl.log"
  grep -qx 'restart gpuprov-ttl.timer' "$FAKE/systemctl.log"
  "$TTL" set --deadline 5000
  run "$TTL" off
  [ "$status" -eq 0 ]
  grep -qx -- '--no-reload disable --now gpuprov-ttl.timer' "$FAKE/systemctl.log"
  [ ! -e "$GPUPROV_TTL_ROOT/etc/systemd/system/gpuprov-ttl.timer" ]
  [ ! -e "$GPUPROV_TTL_ROOT/etc/gpuprov/ttl.conf" ]
  run "$TTL" install --check-seconds 0
  [ "$status" -eq 2 ]
}

@test "set and install run one at a time: the boot script and gpuprov over SSH may run them together" {
  # This systemctl notices a second call while one is running, and is slow enough to be caught.
  # shellcheck disable=SC2016
  printf '#!/bin/sh\n[ -e "$FAKE/busy" ] && echo OVERLAP >>"$FAKE/systemctl.log"\n: >"$FAKE/busy"\nsleep 0.05\nrm -f "$FAKE/busy"\nprintf "%%s\\n" "$*" >>"$FAKE/systemctl.log"\n' \
    >"$BIN/systemctl"
  local i pids=()
  for i in 1 2 3 4 5 6 7 8; do
    { "$TTL" set --deadline "$((5000 + i))" && "$TTL" install --check-seconds 5; } \
      >"$FAKE/run.$i" 2>&1 &
    pids+=("$!")
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { cat "$FAKE/run.$((i + 1))"; false; }
  done
  ! grep -q OVERLAP "$FAKE/systemctl.log"
  [ "$(grep -cx 'restart gpuprov-ttl.timer' "$FAKE/systemctl.log")" -eq 8 ]
  grep -Eqx 'deadline=500[1-8]' "$GPUPROV_TTL_ROOT/etc/gpuprov/ttl.conf"
  ! ls "$GPUPROV_TTL_ROOT/etc/gpuprov/" | grep -q tmp
}

@test "install reloads systemd only when a unit file changed; off never reloads" {
  "$TTL" install --check-seconds 7
  [ "$(reloads)" -eq 1 ]
  # gpuprov ttl NAME 2h on a node running a GPU pod: set + install with the same units.
  "$TTL" set --deadline 9000
  run "$TTL" install --check-seconds 7
  [ "$status" -eq 0 ]
  [ "$(reloads)" -eq 1 ]
  grep -c 'restart gpuprov-ttl.timer' "$FAKE/systemctl.log" | grep -qx 2
  run "$TTL" install --check-seconds 9
  [[ $output == *"unit changed: systemctl daemon-reload"* ]]
  [ "$(reloads)" -eq 2 ]
  "$TTL" off
  [ "$(reloads)" -eq 2 ]
  [ ! -e "$GPUPROV_TTL_ROOT/etc/systemd/system/gpuprov-ttl.service" ]
}

@test "idle TTL: a clock started during an earlier boot is not used; the new boot starts its own" {
  booted_as 11111111-aaaa
  "$TTL" set --idle-seconds 60
  GPUPROV_TTL_NOW=1000 "$TTL" check
  [ "$(cat "$GPUPROV_TTL_ROOT/run/gpuprov/ttl-idle-since")" = "1000 11111111-aaaa" ]
  # Powered off and started again days later, with /run kept (a clock under /run is normally
  # gone after a boot): another boot id.
  booted_as 22222222-bbbb
  GPUPROV_TTL_NOW=500000 run "$TTL" check
  still_on
  [[ $output == *"idle for 0 s of 60 s"* ]]
  GPUPROV_TTL_NOW=500059 run "$TTL" check
  still_on
  GPUPROV_TTL_NOW=500060 run "$TTL" check
  powered_off
}

@test "idle TTL: a clock an older version kept under /var/lib is dropped" {
  "$TTL" set --idle-seconds 60
  mkdir -p "$GPUPROV_TTL_ROOT/var/lib/gpuprov"
  echo 10 >"$GPUPROV_TTL_ROOT/var/lib/gpuprov/ttl-idle-since"
  GPUPROV_TTL_NOW=500000 run "$TTL" check
  still_on
  [ ! -e "$GPUPROV_TTL_ROOT/var/lib/gpuprov/ttl-idle-since" ]
  run "$TTL" status
  [[ $output == *"idle_since=500000"* ]]
}

@test "idle TTL: an install holding the installer's lock counts as busy" {
  "$TTL" set --idle-seconds 10
  mkdir -p "$GPUPROV_TTL_ROOT/run/lock"
  local lock="$GPUPROV_TTL_ROOT/run/lock/gpuprov-install.lock"
  GPUPROV_TTL_NOW=1000 "$TTL" check
  (
    exec 9>>"$lock"
    flock 9
    GPUPROV_TTL_NOW=1100 "$TTL" check
  ) 2>"$FAKE/held.out"
  cat "$FAKE/held.out"
  still_on
  grep -q 'busy: gpuprov-install is running (it holds /run/lock/gpuprov-install.lock)' "$FAKE/held.out"
  # Released (the file stays): idle again, from here.
  GPUPROV_TTL_NOW=1200 "$TTL" check
  still_on
  GPUPROV_TTL_NOW=1210 run "$TTL" check
  powered_off
}

@test "idle TTL: k3s installed but not answering counts as busy in the first minutes after boot" {
  mkdir -p "$GPUPROV_TTL_ROOT/etc/systemd/system"
  : >"$GPUPROV_TTL_ROOT/etc/systemd/system/k3s.service"
  "$TTL" set --idle-seconds 10
  echo 1 >"$FAKE/kubectl.rc"
  echo "     42" >"$FAKE/ps.out" # PID 1 is 42 s old; k3s has not written k3s.yaml yet
  GPUPROV_TTL_NOW=1000 "$TTL" check
  GPUPROV_TTL_NOW=1100 run "$TTL" check
  still_on
  [[ $output == *"busy: k3s not answering yet, 42 s after boot (grace 600 s)"* ]]
  k3s_up # k3s.yaml there, the API still silent
  echo 599 >"$FAKE/ps.out"
  GPUPROV_TTL_NOW=1200 run "$TTL" check
  still_on
  [[ $output == *"k3s not answering yet"* ]]
  # Past the grace a silent API is no evidence of work.
  echo 600 >"$FAKE/ps.out"
  GPUPROV_TTL_NOW=1300 "$TTL" check
  GPUPROV_TTL_NOW=1310 run "$TTL" check
  powered_off
}
