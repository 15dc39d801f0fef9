#!/usr/bin/env bats
# Spot VMs (issue 34 part 2, docs/driver-protocol.md "Spot VMs"): --spot refused where the driver
# sells none (memory backend, nothing made), and on AWS (direct access) a spot k3s node on a
# real test VM (docker backend) that the emulator preempts (POST /preempt, EC2's
# Server.SpotInstanceTermination): list shows PREEMPTED with the reason, `gpuprov watch` brings it
# back (a new VM of the same name and spec, the same kubeconfig file and context with the new
# address), and kubectl works through that kubeconfig.

load helpers
load spot
bats_require_minimum_version 1.5.0

setup_file() {
  export AWS_ACCESS_KEY_ID="AKIAE2E$$SPOTKEY001"
  export AWS_SECRET_ACCESS_KEY="e2e/$$/spot+secret"
  unset AWS_SESSION_TOKEN AWS_PROFILE AWS_DEFAULT_REGION
  export AWS_REGION=us-east-1
  export LAMBDA_API_KEY="lambda-e2e-$$"
  export HOME="$BATS_FILE_TMPDIR/userhome"
  mkdir -p "$HOME"
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  printf '[defaults.timeouts]\nssh_wait_seconds = 180\napi_wait_seconds = 120\n' >"$GPUPROV_HOME/config.toml"
  start_emulator memory --clouds aws,lambda --backend memory --boot-seconds 1
}

teardown_file() {
  stop_emulators
}

teardown() {
  [ -z "${WATCH_PID:-}" ] || stop_child INT "$WATCH_PID" gpuprov || true
  reset_emulators
  rm -f "$GPUPROV_HOME"/state/*.json
}

@test "spot: --spot on a cloud whose driver sells none is refused with exit 2 naming those that do; nothing made" {
  use_emulator memory
  run "$GPUPROV" provision --name nospot --cloud lambda --gpus A10:1 --no-k8s --spot
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"the lambda driver does not make spot VMs (--spot from the command line)"* ]]
  [[ "$output" == *"clouds whose driver makes spot VMs: aws, gcp"* ]]
  [ "$(count lambda instances)" -eq 0 ]
  [ ! -e "$GPUPROV_HOME/state/nospot.json" ]
  # The spec's and config.toml's spot say the same, naming where it came from.
  printf 'spot: true\n' >"$BATS_TEST_TMPDIR/spec.yaml"
  run "$GPUPROV" provision --name nospot --cloud lambda --no-k8s -f "$BATS_TEST_TMPDIR/spec.yaml"
  [ "$status" -eq 2 ]
  [[ "$output" == *"(spot from "*"spec.yaml)"* ]]
  run "$GPUPROV" drivers
  [[ "$output" == *"aws"*"spot"* ]]
}

@test "spot: aws direct access: preempted, PREEMPTED in list, watch brings it back, kubectl works through the rewritten kubeconfig" {
  start_emulator docker --clouds aws --backend docker
  use_emulator docker
  run "$GPUPROV" provision --name aws-spot --cloud aws --gpus L4:1 --spot --no-smoke-test
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"offer: g6.xlarge in us-east-1 at "*"/h spot (on demand "* ]]
  [ "$(field aws-spot spot)" = True ]
  kc="$GPUPROV_HOME/kube/aws-spot.yaml"
  expect_cluster_ready aws-spot
  first_id=$(field aws-spot vm_id)
  first_ip=$(field aws-spot address)

  preempt aws aws-spot
  run "$GPUPROV" list
  echo "$output"
  [[ "$output" == *"PREEMPTED"* ]]
  [[ "$output" == *"aws-spot: preempted by aws (Server.SpotInstanceTermination: Spot instance termination)"* ]]

  watch_brings_back aws aws-spot Server.SpotInstanceTermination

  [ "$(field aws-spot vm_id)" != "$first_id" ]
  [ "$(field aws-spot address)" != "$first_ip" ]
  [ "$(field aws-spot spot)" = True ]
  [ "$(field aws-spot phase)" = ready ]
  [ "$(count aws instances)" -eq 1 ]
  # The same kubeconfig file and context, now with the new address.
  [ "$(KUBECONFIG="$kc" kubectl config current-context)" = gpuprov-aws-spot ]
  grep -q "server: https://$(field aws-spot address):6443" "$kc"
  expect_cluster_ready aws-spot
  run "$GPUPROV" down aws-spot --yes
  [ "$status" -eq 0 ]
  expect_nothing_left aws ssh_keys
}
