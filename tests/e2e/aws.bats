#!/usr/bin/env bats
# gpuprov on AWS through the EC2 emulator: the lifecycle and the retried faults on real test VMs
# (docker backend: SSH reaches the address EC2 reported, user ubuntu, a fake L4), the failing
# faults on the memory backend (fast). Every test asserts through the emulator's /counts that no
# instance, security group or key pair is left. Kubernetes is off (--no-k8s) but in the last test:
# the boot route with direct access, whose VM is made by runs killed at each of the cluster's
# crash points the route reaches (issue 15, cluster_crash_chain of crash_points.bash).

load helpers
load crash_points
bats_require_minimum_version 1.5.0

setup_file() {
  export AWS_ACCESS_KEY_ID="AKIAE2E$$TESTKEY0001"
  export AWS_SECRET_ACCESS_KEY="e2e/$$/secret+access+key"
  unset AWS_SESSION_TOKEN AWS_PROFILE AWS_REGION AWS_DEFAULT_REGION
  export AWS_REGION=us-east-1 # gpuprov picks no default region (issue 17)
  export HOME="$BATS_FILE_TMPDIR/userhome" # no ~/.aws of the machine's user
  mkdir -p "$HOME"
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  printf '[defaults.timeouts]\nssh_wait_seconds = 180\n' >"$GPUPROV_HOME/config.toml"
  start_emulator docker --clouds aws --backend docker
  start_emulator memory --clouds aws --backend memory --boot-seconds 1
}

teardown_file() {
  stop_emulators
}

# use docker|memory: points gpuprov at that emulator.
use() {
  use_emulator "$1"
}

teardown() {
  reset_emulators
  rm -f "$GPUPROV_HOME"/state/*.json
}

@test "aws: provision, ssh as ubuntu, list and down; security group and key pair cleaned up" {
  use docker
  run "$GPUPROV" provision --name aws-vm --cloud aws --gpus L4:1 --no-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"g6.xlarge"* ]]
  [ "$(count aws instances)" -eq 1 ]
  [ "$(count aws firewalls)" -eq 1 ]
  [ "$(count aws ssh_keys)" -eq 1 ]
  run "$GPUPROV" ssh aws-vm -- 'whoami; nvidia-smi -L'
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"ubuntu"* ]]
  [[ "$output" == *"NVIDIA L4"* ]]
  run "$GPUPROV" list --output json
  echo "$output" | /usr/bin/python3 -c '
import json, sys
vm = [v for v in json.load(sys.stdin) if v["name"] == "aws-vm"][0]
assert vm["cloud"] == "aws" and vm["state"] == "running" and vm["region"] == "us-east-1", vm
assert vm["address"].startswith("127.90."), vm'
  # The secret never reaches gpuprov's output or files, even with -v.
  run "$GPUPROV" -v list
  [[ "$output" != *"$AWS_SECRET_ACCESS_KEY"* ]]
  run ! grep -rqF "$AWS_SECRET_ACCESS_KEY" "$GPUPROV_HOME"
  run "$GPUPROV" down aws-vm
  echo "$output"
  [ "$status" -eq 0 ]
  expect_nothing_left aws ssh_keys
}

@test "aws: throttling (503 RequestLimitExceeded) is retried with backoff and the VM comes up once" {
  use docker
  fault '{"cloud":"aws","fault":"throttle","times":4}'
  curl -fsS -X DELETE "$CONTROL/requests?cloud=aws" >/dev/null
  run "$GPUPROV" -v provision --name aws-thr --cloud aws --no-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"RequestLimitExceeded; retrying in"* ]]
  throttled=$(curl -fsS "$CONTROL/requests?cloud=aws" |
    /usr/bin/python3 -c 'import json,sys; print(sum(r["status"] == 503 for r in json.load(sys.stdin)["requests"]))')
  [ "$throttled" -eq 4 ]
  [ "$(count aws instances)" -eq 1 ]
  run "$GPUPROV" down aws-thr
  [ "$status" -eq 0 ]
  expect_nothing_left aws ssh_keys
}

@test "aws: a re-run after gpuprov was killed finds the VM by name" {
  use docker
  "$GPUPROV" provision --name aws-rerun --cloud aws --no-k8s 3>&- &
  pid=$!
  for _ in $(seq 1 100); do
    [ "$(count aws instances)" -eq 1 ] && break
    sleep 0.1
  done
  stop_child KILL "$pid"
  wait "$pid" || true
  run "$GPUPROV" provision --name aws-rerun --cloud aws --no-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"reusing"* ]]
  [ "$(count aws instances)" -eq 1 ]
  [ "$(count aws firewalls)" -eq 1 ]
  [ "$(count aws ssh_keys)" -eq 1 ]
  run "$GPUPROV" down aws-rerun
  [ "$status" -eq 0 ]
  expect_nothing_left aws ssh_keys
}

@test "aws: no capacity is said plainly, nothing is left and no state is kept" {
  use memory
  fault '{"cloud":"aws","fault":"capacity","times":1}'
  run "$GPUPROV" provision --name aws-cap --cloud aws --gpus L4:1 --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"InsufficientInstanceCapacity"* ]]
  [[ "$output" == *"another region"* ]]
  [ ! -e "$GPUPROV_HOME/state/aws-cap.json" ]
  expect_nothing_left aws ssh_keys
}

@test "aws: a vCPU quota of 0 names the quota to raise" {
  use memory
  fault '{"cloud":"aws","fault":"quota","times":1}'
  run "$GPUPROV" provision --name aws-quota --cloud aws --gpus A10G:1 --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"VcpuLimitExceeded"* ]]
  [[ "$output" == *"Service Quotas"* ]]
  [ ! -e "$GPUPROV_HOME/state/aws-quota.json" ]
  expect_nothing_left aws ssh_keys
}

@test "aws: a wrong secret fails with AuthFailure, names where the keys come from, leaks nothing" {
  use memory
  AWS_SECRET_ACCESS_KEY=wrong-secret-e2e run "$GPUPROV" -v provision --name aws-auth --cloud aws --no-k8s
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" == *"AuthFailure"* ]]
  [[ "$output" == *"AWS_ACCESS_KEY_ID"* ]]
  [[ "$output" != *"wrong-secret-e2e"* ]]
  [ ! -e "$GPUPROV_HOME/state/aws-auth.json" ]
  expect_nothing_left aws ssh_keys
}

@test "aws: an instance that vanishes while booting: a clear message, and down leaves nothing" {
  use memory
  fault '{"cloud":"aws","fault":"vanish_during_boot"}'
  run "$GPUPROV" provision --name aws-gone --cloud aws --gpus L4:1 --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"terminated"* ]]
  [[ "$output" == *"Server.InternalError"* ]]
  [[ "$output" == *"gpuprov down aws-gone"* ]]
  run "$GPUPROV" down aws-gone
  echo "$output"
  [ "$status" -eq 0 ]
  expect_nothing_left aws ssh_keys
}

@test "aws: a GPU count AWS does not sell is refused before anything is created" {
  use memory
  run "$GPUPROV" provision --name aws-l4x2 --cloud aws --gpus L4:2 --no-k8s
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"L4:4 (g6.12xlarge)"* ]]
  [ "$(count aws instances)" -eq 0 ]
  [ "$(count aws firewalls)" -eq 0 ]
}

@test "aws: an ECDSA key is refused before anything is created (EC2 imports RSA and ED25519 only)" {
  use memory
  ssh-keygen -q -t ecdsa -N '' -C e2e -f "$BATS_TEST_TMPDIR/ecdsa_key"
  run "$GPUPROV" provision --name aws-ecdsa --cloud aws --gpus L4:1 --no-k8s \
    --ssh-key "$BATS_TEST_TMPDIR/ecdsa_key"
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"RSA and ED25519"* ]]
  [[ "$output" == *"ssh-keygen -t ed25519"* ]]
  [ ! -e "$GPUPROV_HOME/state/aws-ecdsa.json" ]
  [ "$(count aws firewalls)" -eq 0 ]
  [ "$(count aws ssh_keys)" -eq 0 ]
  [ "$(count aws instances)" -eq 0 ]
}

@test "aws: V100 has no default image (the OSS-driver DLAMI does not drive Volta): exit 2" {
  use memory
  run "$GPUPROV" provision --name aws-v100 --cloud aws --gpus V100:1 --no-k8s
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"Volta"* ]]
  [[ "$output" == *"--image"* ]]
  [ "$(count aws instances)" -eq 0 ]
  [ "$(count aws firewalls)" -eq 0 ]
}

@test "aws: an account without a default VPC is said plainly (exit 2); subnet_id in config.toml launches there" {
  use docker
  curl -fsS -X POST "$CONTROL/settings" -d '{"cloud":"aws","default_vpc":false}' >/dev/null
  run "$GPUPROV" provision --name aws-vpc --cloud aws --no-k8s
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"no default VPC in us-east-1"* ]]
  [[ "$output" == *"subnet_id"* ]]
  [ ! -e "$GPUPROV_HOME/state/aws-vpc.json" ]
  [ "$(count aws firewalls)" -eq 0 ]
  # The account's own subnet, as the AWS CLI lists it.
  subnet=$(AWS_PAGER='' /usr/bin/aws --endpoint-url "$GPUPROV_AWS_ENDPOINT" --region us-east-1 \
    ec2 describe-subnets --query 'Subnets[0].SubnetId' --output text)
  echo "subnet: $subnet"
  [[ "$subnet" == subnet-* ]]
  # A setting of [clouds.aws] in config.toml (the driver declares it, so gpuprov accepts it).
  cp "$GPUPROV_HOME/config.toml" "$BATS_TEST_TMPDIR/config.toml.saved"
  printf '[clouds.aws]\nsubnet_id = "%s"\n' "$subnet" >>"$GPUPROV_HOME/config.toml"
  run "$GPUPROV" provision --name aws-vpc --cloud aws --no-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  run "$GPUPROV" ssh aws-vpc -- whoami
  [ "$status" -eq 0 ]
  [[ "$output" == *"ubuntu"* ]]
  run "$GPUPROV" down aws-vpc
  echo "$output"
  cp "$BATS_TEST_TMPDIR/config.toml.saved" "$GPUPROV_HOME/config.toml"
  [ "$status" -eq 0 ]
  expect_nothing_left aws ssh_keys
}

@test "aws: Kubernetes by the boot route (gzipped user data within 16 KB, unpacked by cloud-init), direct access, kubectl works" {
  use docker
  printf '[defaults.timeouts]\nssh_wait_seconds = 180\napi_wait_seconds = 120\n' >"$GPUPROV_HOME/config.toml"
  # The cluster's crash points (issue 15): the VM is made by runs killed after the host key is
  # pinned and after the kubeconfig is written; the run below is their re-run.
  cluster_crash_chain aws aws-k8s "host-key-pinned kubeconfig-written" --gpus L4:1
  run "$GPUPROV" -v provision --name aws-k8s --cloud aws --gpus L4:1
  echo "$output"
  [ "$status" -eq 0 ]
  assert_cuda_check
  cluster_crash_converged aws aws-k8s "$output"
  expect_k8s_by_boot_route "$output"
  expect_address_learned_at_boot aws-k8s "$CHAIN_OUTPUT$output"
  # The plain script (installer in clear), gzipped by the driver: cloud-init on the test VM
  # unpacks it, as it does on EC2.
  size=$(sed -n 's/.*boot script \([0-9]*\) of 16384-byte (gzipped) limit.*/\1/p' <<<"$CHAIN_OUTPUT$output" | head -n 1)
  [ "$size" -gt 0 ] && [ "$size" -le 16384 ]
  [[ "$output" == *"nvidia.com/gpu: 1"* ]]
  [[ "$CHAIN_OUTPUT$output" != *"$AWS_SECRET_ACCESS_KEY"* ]]
  kc="$GPUPROV_HOME/kube/aws-k8s.yaml"
  expect_cluster_ready aws-k8s
  run "$GPUPROV" down aws-k8s
  [ "$status" -eq 0 ]
  [ ! -e "$kc" ]
  expect_nothing_left aws ssh_keys
  cluster_crash_passed aws "boot, direct"
}
