#!/usr/bin/env bats
# gpuprov on Google Compute Engine, through the emulator (tests/emulators/gce_api.cc) with the
# service-account key it issues (OAuth2: a signed JWT exchanged for a token).
# - docker backend: a real test VM; a gpuprov killed while creating it, the re-run that finds
#   it by name under API throttling, SSH as the user of the ssh-keys metadata, list, down.
# - memory backend: the faults that end before SSH (capacity in every zone, quota, a key the
#   emulator did not issue, an instance vanishing in every zone, OS Login enforced by
#   organization policy), each with a clear message
#   and nothing left behind (the emulator's /counts).
# Kubernetes is off (--no-k8s) but in the last test: the boot route with direct access, whose VM
# is made by runs killed at each of the cluster's crash points the route reaches (issue 15,
# cluster_crash_chain of crash_points.bash).

load helpers
load crash_points

# start NAME BACKEND: an emulator serving gcp only; its key is written to
# $BATS_FILE_TMPDIR/NAME-key.json (GOOGLE_APPLICATION_CREDENTIALS names a missing file).
start() {
  GOOGLE_APPLICATION_CREDENTIALS="$BATS_FILE_TMPDIR/$1-key.json" \
    start_emulator "$1" --backend "$2" --clouds gcp --boot-seconds 1
}

setup_file() {
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  printf '[defaults.timeouts]\nssh_wait_seconds = 180\n' >"$GPUPROV_HOME/config.toml"
  start docker docker
  start memory memory
}

teardown_file() {
  stop_emulators
}

# use BACKEND: point gpuprov at that emulator (endpoint, key, control URL).
use() {
  use_emulator "$1"
  export GOOGLE_APPLICATION_CREDENTIALS="$BATS_FILE_TMPDIR/$1-key.json"
}

teardown() {
  reset_emulators
  rm -f "$GPUPROV_HOME"/state/*.json
}

@test "gcp: a killed provision is found by name on re-run under throttling; ssh, list and down leave nothing" {
  use docker
  "$GPUPROV" provision --name gce-vm --cloud gcp --gpus L4:1 --no-k8s 3>&- &
  pid=$!
  for _ in $(seq 1 150); do
    [ "$(count gcp instances)" -eq 1 ] && break
    sleep 0.2
  done
  [ "$(count gcp instances)" -eq 1 ]
  stop_child KILL "$pid"
  wait "$pid" || true
  # API rate limits on the re-run: 429 with Retry-After, then 403 rateLimitExceeded (backoff).
  fault '{"cloud":"gcp","fault":"throttle","times":2,"retry_after":1,"path":"/compute/"}'
  fault '{"cloud":"gcp","fault":"throttle","times":2,"status":403,"path":"/compute/"}'
  run "$GPUPROV" provision --name gce-vm --cloud gcp --gpus L4:1 --no-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"reusing existing VM gce-vm"* ]]
  [[ "$output" == *"user ubuntu"* ]]
  [ "$(count gcp instances)" -eq 1 ]
  [ "$(count gcp firewalls)" -eq 1 ]
  curl -fsS "$CONTROL/requests?cloud=gcp" | grep -q '"status":429'
  curl -fsS "$CONTROL/requests?cloud=gcp" | grep -q '"status":403'
  run "$GPUPROV" ssh gce-vm -- 'whoami; nvidia-smi -L'
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"ubuntu"* ]]
  [[ "$output" == *"NVIDIA L4"* ]]
  run "$GPUPROV" list --output json
  echo "$output" | /usr/bin/python3 -c '
import json, sys
vm = [v for v in json.load(sys.stdin) if v["name"] == "gce-vm"][0]
assert vm["cloud"] == "gcp" and vm["state"] == "running", vm
assert vm["address"].startswith("127.90."), vm'
  # Neither the private key nor an access token reaches gpuprov's output or files.
  run "$GPUPROV" -v list
  [[ "$output" != *"PRIVATE KEY"* && "$output" != *"ya29."* ]]
  ! grep -rqE 'PRIVATE KEY|ya29\.' "$GPUPROV_HOME"
  run "$GPUPROV" down gce-vm
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"deleting firewall rule gpuprov-gce-vm"* ]]
  expect_nothing_left gcp
}

@test "gcp: no capacity in any zone of the region: a clear message, no VM, no firewall rule, no state" {
  use memory
  fault '{"cloud":"gcp","fault":"capacity","times":-1}'
  run "$GPUPROV" provision --name gce-cap --cloud gcp --gpus L4:1 --region us-central1 --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"no capacity for g2-standard-4 in us-central1-a, us-central1-b, us-central1-c"* ]]
  [[ "$output" == *"ZONE_RESOURCE_POOL_EXHAUSTED"* ]]
  [ ! -e "$GPUPROV_HOME/state/gce-cap.json" ]
  expect_nothing_left gcp
}

@test "gcp: quota from the insert operation: the metric is named and nothing is left" {
  use memory
  fault '{"cloud":"gcp","fault":"quota"}'
  run "$GPUPROV" provision --name gce-quota --cloud gcp --gpus L4:1 --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"QUOTA_EXCEEDED"* && "$output" == *"NVIDIA_L4_GPUS"* ]]
  [[ "$output" == *"quota"* ]]
  [ ! -e "$GPUPROV_HOME/state/gce-quota.json" ]
  expect_nothing_left gcp
}

@test "gcp: a key the emulator did not issue is refused at the token endpoint before anything is made" {
  use memory
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$BATS_TEST_TMPDIR/other.pem" 2>/dev/null
  /usr/bin/python3 - "$GOOGLE_APPLICATION_CREDENTIALS" "$BATS_TEST_TMPDIR/other.pem" \
    >"$BATS_TEST_TMPDIR/other.json" <<'EOF'
import json, sys
key = json.load(open(sys.argv[1]))
key["private_key"] = open(sys.argv[2]).read()
print(json.dumps(key))
EOF
  GOOGLE_APPLICATION_CREDENTIALS="$BATS_TEST_TMPDIR/other.json" \
    run "$GPUPROV" provision --name gce-auth --cloud gcp --gpus L4:1 --no-k8s
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" == *"Invalid JWT Signature"* ]]
  [[ "$output" == *"GOOGLE_APPLICATION_CREDENTIALS"* ]]
  [[ "$output" != *"PRIVATE KEY"* ]]
  [ ! -e "$GPUPROV_HOME/state/gce-auth.json" ]
  expect_nothing_left gcp
}

# An insert that ends with RESOURCE_NOT_FOUND is the zone out of capacity (SkyPilot's
# _gcp_handler; plugins/gcp/REFERENCE.md §F5): every zone is tried, then a capacity error. This test
# expected "disappeared while it was being created" (a give-up after the first zone) before.
@test "gcp: an instance that vanishes while booting in every zone: each zone tried, capacity, nothing left" {
  use memory
  fault '{"cloud":"gcp","fault":"vanish_during_boot","times":-1}'
  run "$GPUPROV" provision --name gce-gone --cloud gcp --gpus L4:1 --region us-central1 --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"no capacity for g2-standard-4 in us-central1-a, us-central1-b, us-central1-c"* ]]
  [[ "$output" == *"RESOURCE_NOT_FOUND"* ]]
  expect_nothing_left gcp
  run "$GPUPROV" down gce-gone --cloud gcp
  [ "$status" -eq 0 ]
  expect_nothing_left gcp
}

# plugins/gcp/REFERENCE.md §F8: OS Login enforced by organization policy, in the form that refuses
# the insert, is named with what to do; nothing is made.
@test "gcp: OS Login enforced by organization policy: the policy is named, nothing is left" {
  use memory
  curl -fsS -X POST "$CONTROL/settings" -d '{"cloud":"gcp","os_login_policy":"refuse"}' >/dev/null
  run "$GPUPROV" provision --name gce-osl --cloud gcp --gpus L4:1 --no-k8s
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" == *"constraints/compute.requireOsLogin"* ]]
  [[ "$output" == *"exempt the project"* ]]
  [ ! -e "$GPUPROV_HOME/state/gce-osl.json" ]
  expect_nothing_left gcp
}

@test "gcp: Kubernetes by the boot route (user-data metadata), direct access, kubectl works" {
  use docker
  printf '[defaults.timeouts]\nssh_wait_seconds = 180\napi_wait_seconds = 120\n' >"$GPUPROV_HOME/config.toml"
  # The cluster's crash points (issue 15): the VM is made by runs killed after the host key is
  # pinned and after the kubeconfig is written; the run below is their re-run.
  cluster_crash_chain gcp gce-k8s "host-key-pinned kubeconfig-written" --gpus L4:1
  run "$GPUPROV" -v provision --name gce-k8s --cloud gcp --gpus L4:1
  echo "$output"
  [ "$status" -eq 0 ]
  assert_cuda_check
  cluster_crash_converged gcp gce-k8s "$output"
  expect_k8s_by_boot_route "$output"
  expect_address_learned_at_boot gce-k8s "$CHAIN_OUTPUT$output"
  [[ "$output" == *"nvidia.com/gpu: 1"* ]]
  [[ "$CHAIN_OUTPUT$output" != *"private_key"* ]]
  [[ "$CHAIN_OUTPUT$output" != *"PRIVATE KEY"* ]]
  kc="$GPUPROV_HOME/kube/gce-k8s.yaml"
  expect_cluster_ready gce-k8s
  run "$GPUPROV" down gce-k8s
  [ "$status" -eq 0 ]
  [ ! -e "$kc" ]
  expect_nothing_left gcp
  cluster_crash_passed gcp "boot, direct"
}
