#!/usr/bin/env bats
# Spot VMs (issue 34 part 2, docs/driver-protocol.md "Spot VMs"): --spot refused where the driver
# sells none (memory backend, nothing made); on the memory backend for Massed Compute and Prime
# Intellect, a spot VM at the spot price that offers shows, PREEMPTED in list with the cloud's
# reason after POST /preempt, and a re-run of provision replacing it; on Massed Compute (tunnel
# access) a spot k3s node on a real test VM preempted and brought back by `gpuprov watch`,
# kubectl reaching it through `gpuprov tunnel` with the same kubeconfig; and on AWS (direct
# access) a spot k3s node on a real test VM (docker backend) that the emulator preempts (POST
# /preempt, EC2's Server.SpotInstanceTermination): list shows PREEMPTED with the reason, `gpuprov
# watch` brings it back (a new VM of the same name and spec, the same kubeconfig file and context
# with the new address), and kubectl works through that kubeconfig.

load helpers
load spot
bats_require_minimum_version 1.5.0

setup_file() {
  export AWS_ACCESS_KEY_ID="AKIAE2E$$SPOTKEY001"
  export AWS_SECRET_ACCESS_KEY="e2e/$$/spot+secret"
  unset AWS_SESSION_TOKEN AWS_PROFILE AWS_DEFAULT_REGION
  export AWS_REGION=us-east-1
  export LAMBDA_API_KEY="lambda-e2e-$$"
  export MASSED_API_KEY="mc_e2e_$$_spot_key"
  unset MASSED_COMPUTE_API_TOKEN
  export PRIME_API_KEY="pit_e2e_$$_spot_key"
  unset PRIME_TEAM_ID PRIME_API_BASE_URL PRIME_BASE_URL
  export HOME="$BATS_FILE_TMPDIR/userhome"
  mkdir -p "$HOME"
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  printf '[defaults.timeouts]\nssh_wait_seconds = 180\napi_wait_seconds = 120\n' >"$GPUPROV_HOME/config.toml"
  start_emulator memory --clouds aws,lambda,massedcompute,primeintellect --backend memory \
    --boot-seconds 1
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
  # The list of clouds that sell spot grows with the drivers: each named one is on it, lambda not.
  spot_clouds=", $(grep -o 'clouds whose driver makes spot VMs: [a-z, ]*' <<<"$output" | sed 's/.*: //'), "
  for cloud in aws gcp massedcompute primeintellect; do
    [[ "$spot_clouds" == *", $cloud, "* ]]
  done
  [[ "$spot_clouds" != *", lambda, "* ]]
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

# spot_on_memory CLOUD GPUS INSTANCE_TYPE REGION SPOT_PRICE ON_DEMAND_PRICE REASON: the memory
# backend's spot matrix row of one cloud (SSH never answers there: each provision stops after the
# VM is made, which is all this needs).
spot_on_memory() {
  local cloud=$1 gpus=$2 type=$3 region=$4 spot=$5 on_demand=$6 reason=$7 name="$1-spot"
  run --separate-stderr "$GPUPROV" offers --cloud "$cloud" --gpus "$gpus" --spot -o json
  [ "$status" -eq 0 ]
  /usr/bin/python3 -c '
import json, sys
rows = [o for o in json.loads(sys.argv[1])["offers"] if o["region"] == sys.argv[3]]
assert [(o["instance_type"], o["spot_price_per_hour"], o["price_per_hour"]) for o in rows] == [
    (sys.argv[2], float(sys.argv[4]), float(sys.argv[5]))], rows' \
    "$output" "$type" "$region" "$spot" "$on_demand"
  run "$GPUPROV" provision --name "$name" --cloud "$cloud" --gpus "$gpus" --no-k8s --spot
  echo "$output"
  [[ "$output" == *"offer: $type in $region at \$$spot/h spot (on demand \$$on_demand/h)"* ]]
  [ "$(field "$name" spot)" = True ]
  [ "$(count "$cloud" instances)" -eq 1 ]
  local first_id
  first_id=$(field "$name" vm_id)
  curl -fsS -X POST "$CONTROL/preempt" -d "{\"cloud\":\"$cloud\",\"name\":\"gpuprov-$name\"}" >/dev/null
  run "$GPUPROV" list
  echo "$output"
  [[ "$(grep "^$name " <<<"$output")" == *PREEMPTED* ]]
  [[ "$output" == *"$name: preempted by $cloud ($reason)"* ]]
  [ "$(field "$name" state)" = preempted ]
  # The re-run (spot as recorded) deletes it and makes a new one of the same name.
  run "$GPUPROV" provision --name "$name" --cloud "$cloud" --gpus "$gpus" --no-k8s
  echo "$output"
  [[ "$output" == *"VM $name was preempted by $cloud ($reason): replacing it with a new one"* ]]
  [ "$(count "$cloud" instances)" -eq 1 ]
  [ "$(field "$name" vm_id)" != "$first_id" ]
  [ "$(field "$name" spot)" = True ]
  run "$GPUPROV" down "$name" --yes
  [ "$status" -eq 0 ]
  expect_nothing_left "$cloud"
}

# memory_home: a home of this test's own whose config.toml waits 2 s for SSH (the file's home
# keeps its long waits for the test VMs).
memory_home() {
  export GPUPROV_HOME="$BATS_TEST_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  printf '[defaults.timeouts]\nssh_wait_seconds = 2\n[clouds.primeintellect]\npoll_interval_ms = 200\n' \
    >"$GPUPROV_HOME/config.toml"
}

@test "spot: massedcompute (memory): the _spot product at its price, PREEMPTED with the reason, a re-run replaces it" {
  use_emulator memory
  memory_home
  spot_on_memory massedcompute RTX-A6000:1 gpu_1x_a6000 us-central-2 0.39 0.57 \
    "Massed Compute ended the spot instance (status terminated, product gpu_1x_a6000_spot)"
}

@test "spot: primeintellect (memory): the isSpot offer at its price, PREEMPTED with the reason, a re-run replaces it" {
  use_emulator memory
  memory_home
  spot_on_memory primeintellect A100:1 1A100.22V FIN-01 0.52 1.29 \
    "Prime Intellect ended the spot pod (status TERMINATED)"
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
  preempt_and_watch aws-spot aws aws-spot \
    "Server.SpotInstanceTermination: Spot instance termination"
  # The same kubeconfig file and context, now with the new address.
  [ "$(KUBECONFIG="$kc" kubectl config current-context)" = gpuprov-aws-spot ]
  grep -q "server: https://$(field aws-spot address):6443" "$kc"
  expect_cluster_ready aws-spot
  run "$GPUPROV" down aws-spot --yes
  [ "$status" -eq 0 ]
  expect_nothing_left aws ssh_keys
}

@test "spot: massedcompute tunnel access: the spot product preempted, watch brings it back, kubectl works through the tunnel and the same kubeconfig" {
  start_emulator mcdocker --clouds massedcompute --backend docker
  use_emulator mcdocker
  run "$GPUPROV" provision --name mc-spot --cloud massedcompute --gpus RTX-A6000:1 --spot \
    --no-smoke-test
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"offer: gpu_1x_a6000 in us-central-2 at \$0.39/h spot (on demand \$0.57/h)"* ]]
  [ "$(field mc-spot spot)" = True ]
  [ "$(field mc-spot access)" = tunnel ]
  local kc="$GPUPROV_HOME/kube/mc-spot.yaml" server
  server=$(KUBECONFIG=$kc kubectl config view -o jsonpath='{.clusters[0].cluster.server}')
  [[ "$server" == https://127.0.0.1:* ]]
  run nodes_through_tunnel mc-spot
  echo "$output"
  [ "$status" -eq 0 ]
  preempt_and_watch mc-spot massedcompute gpuprov-mc-spot \
    "Massed Compute ended the spot instance (status terminated, product gpu_1x_a6000_spot)"
  # The same kubeconfig file, context and tunnel port; kubectl reaches the new node through it.
  [ "$(KUBECONFIG="$kc" kubectl config current-context)" = gpuprov-mc-spot ]
  [ "$(KUBECONFIG=$kc kubectl config view -o jsonpath='{.clusters[0].cluster.server}')" = "$server" ]
  run nodes_through_tunnel mc-spot
  echo "$output"
  [ "$status" -eq 0 ]
  run "$GPUPROV" down mc-spot --yes
  [ "$status" -eq 0 ]
  expect_nothing_left massedcompute ssh_keys
}
