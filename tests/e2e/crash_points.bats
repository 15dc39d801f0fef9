#!/usr/bin/env bats
# Crash points (issue 15): gpuprov killed with SIGKILL right after each step that changes the
# world, on every emulated cloud (memory backend; `provision --no-k8s`, `provision` with
# Kubernetes on a new VM and on an existing one, and their `down`): the host's own steps (core's
# crash points through GPUPROV_TEST_CRASH_AT, a build with GPUPROV_TEST_HOOKS) and each create
# and delete call of each driver (the emulator's stall_after fault: the call is answered, then the
# cloud holds every later request until this file kills gpuprov and releases it). For each
# (cloud, point): the census of /counts before, the crash, the same command again, which must
# end as an uninterrupted run did (exit status, census, state record, one VM of that name),
# then `gpuprov down` (or the crashed down again), after which the census equals the one
# before. The table goes to $GPUPROV_CRASH_TABLE (default <build dir>/crash-table.md;
# docs/crash-table.md keeps one). Clouds run side by side, each with its own GPUPROV_HOME.

load helpers
load crash_points

setup_file() {
  export_emulated_cloud_credentials crash
  start_emulator memory --backend memory --boot-seconds 0.5 --no-rate-limits
  # The GCP emulator writes a service-account key naming its own token endpoint: one file each.
  GOOGLE_APPLICATION_CREDENTIALS="$BATS_FILE_TMPDIR/gcp-key2.json" \
    start_emulator memory2 --backend memory --boot-seconds 0.5 --no-rate-limits
  GOOGLE_APPLICATION_CREDENTIALS="$BATS_FILE_TMPDIR/gcp-key3.json" \
    start_emulator memory3 --backend memory --boot-seconds 0.5 --no-rate-limits
  export CRASH_ROWS="$BATS_FILE_TMPDIR/rows.tsv" CRASH_LOGS="$BATS_FILE_TMPDIR/logs" CRASH_PREFIX=cp
  mkdir -p "$CRASH_LOGS"
  : >"$CRASH_ROWS"
}

teardown_file() {
  stop_emulators
}

setup() {
  skip_without_hooks
}

# The host's crash points a provision on the memory backend reaches (it never gets SSH:
# host-key-pinned and the cluster's points need a real VM: crash_points_k8s.bats), and down's;
# every cloud runs each of them.
HOST_POINTS=(intent-recorded vm-created vm-running down-deleting-recorded down-vm-deleted
  down-host-key-forgotten down-kubeconfig-removed)

# The clouds whose Kubernetes is reached directly (firewall opened for 6443/80/443): their
# upgrade matrix (Kubernetes turned on for an existing plain VM) opens the existing VM's ports.
DIRECT_CLOUDS=" digitalocean aws gcp hyperstack lambda nebius "

# cloud_points CLOUD: the driver's calls that change the cloud, as stall_after matches
# (method, path prefix, body substring, nth), each a point; `"down":true` marks delete calls,
# made by `down`. Checked against the request log of an uninterrupted run (uncovered rows).
cloud_points() {
  local m p n
  while read -r m p n; do
    [ -n "$m" ] || continue
    n=${n:+,\"nth\":$n}
    case "$m" in
      DOWN-*) echo "stall:\"method\":\"${m#DOWN-}\",\"path\":\"$p\"$n,\"down\":true" ;;
      AWS) echo "stall:\"method\":\"POST\",\"path\":\"/\",\"body\":\"Action=$p&\"$n" ;;
      AWS-DOWN) echo "stall:\"method\":\"POST\",\"path\":\"/\",\"body\":\"Action=$p&\"$n,\"down\":true" ;;
      *) echo "stall:\"method\":\"$m\",\"path\":\"$p\"$n" ;;
    esac
  done <<<"$(cloud_calls "$1")"
}

# cloud_calls CLOUD: "METHOD PATH-PREFIX [NTH]" per call of the cloud in the matrix's mode
# (CRASH_MODE); NTH: the point stops after the NTH call matching (default the first). DOWN-METHOD:
# made by down; AWS ACTION and AWS-DOWN ACTION: an EC2 action, matched in the form body, since
# every EC2 call is POST /. The plain and k8s modes share each cloud's base list (base_calls);
# k8s_calls adds what a Kubernetes-on create and its down make besides; the upgrade mode's are
# the driver's open_ports calls (open_calls).
cloud_calls() {
  case "${CRASH_MODE:-plain}" in
    upgrade) open_calls "$1" ;;
    k8s) base_calls "$1"; k8s_calls "$1" ;;
    *) base_calls "$1" ;;
  esac
}

# base_calls CLOUD: the create and delete calls of `provision --no-k8s` on a new name and its
# `down`, as cloud_calls lists them.
base_calls() {
  case "$1" in
    digitalocean)
      printf '%s\n' 'POST /v2/account/keys' 'POST /v2/droplets' 'POST /v2/firewalls' \
        'DOWN-DELETE /v2/droplets/' 'DOWN-DELETE /v2/firewalls/' 'DOWN-DELETE /v2/account/keys/' ;;
    primeintellect)
      printf '%s\n' 'POST /api/v1/ssh_keys' 'POST /api/v1/pods' 'DOWN-DELETE /api/v1/pods/' \
        'DOWN-DELETE /api/v1/ssh_keys/' ;;
    aws)
      printf '%s\n' 'AWS ImportKeyPair' 'AWS CreateSecurityGroup' 'AWS AuthorizeSecurityGroupIngress' \
        'AWS RunInstances' 'AWS-DOWN TerminateInstances' 'AWS-DOWN DeleteSecurityGroup' \
        'AWS-DOWN DeleteKeyPair' ;;
    gcp)
      printf '%s\n' 'POST /compute/v1/projects/gpuprov-emulator/global/firewalls' \
        'POST /compute/v1/projects/gpuprov-emulator/zones/' \
        'DOWN-DELETE /compute/v1/projects/gpuprov-emulator/zones/' \
        'DOWN-DELETE /compute/v1/projects/gpuprov-emulator/global/firewalls/' ;;
    lambda)
      printf '%s\n' 'POST /api/v1/ssh-keys' 'POST /api/v1/firewall-rulesets' \
        'POST /api/v1/instance-operations/launch' 'DOWN-POST /api/v1/instance-operations/terminate' \
        'DOWN-DELETE /api/v1/firewall-rulesets/' 'DOWN-DELETE /api/v1/ssh-keys/' ;;
    hyperstack)
      printf '%s\n' 'POST /v1/core/environments' 'POST /v1/core/keypairs' 'POST /v1/core/virtual-machines' \
        'DOWN-DELETE /v1/core/virtual-machines/' 'DOWN-DELETE /v1/core/keypair/' \
        'DOWN-DELETE /v1/core/environments/' ;;
    verda)
      printf '%s\n' 'POST /v1/ssh-keys' 'POST /v1/instances' 'DOWN-PUT /v1/instances' \
        'DOWN-DELETE /v1/ssh-keys/' ;;
    massedcompute)
      printf '%s\n' 'POST /api/v1/ssh-keys' 'POST /api/v1/instance/launch' \
        'DOWN-POST /api/v1/instance/terminate' 'DOWN-DELETE /api/v1/ssh-keys/' ;;
    nebius)
      printf '%s\n' 'POST /nebius.vpc.v1.SecurityGroupService/Create' \
        'POST /nebius.vpc.v1.SecurityRuleService/Create' \
        'POST /nebius.vpc.v1.SecurityRuleService/Create 2' \
        'POST /nebius.compute.v1.DiskService/Create' \
        'POST /nebius.compute.v1.InstanceService/Create' \
        'DOWN-POST /nebius.compute.v1.InstanceService/Delete' \
        'DOWN-POST /nebius.compute.v1.DiskService/Delete' \
        'DOWN-POST /nebius.vpc.v1.SecurityRuleService/Delete' \
        'DOWN-POST /nebius.vpc.v1.SecurityRuleService/Delete 2' \
        'DOWN-POST /nebius.vpc.v1.SecurityGroupService/Delete' ;;
  esac
}

# k8s_calls CLOUD: the calls a Kubernetes-on create on a new name and its `down` make besides
# base_calls'. The other clouds make the same calls with other bodies: the ports 6443/80/443 go
# in the create call's body (DigitalOcean's firewall, GCP's firewall, Lambda's ruleset,
# Hyperstack's VM) or in the same rule as 22 (Nebius: up to 8 ports a rule, so still an
# ingress and an egress rule and two deletes).
k8s_calls() {
  case "$1" in
    aws) printf '%s\n' 'AWS AuthorizeSecurityGroupIngress 2' 'AWS AuthorizeSecurityGroupIngress 3' \
      'AWS AuthorizeSecurityGroupIngress 4' ;;  # one call per port: 22, 80, 443, 6443
    verda) printf '%s\n' 'POST /v1/scripts' 'DOWN-DELETE /v1/scripts' ;;  # the startup script
  esac
}

# open_calls CLOUD: the calls of the driver's open_ports for an existing VM that gets Kubernetes
# (the upgrade mode), as cloud_calls lists them.
open_calls() {
  case "$1" in
    digitalocean) echo 'POST /v2/firewalls/' ;;  # .../rules
    aws) printf '%s\n' 'AWS AuthorizeSecurityGroupIngress' 'AWS AuthorizeSecurityGroupIngress 2' \
      'AWS AuthorizeSecurityGroupIngress 3' ;;  # one call per port
    gcp) echo 'PATCH /compute/v1/projects/gpuprov-emulator/global/firewalls/' ;;
    hyperstack) printf '%s\n' 'POST /v1/core/virtual-machines/' 'POST /v1/core/virtual-machines/ 2' \
      'POST /v1/core/virtual-machines/ 3' ;;  # .../sg-rules, one call per port
    lambda) echo 'PATCH /api/v1/firewall-rulesets/' ;;
    nebius) echo 'POST /nebius.vpc.v1.SecurityRuleService/Create' ;;
  esac
}

# config_for CLOUD: config.toml: the memory backend never answers SSH, so the wait is short;
# the drivers poll often, and Lambda's client-side pacing is off (the emulator runs with
# --no-rate-limits: this file is about crashes, lambda.bats about the pacing).
config_for() {
  printf '[defaults.timeouts]\nssh_wait_seconds = 1\n'
  case "$1" in
    hyperstack) printf '[clouds.hyperstack]\npoll_interval_ms = 200\ndelete_retry_ms = 500\n' ;;
    lambda) printf '[clouds.lambda]\nrequest_interval_ms = 0\nlaunch_interval_ms = 0\n' ;;
    aws | gcp | verda | nebius | primeintellect) printf '[clouds.%s]\npoll_interval_ms = 200\n' "$1" ;;
  esac
}

# cloud_worker CLOUD: the whole matrix of one cloud, in three parts side by side, each on its
# own emulator (the census and the stall are per cloud and emulator) with its own GPUPROV_HOME,
# the rows of a part one after another: on the first the host points of the plain command, then
# Kubernetes on an existing VM (the direct-access clouds: ports-opened and their open_ports
# calls); on the second the driver's calls of the plain command; on the third the driver's
# calls of Kubernetes on a new VM and its down. (The parts take about as long on the slowest
# cloud, Nebius: 11 runs each.)
cloud_worker() {
  local cloud=$1 start=$SECONDS
  host_part "$cloud" &
  local host_pid=$!
  driver_calls_part "$cloud" k8s 3 "$cloud-k8s" &
  local k8s_pid=$!
  driver_calls_part "$cloud" plain 2 "$cloud"
  wait "$host_pid"
  wait "$k8s_pid"
  echo "$cloud $((SECONDS - start)) s" >>"$BATS_FILE_TMPDIR/seconds"
}

# home_for NAME CLOUD: a fresh GPUPROV_HOME with the cloud's config.
home_for() {
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home-$1"
  mkdir -p "$GPUPROV_HOME"
  config_for "$2" >"$GPUPROV_HOME/config.toml"
}

host_part() {
  local cloud=$1 points=()
  endpoints_of memory
  home_for "$cloud-host" "$cloud"
  CRASH_MODE=plain CRASH_NO_UNCOVERED=1 CRASH_PREFIX=cph crash_matrix "$cloud" "${HOST_POINTS[@]}"
  if [[ "$DIRECT_CLOUDS" == *" $cloud "* ]]; then
    CRASH_MODE=upgrade
    mapfile -t points < <(cloud_points "$cloud")
    crash_matrix "$cloud" ports-opened "${points[@]}"
  fi
}

# driver_calls_part CLOUD MODE N HOME: every driver call of MODE's command (plain or k8s) on the
# emulator memoryN (its own GCP key file gcp-keyN.json), in GPUPROV_HOME home-HOME.
driver_calls_part() {
  local cloud=$1 points=()
  endpoints_of "memory$3"
  export GOOGLE_APPLICATION_CREDENTIALS="$BATS_FILE_TMPDIR/gcp-key$3.json"
  home_for "$4" "$cloud"
  CRASH_MODE=$2
  mapfile -t points < <(cloud_points "$cloud")
  crash_matrix "$cloud" "${points[@]}"
}

@test "crash matrix: every emulated cloud x every point, side by side" {
  use_emulator memory
  declare -gA CLOUD_ARGS=([digitalocean]="" [primeintellect]="--gpus A100:1" [aws]=""
    [gcp]="--gpus L4:1" [lambda]="--gpus A10:1" [hyperstack]="" [verda]=""
    [massedcompute]="--gpus RTX-A6000:1" [nebius]="--gpus H100:1")
  local cloud pids=() clouds
  # Every cloud the emulator serves (nebius only when its driver is built); CRASH_CLOUDS picks.
  clouds=${CRASH_CLOUDS:-$(curl -fsS "$CONTROL/health" |
    /usr/bin/python3 -c 'import json,sys; print(" ".join(json.load(sys.stdin)["clouds"]))')}
  for cloud in $clouds; do
    cloud_worker "$cloud" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  cat "$BATS_FILE_TMPDIR/seconds"  # each cloud's matrix, wall time
  write_table "${GPUPROV_CRASH_TABLE:-$BUILD_DIR/crash-table.md}"
  cat "${GPUPROV_CRASH_TABLE:-$BUILD_DIR/crash-table.md}"
  [ -s "$CRASH_ROWS" ]
  [ -z "$(grep -v $'\tconverged\t' "$CRASH_ROWS")" ]
}

@test "the installed gpuprov (built without GPUPROV_TEST_HOOKS) ignores GPUPROV_TEST_CRASH_AT" {
  use_emulator memory
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home-nohooks"
  mkdir -p "$GPUPROV_HOME"
  config_for digitalocean >"$GPUPROV_HOME/config.toml"
  [ -x "$BUILD_DIR/installed-bin/gpuprov" ]
  run env GPUPROV_TEST_CRASH_AT=intent-recorded "$BUILD_DIR/installed-bin/gpuprov" \
    --driver-path "$BUILD_DIR/lib/gpuprov/drivers" provision --name cp-nohooks --cloud digitalocean --no-k8s
  echo "$output"
  # It went on past the point: the VM was made and the SSH wait (the memory backend never
  # answers) ended the run as an uninterrupted one ends.
  [ "$status" -eq 1 ]
  [[ "$output" != *"test crash point"* ]]
  [ "$(instances_named digitalocean cp-nohooks)" -eq 1 ]
  "$GPUPROV" down cp-nohooks
  # The build tree's gpuprov, with the same variable, dies there.
  run env GPUPROV_TEST_CRASH_AT=intent-recorded "$GPUPROV" provision --name cp-hooks --cloud digitalocean --no-k8s
  [ "$status" -eq 137 ]
  [ "$(instances_named digitalocean cp-hooks)" -eq 0 ]
  "$GPUPROV" down cp-hooks
}
