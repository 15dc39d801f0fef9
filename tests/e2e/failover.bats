#!/usr/bin/env bats
# Candidates and failover (issue 19): `provision --cloud a,b,c` (or `any`) asks every candidate
# cloud for offers, prints them cheapest first and creates on the first; a create that fails for
# lack of capacity or quota (or a VM that vanishes while booting for lack of capacity) is cleaned
# up and the next candidate is tried. Against the cloud emulator's memory backend with planted
# faults; its /counts per cloud prove that nothing is left on the failed candidates. The memory
# backend's addresses never answer SSH, so each provision there ends (exit 1) soon after its VM
# runs, with the VM made and the record written; the three-cloud test runs on the docker backend
# (a real test VM) and ends with SSH reachable. Kubernetes is off.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
  export_emulated_cloud_credentials fo
  # Hyperstack has no credentials here: `--cloud any` must skip it and say why.
  unset HYPERSTACK_API_KEY
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  # Every cloud, so that `--cloud any` sends nothing past this machine.
  start_emulator memory --backend memory --boot-seconds 1
  # The three-cloud test's chosen VM is a real test VM (the docker backend), so that run ends
  # as a user's does: SSH reachable, exit 0. Its own GCP key file.
  GOOGLE_APPLICATION_CREDENTIALS="$BATS_FILE_TMPDIR/gcp-docker-key.json" \
    start_emulator docker --backend docker --clouds massedcompute,digitalocean,gcp,aws
}

teardown_file() {
  stop_emulators
}

setup() {
  use_emulator memory
  printf '%s\n' '[defaults.timeouts]' 'ssh_wait_seconds = 2' \
    '[clouds.verda]' 'poll_interval_ms = 200' \
    '[clouds.primeintellect]' 'poll_interval_ms = 200' \
    '[clouds.nebius]' 'poll_interval_ms = 200' >"$GPUPROV_HOME/config.toml"
}

teardown() {
  reset_emulators
  rm -rf "$GPUPROV_HOME"/state
}

# made CLOUD...: "cloud=instances/firewalls/ssh_keys" for each CLOUD, one line.
made() {
  local c out=()
  for c in "$@"; do
    out+=("$c=$(count "$c" instances)/$(count "$c" firewalls)/$(count "$c" ssh_keys)")
  done
  echo "${out[*]}"
}

# record NAME KEY: one field of the state record of VM NAME.
record() {
  /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" \
    "$GPUPROV_HOME/state/$1.json" "$2"
}

@test "three clouds with planted capacity and quota faults: the cheapest working candidate, nothing left on the failed ones" {
  # H100:1 offers: massedcompute $2.39, digitalocean $3.39 (nyc2, tor1), gcp $11.06, aws (no
  # price: last). massedcompute has no capacity, digitalocean no quota in either region.
  use_emulator docker
  export GOOGLE_APPLICATION_CREDENTIALS="$BATS_FILE_TMPDIR/gcp-docker-key.json"
  printf '%s\n' '[defaults.timeouts]' 'ssh_wait_seconds = 180' >"$GPUPROV_HOME/config.toml"
  fault '{"cloud":"massedcompute","fault":"capacity","times":1}'
  fault '{"cloud":"digitalocean","fault":"quota","times":2}'
  run "$GPUPROV" provision --name fo-three --cloud aws,gcp,digitalocean,massedcompute \
    --gpus H100:1 --no-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  # The table, cheapest first, ties in the order given; then the attempts in that order.
  # $/h with where the price comes from; "in stock" where the cloud says (Massed Compute's
  # inventory does; GCE's machine types and AWS's table do not).
  [[ "$output" == *"1  massedcompute  us-central-3  gpu_1x_h100"*"\$2.39/h   live              yes"* ]]
  [[ "$output" == *"4  gcp "*"\$11.06/h  table 2026-12-02  -"* ]]
  [[ "$output" == *"2  digitalocean   nyc2"*"3  digitalocean   tor1"*"4  gcp            us-central1   a3-highgpu-1g"*"\$11.06/h"*"5  aws "* ]]
  [[ "$output" == *"massedcompute us-central-3: no capacity; trying the next candidate"* ]]
  [[ "$output" == *"digitalocean nyc2: quota; trying the next candidate"* ]]
  [[ "$output" == *"digitalocean tor1: quota; trying the next candidate"* ]]
  [[ "$output" == *"running on gcp us-central1; the candidates tried before it and why they failed:"* ]]
  [[ "$output" == *"  digitalocean tor1 gpu-h100x1-80gb \$3.39/h: quota ("* ]]
  [[ "$output" != *"trying aws"* ]]
  [ "$(record fo-three cloud)" = gcp ]
  [ "$(record fo-three price_per_hour)" = 11.06 ]
  [ "$(made massedcompute digitalocean gcp aws)" = "massedcompute=0/0/0 digitalocean=0/0/0 gcp=1/1/0 aws=0/0/0" ]
  # The chosen VM is reachable as a user's would be: its one H100 answers over SSH.
  run "$GPUPROV" ssh fo-three -- nvidia-smi -L
  [ "$status" -eq 0 ]
  [[ "$output" == *"H100"* ]]
  run "$GPUPROV" list --no-refresh
  [[ "$output" == *"fo-three"*"gcp"* ]]
  run "$GPUPROV" down fo-three -y
  [ "$status" -eq 0 ]
  expect_nothing_left gcp
}

@test "a VM that goes to error while booting for lack of capacity is deleted and the next candidate is tried" {
  # The emulated Verda accepts the create, then the instance ends in no_capacity.
  fault '{"cloud":"verda","fault":"error_during_boot","value":"no_capacity","times":1}'
  run "$GPUPROV" provision --name fo-boot --cloud verda,gcp --region FIN-01,us-central1 \
    --gpus H100:1 --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  # Regions a cloud does not serve are shown as skipped.
  [[ "$output" == *"-  gcp    FIN-01"*"skipped: "* ]]
  [[ "$output" == *"verda FIN-01: no capacity while booting; trying the next candidate"* ]]
  [[ "$output" == *"==> creating VM fo-boot on gcp"* ]]
  [ "$(record fo-boot cloud)" = gcp ]
  expect_nothing_left verda
  [ "$(count gcp instances)" -eq 1 ]
}

@test "--max-price skips dearer candidates (and unknown prices); with none left, nothing is made" {
  fault '{"cloud":"massedcompute","fault":"capacity","times":1}'
  run "$GPUPROV" provision --name fo-max --cloud massedcompute,gcp,aws,digitalocean \
    --gpus H100:1 --no-k8s --max-price 3.5
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"gcp            us-central1   a3-highgpu-1g"*"skipped: above --max-price \$3.50/h"* ]]
  [[ "$output" == *"aws "*"skipped: price unknown, so not known to be within --max-price"* ]]
  [ "$(record fo-max cloud)" = digitalocean ]
  [ "$(record fo-max region)" = nyc2 ]
  [ "$(made massedcompute gcp aws)" = "massedcompute=0/0/0 gcp=0/0/0 aws=0/0/0" ]
  [ "$(count digitalocean instances)" -eq 1 ]

  # Every candidate above the maximum: a usage error before anything is made.
  run -2 "$GPUPROV" provision --name fo-none --cloud gcp,digitalocean --gpus H100:1 --no-k8s \
    --max-price 1
  echo "$output"
  [[ "$output" == *"no candidate to try for H100:1 on gcp, digitalocean"* ]]
  [ ! -e "$GPUPROV_HOME/state/fo-none.json" ]
  [ "$(count gcp instances)" -eq 0 ]
  # The same candidates from a spec file's lists.
  printf '%s\n' 'name: fo-spec' 'cloud: [gcp, digitalocean]' 'region: [us-central1, nyc2]' \
    'gpus: H100:1' 'kubernetes: false' >"$BATS_TEST_TMPDIR/spec.yaml"
  run -2 "$GPUPROV" provision -f "$BATS_TEST_TMPDIR/spec.yaml" --max-price 1
  echo "$output"
  grep -Eq '^ +-  gcp +us-central1 .*skipped: above --max-price [$]1\.00/h$' <<<"$output"
  grep -Eq '^ +-  digitalocean +nyc2 .*skipped: above --max-price [$]1\.00/h$' <<<"$output"
  grep -Eq '^ +-  gcp +nyc2 .*skipped: no offer for this request$' <<<"$output"
  [[ "$output" == *"no candidate to try for H100:1 on gcp, digitalocean"* ]]

  # Capacity on the only candidates within the maximum: each cleaned up, every one named.
  fault '{"cloud":"massedcompute","fault":"capacity","times":1}'
  fault '{"cloud":"lambda","fault":"capacity","times":1}'
  run -1 "$GPUPROV" provision --name fo-out --cloud massedcompute,lambda --region us-central-3,us-east-1 \
    --gpus H100:1 --no-k8s --max-price 2.5
  echo "$output"
  [[ "$output" == *"no candidate could be created; tried:"* ]]
  [[ "$output" == *"  massedcompute us-central-3 gpu_1x_h100 \$2.39/h: no capacity ("* ]]
  [[ "$output" == *"  lambda us-east-1 gpu_1x_h100_pcie \$2.49/h: no capacity; no candidate left ("* ]]
  [ ! -e "$GPUPROV_HOME/state/fo-out.json" ]
  [ "$(made massedcompute lambda)" = "massedcompute=0/0/0 lambda=0/0/0" ]
}

@test "--cloud any: every cloud whose credentials work, the others named with the reason" {
  run "$GPUPROV" provision --name fo-any --cloud any --gpus H100:1 --no-k8s --max-price 2.0
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"skipping hyperstack: missing or rejected"* ]]
  [[ "$output" == *"clouds with working credentials: aws, digitalocean, gcp, lambda, massedcompute, nebius, primeintellect, verda"* ]]
  [[ "$output" != *"skipping docker"* ]] # the test cloud is never a candidate
  [[ "$output" == *"1  primeintellect"*"\$1.99/h"* ]]
  [ "$(record fo-any cloud)" = primeintellect ]
  local c
  for c in aws digitalocean gcp lambda massedcompute nebius verda; do
    [ "$(count "$c" instances)" -eq 0 ] || { echo "$c has an instance" >&2; return 1; }
  done
  [ "$(count primeintellect instances)" -eq 1 ]
}

@test "killed after create, the same command resumes with the candidate the record names; list shows \$/h and cost" {
  run env GPUPROV_TEST_CRASH_AT=vm-created "$GPUPROV" provision --name fo-resume --cloud gcp,aws \
    --gpus H100:1 --no-k8s
  echo "$output"
  [ "$status" -eq 137 ]
  [ "$(record fo-resume cloud)" = gcp ]
  [ "$(count gcp instances)" -eq 1 ]
  # gcp is out of capacity now: a run that started over would fail over to aws.
  fault '{"cloud":"gcp","fault":"capacity","times":1}'
  run "$GPUPROV" provision --name fo-resume --cloud gcp,aws --gpus H100:1 --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"resuming with gcp us-central1, the candidate the record of 'fo-resume' names"* ]]
  [[ "$output" == *"reusing existing VM fo-resume"* ]]
  [ "$(made gcp aws)" = "gcp=1/1/0 aws=0/0/0" ]
  # Another cloud list without gcp: refused, the VM stays.
  run -2 "$GPUPROV" provision --name fo-resume --cloud aws,lambda --gpus H100:1 --no-k8s
  [[ "$output" == *"already exists on gcp, which is not among the candidate clouds"* ]]

  run "$GPUPROV" list
  echo "$output"
  [ "$status" -eq 0 ]
  local header row
  header=$(head -1 <<<"$output")
  row=$(grep '^fo-resume ' <<<"$output")
  [[ "$header" == *'$/H'*COST* ]]
  [ "${row:$(awk -v h="$header" 'BEGIN{print index(h, "$/H") - 1}'):6}" = "\$11.06" ]
  [[ "${row:$(awk -v h="$header" 'BEGIN{print index(h, "COST") - 1}')}" == "\$0."* ]]
  "$GPUPROV" list -o json | /usr/bin/python3 -c '
import json, sys
vm = [v for v in json.load(sys.stdin) if v["name"] == "fo-resume"][0]
assert vm["price_per_hour"] == 11.06, vm
# hours since created x $/h, to 1/100 cent
expected = 11.06 * vm["age_seconds"] / 3600
assert vm["cost_so_far"] > 0 and abs(vm["cost_so_far"] - expected) < 11.06 * 2 / 3600, vm'
  run "$GPUPROV" down fo-resume -y
  [ "$status" -eq 0 ]
  expect_nothing_left gcp
}
