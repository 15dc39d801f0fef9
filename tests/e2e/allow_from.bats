#!/usr/bin/env bats
# --allow-from on every direct-access cloud, through the emulator's memory backend: the cloud's
# own rules decide which ports this machine (source 127.0.0.1) reaches (the emulator's
# reachable_ports, tests/emulators/README.md). The memory backend's addresses never answer SSH,
# so each provision ends soon after its VM runs and its ports are set (ssh_wait_seconds = 1);
# what is checked is the firewall the driver made and the state record.
# - --allow-from 127.0.0.1/32: 6443, 80 and 443 reachable (the rules hold this machine);
# - a re-run with --allow-from 10.0.0.0/8 updates the rules: 6443 no longer reachable, SSH is;
# - a re-run without --allow-from keeps the recorded sources;
# - --allow-from-ssh narrows 22 too; down leaves nothing.
# - bad CIDRs are refused with exit 2 naming the flag or key, nothing created.

load helpers

CLOUDS_ALL="aws gcp digitalocean lambda hyperstack nebius"

setup_file() {
  export DIGITALOCEAN_TOKEN="dop_v1_e2e_$$_allow_token"
  export AWS_ACCESS_KEY_ID="AKIAE2E$$ALLOWKEY01"
  export AWS_SECRET_ACCESS_KEY="e2e/$$/allow+secret+key"
  unset AWS_SESSION_TOKEN AWS_PROFILE AWS_REGION AWS_DEFAULT_REGION
  export AWS_REGION=us-east-1 # gpuprov picks no default region (issue 17)
  export HOME="$BATS_FILE_TMPDIR/userhome" # no cloud CLI files of the machine's user
  mkdir -p "$HOME"
  export GOOGLE_APPLICATION_CREDENTIALS="$BATS_FILE_TMPDIR/gcp-key.json" # written by the emulator
  export LAMBDA_API_KEY="secret_e2e_$$_allow_lambda_key"
  export HYPERSTACK_API_KEY="hs-e2e-$$-allow-key"
  export NEBIUS_CREDENTIALS_FILE="$BATS_FILE_TMPDIR/nebius-credentials.json"
  export NEBIUS_PROJECT_ID=project-e00test
  unset NEBIUS_IAM_TOKEN
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  start_emulator emu --backend memory --boot-seconds 1 --clouds "${CLOUDS_ALL// /,}"
}

teardown_file() {
  stop_emulators
  remove_vm_containers af-docker
}

setup() {
  use_emulator emu
  printf '[defaults.timeouts]\nssh_wait_seconds = 1\n' >"$GPUPROV_HOME/config.toml"
  printf '[clouds.hyperstack]\npoll_interval_ms = 200\ndelete_retry_ms = 500\n' \
    >>"$GPUPROV_HOME/config.toml"
  printf '[clouds.nebius]\npoll_interval_ms = 200\n' >>"$GPUPROV_HOME/config.toml"
}

teardown() {
  reset_emulators
  rm -f "$GPUPROV_HOME"/state/*.json
}

# reachable CLOUD NAME: the ports the cloud's rules let 127.0.0.1 reach on VM NAME now.
reachable() {
  curl -fsS "$CONTROL/instances?cloud=$1" | /usr/bin/python3 -c '
import json, sys
rows = [r for r in json.load(sys.stdin)["instances"] if r["name"] == sys.argv[1]]
print(rows[0]["reachable_ports"] if rows else "<no instance>")' "$2"
}

# recorded NAME KEY: a list of the VM's state record (allow_from, allow_from_ports), comma-joined.
recorded() {
  /usr/bin/python3 -c '
import json, sys
print(",".join(str(x) for x in json.load(open(sys.argv[1]))[sys.argv[2]]))' \
    "$GPUPROV_HOME/state/$1.json" "$2"
}

# gpus CLOUD: the --gpus a cloud without CPU machines needs.
gpus() {
  case "$1" in
    lambda) echo "--gpus A10:1" ;;
    nebius) echo "--gpus L40S:1" ;;
  esac
}

# provision_to_ports CLOUD NAME ARGS...: a k8s provision that ends at the SSH wait (memory
# backend) after the VM runs with its ports set. Fails on any other ending.
provision_to_ports() {
  local cloud=$1 name=$2
  shift 2
  # shellcheck disable=SC2046  # gpus is one flag and its value, or nothing
  run "$GPUPROV" -v provision --name "$name" --cloud "$cloud" $(gpus "$cloud") "$@"
  echo "$output"
  [[ "$output" == *"waiting for SSH"* ]] || return 1
  [[ "$output" == *"cluster plan: route "*", access direct"* ]] || return 1
}

# narrowing CLOUD [SSH_REACHABLE]: the whole story on one cloud. SSH_REACHABLE: what this machine
# still reaches once SSH is narrowed to a source that does not hold it (nothing, unless the
# cloud has rules beside the VM's own that open 22).
narrowing() {
  local cloud=$1 name="af-$1" ssh_reachable=${2:-}
  provision_to_ports "$cloud" "$name" --allow-from 127.0.0.1/32
  [[ "$output" == *"ports 80, 443 and 6443 open only to 127.0.0.1/32"* ]]
  [ "$(reachable "$cloud" "$name")" = "22,80,443,6443" ]
  [ "$(recorded "$name" allow_from)" = 127.0.0.1/32 ]
  [ "$(recorded "$name" allow_from_ports)" = 80,443,6443 ]
  [ "$(field "$name" allow_from)" = "['127.0.0.1/32']" ]

  # A different list updates the rules of the existing VM.
  provision_to_ports "$cloud" "$name" --allow-from 10.0.0.0/8
  [[ "$output" == *"its sources change from 80, 443 and 6443 open only to 127.0.0.1/32"* ]]
  [ "$(reachable "$cloud" "$name")" = 22 ]
  [ "$(recorded "$name" allow_from)" = 10.0.0.0/8 ]

  # No --allow-from: the record's sources stay, nothing is reopened.
  provision_to_ports "$cloud" "$name"
  [[ "$output" != *"opening ports"* ]]
  [ "$(reachable "$cloud" "$name")" = 22 ]
  [ "$(recorded "$name" allow_from)" = 10.0.0.0/8 ]

  # --allow-from-ssh narrows SSH as well: nothing is reachable from here.
  provision_to_ports "$cloud" "$name" --allow-from 10.0.0.0/8 --allow-from-ssh
  [ "$(reachable "$cloud" "$name")" = "$ssh_reachable" ]
  [ "$(recorded "$name" allow_from_ports)" = 22,80,443,6443 ]

  # Back to everyone, through the same mechanism.
  provision_to_ports "$cloud" "$name" --allow-from 0.0.0.0/0 --allow-from-ssh
  [ "$(reachable "$cloud" "$name")" = "22,80,443,6443" ]

  run "$GPUPROV" down "$name"
  echo "$output"
  [ "$status" -eq 0 ]
  expect_nothing_left "$cloud"
}

@test "allow_from: digitalocean firewall sources follow --allow-from, re-runs update or keep them" {
  narrowing digitalocean
}

@test "allow_from: a new VM made with a non-matching CIDR is not reachable on 6443 from here" {
  provision_to_ports digitalocean af-new --allow-from 10.0.0.0/8 --allow-from 192.0.2.0/24
  [ "$(reachable digitalocean af-new)" = 22 ]
  [ "$(recorded af-new allow_from)" = 10.0.0.0/8,192.0.2.0/24 ]
  run "$GPUPROV" down af-new
  [ "$status" -eq 0 ]
  expect_nothing_left digitalocean
}

@test "allow_from: config.toml [defaults] allow_from applies; the warning without it names the option" {
  printf '[defaults]\nallow_from = ["127.0.0.1/32"]\n' >>"$GPUPROV_HOME/config.toml"
  provision_to_ports digitalocean af-cfg
  [[ "$output" == *"allow_from="*"127.0.0.1/32 (from "*"config.toml [defaults])"* ]]
  [ "$(recorded af-cfg allow_from)" = 127.0.0.1/32 ]
  run "$GPUPROV" down af-cfg
  [ "$status" -eq 0 ]
  expect_nothing_left digitalocean
}

@test "allow_from: bad CIDRs are refused with exit 2 naming the flag or key; nothing is created" {
  local bad
  for bad in 10.0.0.1/8 300.1.1.1/32 10.0.0.0/33 fe80::1/129 "10.0.0.0/" example.com; do
    run "$GPUPROV" provision --name af-bad --cloud digitalocean --allow-from "$bad"
    echo "$output"
    [ "$status" -eq 2 ]
    [[ "$output" == *"--allow-from"* ]]
  done
  run "$GPUPROV" provision --name af-bad --cloud digitalocean --allow-from 10.0.0.1/8
  [[ "$output" == *"write the network 10.0.0.0/8"* ]]
  run "$GPUPROV" provision --name af-bad --cloud digitalocean --allow-from-ssh
  [ "$status" -eq 2 ]
  [[ "$output" == *"--allow-from-ssh needs sources"* ]]
  printf '[defaults]\nallow_from = ["nonsense"]\n' >>"$GPUPROV_HOME/config.toml"
  run "$GPUPROV" provision --name af-bad --cloud digitalocean
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"allow_from (from "*"config.toml [defaults])"* ]]
  [ "$(count digitalocean instances)" -eq 0 ]
  [ "$(count digitalocean firewalls)" -eq 0 ]
  [ ! -e "$GPUPROV_HOME/state/af-bad.json" ]
}

@test "allow_from: a driver that does not narrow sources is refused before anything is made" {
  run "$GPUPROV" provision --name af-docker --cloud docker --allow-from 127.0.0.1/32 --allow-from-ssh
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"the docker driver cannot restrict who reaches a VM's ports"* ]]
  [ "$(count_vm_containers af-docker)" -eq 0 ]
  [ ! -e "$GPUPROV_HOME/state/af-docker.json" ]
}

@test "allow_from: where only SSH is opened, --allow-from says it narrows nothing" {
  run "$GPUPROV" provision --name af-plain --cloud digitalocean --no-k8s --allow-from 10.0.0.0/8
  echo "$output"
  [[ "$output" == *"--allow-from narrows nothing here: this run opens only SSH (22)"* ]]
  [ "$(reachable digitalocean af-plain)" = 22 ]
  run "$GPUPROV" down af-plain
  [ "$status" -eq 0 ]
  expect_nothing_left digitalocean
}

@test "allow_from: aws security group rules follow --allow-from, re-runs update or keep them" {
  narrowing aws
}

@test "allow_from: hyperstack security rules follow --allow-from, re-runs update or keep them" {
  narrowing hyperstack
}

@test "allow_from: gcp firewall rules follow --allow-from, re-runs update or keep them" {
  narrowing gcp
}

@test "allow_from: lambda ruleset rules follow --allow-from, re-runs update or keep them" {
  # Lambda's account-wide rules (22 from everyone by default) apply beside the VM's ruleset:
  # SSH stays reachable, and the driver says which rule keeps it open.
  narrowing lambda 22
}

@test "allow_from: lambda names the account-wide rule that keeps SSH open" {
  provision_to_ports lambda af-lamssh --allow-from 10.0.0.0/8 --allow-from-ssh
  [[ "$output" == *"account-wide firewall rules"*"open tcp 22 to sources outside allow_from"* ]]
  [ "$(reachable lambda af-lamssh)" = 22 ]
  run "$GPUPROV" down af-lamssh
  [ "$status" -eq 0 ]
  expect_nothing_left lambda
}

@test "allow_from: nebius security rules follow --allow-from, re-runs update or keep them" {
  narrowing nebius
}
