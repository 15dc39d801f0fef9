# shellcheck shell=bash disable=SC2034  # the variables set here are used by the .bats files that load it
# Shared set-up for the end-to-end CLI tests: a private GPUPROV_HOME per test file, the built
# gpuprov, and counting of the Docker test cloud's containers.
REPO_ROOT="$(cd "$(dirname "${BATS_TEST_FILENAME}")/../.." && pwd)"
BUILD_DIR="${GPUPROV_BUILD_DIR:-build}"
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$REPO_ROOT/$BUILD_DIR" ;; esac
GPUPROV="$BUILD_DIR/bin/gpuprov"
export NO_COLOR=1

# Containers of the docker test cloud for one VM name (0 or 1).
count_vm_containers() {
  docker ps -a --filter "label=io.gpuprov.managed=1" --filter "label=io.gpuprov.name=$1" -q | wc -l
}

# Every container of the docker test cloud.
count_all_gpuprov_containers() {
  docker ps -a --filter "label=io.gpuprov.managed=1" -q | wc -l
}

# Removes the containers of the given VM names, whatever state the test left.
remove_vm_containers() {
  local name
  for name in "$@"; do
    docker ps -a --filter "label=io.gpuprov.managed=1" --filter "label=io.gpuprov.name=$name" -q |
      xargs -r docker rm -f >/dev/null 2>&1 || true
  done
}

file_mode() { stat -c '%a' "$1"; }

# wait_for SECONDS COMMAND...: runs COMMAND every half second until it succeeds (status 1
# after SECONDS).
wait_for() {
  local limit=$1 _
  shift
  for _ in $(seq 1 $((limit * 2))); do
    "$@" && return 0
    sleep 0.5
  done
  return 1
}

# field NAME KEY: one value of `gpuprov list --output json` for VM NAME (KEY like probe.decision).
field() {
  "$GPUPROV" list --output json | /usr/bin/python3 -c "
import json, sys
vm = [v for v in json.load(sys.stdin) if v['name'] == '$1'][0]
for k in '$2'.split('.'):
    vm = vm[k]
print(vm)"
}

# round_trips TEXT PURPOSE: how many SSH round trips with that purpose the -v log shows.
round_trips() {
  grep -c "node round trip [0-9]*: $2\$" <<<"$1" || true
}

# free_port: a free TCP port on 127.0.0.1, so a test never collides with a user's own tunnel.
free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start_tunnel NAME PORT: `gpuprov tunnel NAME --local-port PORT` in the background (its pid in
# TUNNEL_PID, its stderr in $BATS_TEST_TMPDIR/tunnel.err), waiting up to 10 s for "forwarding".
start_tunnel() {
  "$GPUPROV" tunnel "$1" --local-port "$2" 2>"$BATS_TEST_TMPDIR/tunnel.err" 3>&- &
  TUNNEL_PID=$!
  for _ in $(seq 1 50); do
    grep -q forwarding "$BATS_TEST_TMPDIR/tunnel.err" && break
    sleep 0.2
  done
}

# nodes_through_tunnel NAME: `gpuprov tunnel NAME` on a free local port (never a user's own
# 16443), the real kubectl's `get nodes` through it with NAME's kubeconfig, then the tunnel
# stopped; prints kubectl's output; status 1 unless kubectl listed a Ready node.
nodes_through_tunnel() {
  local port out rc=0
  port=$(free_port)
  start_tunnel "$1" "$port"
  out=$(KUBECONFIG="$GPUPROV_HOME/kube/$1.yaml" kubectl --server "https://127.0.0.1:$port" get nodes 2>&1) || rc=$?
  stop_child INT "$TUNNEL_PID" || true
  wait "$TUNNEL_PID" || true
  TUNNEL_PID=
  echo "$out"
  [ "$rc" -eq 0 ] && [[ "$out" == *" Ready "* ]]
}

# ---- The cloud emulator (tests/emulators) -----------------------------------------------------

# stop_child SIGNAL PID [COMM]: sends SIGNAL to PID only while it is still the process this test
# started: a child of this shell (or, with COMM, a process of that name as /proc/PID/comm
# holds it: the first 15 characters, e.g. gpuprov-emulato). Once an ended child
# has been reaped its PID is free, and on a busy machine (pid_max 32768) another process, even
# another test job, may have it already: a bare `kill PID` could hit that one. Status 1 when the
# process is gone.
stop_child() {
  local sig=$1 pid=$2 comm=${3:-} stat ppid
  [ -n "$pid" ] || return 1
  if [ -n "$comm" ]; then
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$comm" ] || return 1
  else
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
    read -r _ ppid _ <<<"${stat##*) }"
    [ "$ppid" = "$BASHPID" ] || return 1
  fi
  kill "-$sig" "$pid" 2>/dev/null
}

# export_emulated_cloud_credentials TAG: test credentials of every emulated cloud (TAG and the
# shell's PID in each, so the security scan above can tell them apart), for the emulators this
# file starts next, which take them from the environment. AWS gets us-east-1 (gpuprov picks no
# default region); GCP and Nebius name missing files that the emulator writes its keys to. HOME
# is the test file's own, so no cloud CLI file of the machine's user is read.
export_emulated_cloud_credentials() {
  local tag=$1
  export DIGITALOCEAN_TOKEN="dop_v1_${tag}_$$_secret_token"
  export AWS_ACCESS_KEY_ID="AKIA${tag^^}$$TESTKEY01" AWS_SECRET_ACCESS_KEY="$tag/$$/secret+access+key"
  unset AWS_SESSION_TOKEN AWS_PROFILE AWS_DEFAULT_REGION
  export AWS_REGION=us-east-1
  export LAMBDA_API_KEY="secret_${tag}_$$_lambda_api_key"
  export HYPERSTACK_API_KEY="hs-$tag-$$-api-key"
  export VERDA_CLIENT_ID="gpuprov-$tag-$$" VERDA_CLIENT_SECRET="secret_${tag}_$$_verda_client"
  export MASSED_API_KEY="mc_${tag}_$$_secret_api_key"
  unset MASSED_COMPUTE_API_TOKEN
  export PRIME_API_KEY="pit_${tag}_$$_secret_key"
  export NEBIUS_CREDENTIALS_FILE="$BATS_FILE_TMPDIR/nebius-credentials.json"
  export NEBIUS_PROJECT_ID=project-e00test
  unset NEBIUS_IAM_TOKEN
  export GOOGLE_APPLICATION_CREDENTIALS="$BATS_FILE_TMPDIR/gcp-key.json"
  export HOME="$BATS_FILE_TMPDIR/userhome"
  mkdir -p "$HOME"
}

# own_homes: this test file's own HOME (no cloud CLI file of the machine's user is read) and
# GPUPROV_HOME, both made.
own_homes() {
  export HOME="$BATS_FILE_TMPDIR/userhome" GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$HOME" "$GPUPROV_HOME"
}

# timeouts BOOT_INSTALL_WAIT API_WAIT: GPUPROV_HOME's config.toml with those [defaults.timeouts]
# (seconds, compressed for tests) and 180 s for SSH to answer a docker-backed VM.
timeouts() {
  printf '[defaults.timeouts]\nssh_wait_seconds = 180\nboot_install_wait_seconds = %s\napi_wait_seconds = %s\n' \
    "$1" "$2" >"$GPUPROV_HOME/config.toml"
}

# start_docker_clouds TAG CLOUDS [ARGS...]: the setup_file of a test file whose VMs are test VMs:
# DigitalOcean's and Prime Intellect's test credentials (TAG and the shell's PID in each, for the
# security scan), GPUPROV_HOME made with `timeouts 120 60`, and the emulator "emu" serving CLOUDS
# on the docker backend with ARGS (e.g. --image).
start_docker_clouds() {
  local tag=$1 clouds=$2
  shift 2
  export DIGITALOCEAN_TOKEN="dop_v1_${tag}_$$_secret_token"
  export PRIME_API_KEY="pit_${tag}_$$_secret_key"
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  timeouts 120 60
  start_emulator emu --backend docker --clouds "$clouds" "$@"
}

# end_docker_test: the teardown of a test in such a file: its tunnel stopped, every instance and
# fault of the file's emulators gone, the VM records and kubeconfigs removed.
end_docker_test() {
  [ -z "${TUNNEL_PID:-}" ] || stop_child TERM "$TUNNEL_PID" || true
  reset_emulators
  rm -f "$GPUPROV_HOME"/state/*.json "$GPUPROV_HOME"/kube/*.yaml
}

# on VM CMD...: runs CMD on the VM over gpuprov ssh (the VM's shell reads the words joined).
on() {
  local vm=$1
  shift
  "$GPUPROV" ssh "$vm" -- "$@"
}

# start_emulator NAME ARGS...: starts `gpuprov-emulator ARGS` for this test file (from
# setup_file), known as NAME; its "<cloud> <url>" lines go to $BATS_FILE_TMPDIR/NAME.out. Cloud
# credentials come from the environment (for gcp, GOOGLE_APPLICATION_CREDENTIALS may name a
# missing file: the emulator writes the key it issues there).
start_emulator() {
  local name=$1 _
  shift
  "$BUILD_DIR/bin/gpuprov-emulator" "$@" \
    >"$BATS_FILE_TMPDIR/$name.out" 2>"$BATS_FILE_TMPDIR/$name.err" 3>&- &
  echo $! >"$BATS_FILE_TMPDIR/$name.emulator-pid"
  for _ in $(seq 1 100); do
    grep -q '^control ' "$BATS_FILE_TMPDIR/$name.out" && return 0
    sleep 0.2
  done
  cat "$BATS_FILE_TMPDIR/$name.err" >&2
  return 1
}

# stop_emulators: ends every emulator of this file (from teardown_file); the docker backend
# removes its VMs.
stop_emulators() {
  local f pid
  for f in "$BATS_FILE_TMPDIR"/*.emulator-pid; do
    [ -e "$f" ] || continue
    pid=$(cat "$f")
    stop_child TERM "$pid" gpuprov-emulato || true
    wait "$pid" 2>/dev/null || true
  done
}

# endpoints_of NAME: exports GPUPROV_<CLOUD>_ENDPOINT for every cloud emulator NAME serves and
# CONTROL (its control API); its armed faults stay.
endpoints_of() {
  local cloud url
  while read -r cloud url; do
    if [ "$cloud" = control ]; then
      export CONTROL="$url"
    else
      export "GPUPROV_${cloud^^}_ENDPOINT=$url"
    fi
  done <"$BATS_FILE_TMPDIR/$1.out"
}

# use_emulator NAME: endpoints_of NAME, and clears its armed faults.
use_emulator() {
  endpoints_of "$1"
  curl -fsS -X DELETE "$CONTROL/faults" >/dev/null
}

# reset_emulators: removes every instance and fault of every emulator of this file (teardown).
reset_emulators() {
  local out control
  for out in "$BATS_FILE_TMPDIR"/*.out; do
    control=$(awk '$1=="control"{print $2}' "$out")
    [ -z "$control" ] || curl -fsS -X POST "$control/reset" -d '{}' >/dev/null || true
  done
}

# count CLOUD FIELD: one number from the current emulator's counts.
count() {
  curl -fsS "$CONTROL/counts?cloud=$1" | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin).get('$2', 0))"
}

# fault JSON: arms one fault on the current emulator.
fault() {
  curl -fsS -X POST "$CONTROL/faults" -d "$1" >/dev/null
}

# expect_nothing_left CLOUD [FIELD...]: waits until the cloud has no instance (in the API or
# behind it), no firewall and none of the other counted FIELDs (e.g. ssh_keys) left.
expect_nothing_left() {
  local cloud=$1 field left _
  shift
  for _ in $(seq 1 60); do
    left=0
    for field in instances backend_instances firewalls "$@"; do
      [ "$(count "$cloud" "$field")" -eq 0 ] || left=1
    done
    [ "$left" -eq 1 ] || return 0
    sleep 0.5
  done
  curl -fsS "$CONTROL/counts?cloud=$cloud" >&2
  return 1
}

# ---- Kubernetes ----------------------------------------------------------------------------------

# expect_cluster_ready NAME: the kubeconfig gpuprov wrote for VM NAME is 0600 and the real kubectl
# sees the node Ready through it.
expect_cluster_ready() {
  local kc="$GPUPROV_HOME/kube/$1.yaml" nodes
  [ "$(file_mode "$kc")" = 600 ] || { echo "kubeconfig $kc: mode $(file_mode "$kc")" >&2; return 1; }
  nodes=$(KUBECONFIG="$kc" kubectl get nodes) || return 1
  echo "$nodes"
  [[ "$nodes" == *" Ready "* ]]
}

# expect_k8s_by_boot_route OUTPUT: a `gpuprov -v provision` OUTPUT that took the boot route with
# direct access, found the install done by cloud-init and pushed nothing over SSH.
expect_k8s_by_boot_route() {
  [[ "$1" == *"cluster plan: route boot, access direct"* ]] &&
    [[ "$1" == *"probe: check-api: installed, k3s running"* ]] &&
    [[ "$1" != *"node round trip "*": push installer"* ]]
}

# expect_address_learned_at_boot NAME OUTPUT: the boot install learned the VM's public address
# the way the cloud gives it (plugins/<cloud>/REFERENCE.md, section 6), so the certificate
# covered it: route boot, no re-run with --public-ip.
expect_address_learned_at_boot() {
  [ "$(field "$1" route)" = boot ] &&
    [[ "$2" != *"the API certificate does not cover"* ]] &&
    [ "$(round_trips "$2" "re-run installer with the public IP")" -eq 0 ]
}

# expect_address_rerun NAME OUTPUT WHY: the cloud gives its VM no way to learn its public address
# (plugins/<cloud>/REFERENCE.md, section 6), so gpuprov re-ran the installer with --public-ip: route ssh, the
# reason naming the certificate and WHY.
expect_address_rerun() {
  [ "$(field "$1" route)" = ssh ] &&
    [[ "$(field "$1" route_reason)" == *"the API certificate did not cover 127."*"($3)" ]] &&
    [[ "$2" == *"the API certificate does not cover"* ]]
}

# api_ping ADDRESS: k3s's anonymous /ping at ADDRESS:6443 from this machine ("pong" when open).
# An HTTP check, not a TCP connect: the emulators' port gate accepts a connection before it
# reaches the node, whose firewall then drops it (tests/emulators/README.md, Reachability).
api_ping() {
  curl -sk --connect-timeout 3 --max-time 6 "https://$1:6443/ping"
}

# ---- Security checks after every gpuprov command (issue 15) --------------------------------------
# `run` is wrapped: after each `run "$GPUPROV" ...` (but `gpuprov ssh`, whose output is the
# node's), its output, the state records and `list --output json` are scanned for the test
# credentials of every cloud (the values of the variables below, as the test set them) and for
# private key material; and every file gpuprov keeps under GPUPROV_HOME must be 0600 (public keys
# may be 0644) and its directories 0700. A hit fails the test, naming what and where. The cost
# is a few greps and one stat per command.
SECRET_ENV_VARS="DIGITALOCEAN_TOKEN DIGITALOCEAN_ACCESS_TOKEN DO_API_TOKEN AWS_SECRET_ACCESS_KEY
AWS_SESSION_TOKEN LAMBDA_API_KEY HYPERSTACK_API_KEY PRIME_API_KEY MASSED_API_KEY
MASSED_COMPUTE_API_TOKEN NEBIUS_IAM_TOKEN VERDA_CLIENT_SECRET DATACRUNCH_CLIENT_SECRET"
# Key material in any form: PEM private keys (ssh, GCP and Nebius service-account keys, k3s's
# client key) and a kubeconfig's embedded client credentials.
SECRET_PATTERNS='-----BEGIN [A-Z ]*PRIVATE KEY-----|client-(key|certificate)-data"?:? *"?[A-Za-z0-9+/=]{20,}'

eval "bats_plain_run() $(declare -f run | tail -n +2)"

# secret_hits TEXT WHERE: prints one line per secret found in TEXT.
secret_hits() {
  local var value
  for var in $SECRET_ENV_VARS; do
    value=${!var:-}
    [ "${#value}" -ge 8 ] || continue
    [[ "$1" != *"$value"* ]] || echo "secret leak: \$$var's value in $2"
  done
  if grep -qE -- "$SECRET_PATTERNS" <<<"$1"; then
    echo "secret leak: key material ($(grep -oE -- "$SECRET_PATTERNS" <<<"$1" | head -1)) in $2"
  fi
  # Service-account private keys the emulators wrote for GCP and Nebius, by their body.
  local f body
  for f in "${GOOGLE_APPLICATION_CREDENTIALS:-}" "${NEBIUS_CREDENTIALS_FILE:-}"; do
    if [ -z "$f" ] || [ ! -r "$f" ]; then continue; fi
    body=$(grep -oE '[A-Za-z0-9+/]{40,}' "$f" | sed -n 3p)
    [ -z "$body" ] || [[ "$1" != *"$body"* ]] || echo "secret leak: the key of $f in $2"
  done
}

# bad_modes: gpuprov's files under GPUPROV_HOME that are not 0600 (0644 for *.pub) and its
# directories that are not 0700; config.toml and spec files are the user's own, and so is the
# home folder a test made itself (provision tightens it; docker_cloud.bats checks that).
bad_modes() {
  local home=${GPUPROV_HOME:-}
  if [ -z "$home" ] || [ ! -d "$home" ]; then return 0; fi
  find "$home"/state "$home"/keys "$home"/kube "$home"/locks "$home"/pacer "$home"/known_hosts \
    \( -type d ! -perm 0700 -printf 'mode %m of %p (want 700)\n' \) -o \
    \( -type f ! -name '*.pub' ! -perm 0600 -printf 'mode %m of %p (want 600)\n' \) -o \
    \( -type f -name '*.pub' ! -perm 0600 ! -perm 0644 -printf 'mode %m of %p (want 600 or 644)\n' \) \
    2>/dev/null
}

# security_checks ARGS...: the checks above after one `run ARGS` (the run's flags skipped).
security_checks() {
  while [[ $# -gt 0 && ( $1 == -* || $1 == '!' ) ]]; do
    [ "$1" != -- ] || { shift; break; }
    shift
  done
  [ "${1:-}" = "$GPUPROV" ] || return 0
  local arg
  for arg in "${@:2}"; do
    case "$arg" in
      -*) ;;
      ssh) return 0 ;; # the node's own output
      *) break ;;
    esac
  done
  local found state
  # shellcheck disable=SC2154  # output: set by bats' run
  found=$(secret_hits "$output" "the output of: ${*}")$'\n'
  state=$(cat "${GPUPROV_HOME:-/nonexistent}"/state/*.json 2>/dev/null || true)
  [ -z "$state" ] || found+=$(secret_hits "$state" "a state record")$'\n'
  if [[ " $* " == *" provision "* || " $* " == *" down "* ]]; then
    found+=$(secret_hits "$("$GPUPROV" list --no-refresh --output json 2>&1)" "list --output json")$'\n'
  fi
  found+=$(bad_modes)
  [ -n "${found//$'\n'/}" ] || return 0
  echo "$found" >&2
  return 1
}

run() {
  bats_plain_run "$@"
  local rc=$?
  security_checks "$@" || return 1
  return "$rc"
}

# start_vm_with_loopback_server VM ADDR LABEL DIR PORT: a container of the test image (systemd,
# sshd, cloud-init with a NoCloud seed authorising $GPUPROV_HOME/keys/id_ed25519, generated here)
# with only SSH published, on ADDR:22; python3's HTTP server serves DIR's files (copied to
# /srv/web) on the VM's own 127.0.0.1:PORT, which only an SSH forward reaches. Returns when SSH
# answers and the server listens.
start_vm_with_loopback_server() {
  local vm=$1 addr=$2 label=$3 dir=$4 port=$5 image seed i
  mkdir -p "$GPUPROV_HOME/keys" "$GPUPROV_HOME/state"
  chmod 0700 "$GPUPROV_HOME" "$GPUPROV_HOME/keys" "$GPUPROV_HOME/state"
  ssh-keygen -q -t ed25519 -N '' -C gpuprov-e2e -f "$GPUPROV_HOME/keys/id_ed25519"
  image=$(bash "$REPO_ROOT/tests/fixtures/testvm/build-image.sh" 2>/dev/null | tail -1)
  seed="$BATS_FILE_TMPDIR/seed"
  mkdir -p "$seed/var/lib/cloud/seed/nocloud" "$seed/srv/web"
  printf 'instance-id: %s\nlocal-hostname: vm1\npublic-keys:\n  - "%s"\n' \
    "$vm-$RANDOM" "$(cat "$GPUPROV_HOME/keys/id_ed25519.pub")" \
    >"$seed/var/lib/cloud/seed/nocloud/meta-data"
  printf '#cloud-config\n{}\n' >"$seed/var/lib/cloud/seed/nocloud/user-data"
  cp -R "$dir/." "$seed/srv/web/"
  docker rm -f "$vm" >/dev/null 2>&1 || true
  docker create --name "$vm" --hostname vm1 --label "org.gpuprov.test=$label" \
    --cap-add SYS_ADMIN --cgroupns host -v /sys/fs/cgroup:/sys/fs/cgroup:ro \
    --tmpfs /run:rw,nosuid,nodev,exec,mode=755 --tmpfs /run/lock:rw,nosuid,nodev,noexec \
    --stop-signal SIGRTMIN+3 -p "$addr:22:22" "$image" /lib/systemd/systemd >/dev/null
  tar -C "$seed" --owner=0 --group=0 --numeric-owner -cf - var srv | docker cp - "$vm:/"
  docker start "$vm" >/dev/null
  for i in $(seq 1 120); do
    docker exec "$vm" systemd-run --unit=web python3 -m http.server "$port" \
      --bind 127.0.0.1 --directory /srv/web >/dev/null 2>&1 && break
    sleep 1
  done
  for i in $(seq 1 120); do
    timeout 2 bash -c "exec 3<>/dev/tcp/$addr/22 && head -c 4 <&3" 2>/dev/null | grep -q '^SSH-' &&
      docker exec "$vm" ss -ltn "sport = :$port" | grep -q LISTEN && break
    sleep 1
  done
}

# write_docker_record NAME VM ADDR KUBERNETES ACCESS_MODE: a state record (0600) for a VM that a
# test started itself (a container VM on ADDR:22, user root, phase ready), as provision writes one
# on the docker cloud, so `ssh`, `tunnel` and `list` can be pointed at it.
write_docker_record() {
  local now
  now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  cat >"$GPUPROV_HOME/state/$1.json" <<JSON
{
  "version": 1,
  "name": "$1",
  "cloud": "docker",
  "region": "local",
  "phase": "ready",
  "vm_id": "$2",
  "public_ip": "$3",
  "ssh_user": "root",
  "ssh_port": 22,
  "kubernetes": $4,
  "access_mode": "$5",
  "created_at": "$now",
  "updated_at": "$now",
  "extra": {}
}
JSON
  chmod 0600 "$GPUPROV_HOME/state/$1.json"
}

# no_check_pod_left KUBECONFIG: the API has no gpuprov-cuda-check pod (the CUDA check deletes
# its pods, on one node as on every node of a cluster).
no_check_pod_left() {
  run env KUBECONFIG="$1" kubectl get pods -A -o name
  echo "$output"
  # shellcheck disable=SC2154  # status: set by bats' run
  [ "$status" -eq 0 ]
  [[ "$output" == *"pod/coredns-"* ]]
  [[ "$output" != *"gpuprov-cuda-check"* ]]
}

# assert_cuda_check: $output, of a GPU provision with Kubernetes, ends its phases with the CUDA
# check (a pod requesting the GPUs ran a CUDA program), said with its time.
assert_cuda_check() {
  [[ "$output" == *"running a CUDA program in a pod requesting"* ]]
  [[ "$output" == *", CUDA check passed ("*", cuda "*" s)."* ]]
}
