#!/usr/bin/env bats
# Ports after create, on every direct-access cloud (aws, gcp, digitalocean, lambda, hyperstack),
# through the emulator
# with the docker backend, whose port gate lets a port answer on a VM's address only while the
# cloud's firewall allows it (tests/emulators/README.md):
# - `provision --no-k8s`, then the same name with Kubernetes on: the first run opens only SSH;
#   create returns the existing VM as it is and the host's open_ports call opens 6443, 80 and 443;
#   the cluster is validated and the real kubectl reaches it.
# - a port the firewall drops although the driver opened it (fault port_blocked): the run fails
#   naming the API port, so a driver that forgets a port cannot pass.

load helpers

setup_file() {
  export DIGITALOCEAN_TOKEN="dop_v1_e2e_$$_ports_token"
  export AWS_ACCESS_KEY_ID="AKIAE2E$$PORTSKEY01"
  export AWS_SECRET_ACCESS_KEY="e2e/$$/ports+secret+key"
  unset AWS_SESSION_TOKEN AWS_PROFILE AWS_REGION AWS_DEFAULT_REGION
  export AWS_REGION=us-east-1 # gpuprov picks no default region (issue 17)
  export HOME="$BATS_FILE_TMPDIR/userhome" # no ~/.aws of the machine's user
  mkdir -p "$HOME"
  export GOOGLE_APPLICATION_CREDENTIALS="$BATS_FILE_TMPDIR/gcp-key.json" # written by the emulator
  export LAMBDA_API_KEY="secret_e2e_$$_ports_lambda_key"
  export HYPERSTACK_API_KEY="hs-e2e-$$-ports-key"
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  printf '[defaults.timeouts]\nssh_wait_seconds = 180\napi_wait_seconds = 120\n' \
    >"$GPUPROV_HOME/config.toml"
  printf '[clouds.hyperstack]\npoll_interval_ms = 500\ndelete_retry_ms = 1000\n' \
    >>"$GPUPROV_HOME/config.toml"
  start_emulator emu --backend docker --clouds aws,gcp,digitalocean,lambda,hyperstack
}

teardown_file() {
  stop_emulators
}

setup() {
  use_emulator emu
}

teardown() {
  reset_emulators
  rm -f "$GPUPROV_HOME"/state/*.json
}

# reachable CLOUD NAME: the TCP ports the cloud's firewall lets this machine reach on VM NAME now
# (the emulator's reachable_ports, e.g. "22,80,443,6443").
reachable() {
  curl -fsS "$CONTROL/instances?cloud=$1" | /usr/bin/python3 -c '
import json, sys
rows = [r for r in json.load(sys.stdin)["instances"] if r["name"] == sys.argv[1]]
print(rows[0]["reachable_ports"] if rows else "<no instance>")' "$2"
}

# opened_ports OUTPUT NAME: whether a provision OUTPUT says it opened 6443 of VM NAME through the
# driver's open_ports (the host's step line: "opening TCP 6443, 80, 443 of NAME" or "opening ports
# 22, 6443, 80 and 443 of NAME (...)").
opened_ports() {
  grep -qE "opening (TCP|ports) .*6443.* of $2( |$)" <<<"$1"
}

# plain_then_cluster CLOUD NAME [FIELD...]: the plain VM, then Kubernetes on the same name; down
# at the end leaves no instance, firewall or other counted FIELD of the cloud. GPUS (e.g. A10:1)
# asks for a GPU on clouds that have no CPU machines (Lambda).
plain_then_cluster() {
  local cloud=$1 name=$2
  shift 2
  local gpu=()
  [ -z "${GPUS:-}" ] || gpu=(--gpus "$GPUS")
  run "$GPUPROV" provision --name "$name" --cloud "$cloud" --no-k8s "${gpu[@]}"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(reachable "$cloud" "$name")" = 22 ]

  run "$GPUPROV" -v provision --name "$name" --cloud "$cloud" "${gpu[@]}"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"reusing existing VM $name"* ]]
  opened_ports "$output" "$name"
  [[ "$output" != *"updating firewall"* ]]
  [ "$(reachable "$cloud" "$name")" = "22,80,443,6443" ]
  expect_cluster_ready "$name"

  # A third run finds everything open: nothing more to open.
  run "$GPUPROV" provision --name "$name" --cloud "$cloud" "${gpu[@]}"
  echo "$output"
  [ "$status" -eq 0 ]
  if opened_ports "$output" "$name"; then return 1; fi

  run "$GPUPROV" down "$name"
  [ "$status" -eq 0 ]
  expect_nothing_left "$cloud" "$@"
}

@test "aws: a plain VM, then Kubernetes on the same name: open_ports widens its security group" {
  plain_then_cluster aws ports-aws
}

@test "gcp: a plain VM, then Kubernetes on the same name: open_ports widens its firewall rule" {
  plain_then_cluster gcp ports-gcp
}

@test "digitalocean: a plain VM, then Kubernetes on the same name: open_ports widens its firewall" {
  plain_then_cluster digitalocean ports-do
}

@test "lambda: a plain VM, then Kubernetes on the same name: open_ports widens its ruleset" {
  GPUS=A10:1 plain_then_cluster lambda ports-lambda rulesets ssh_keys
}

@test "hyperstack: a plain VM, then Kubernetes on the same name: open_ports adds security rules" {
  plain_then_cluster hyperstack ports-hs ssh_keys security_rules environments
}

@test "a firewall that drops the API port although it was opened fails the cluster run by name" {
  fault '{"cloud":"digitalocean","fault":"port_blocked","value":"6443"}'
  run "$GPUPROV" provision --name ports-blocked --cloud digitalocean --no-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  run "$GPUPROV" provision --name ports-blocked --cloud digitalocean
  echo "$output"
  [ "$status" -ne 0 ]
  opened_ports "$output" ports-blocked
  [[ "$output" == *"port 6443 of ports-blocked is not reachable from this machine"* ]]
  [ "$(reachable digitalocean ports-blocked)" = "22,80,443" ]
  run "$GPUPROV" down ports-blocked
  [ "$status" -eq 0 ]
  expect_nothing_left digitalocean
}
