#!/usr/bin/env bats
# gpuprov on Lambda Cloud through the emulator (tests/emulators/lambda_api.cc), with the
# documented pacing enforced (about 1 request/s, launch 1 per 12 s).
# - docker backend: a k3s cluster by the boot route (cloud-init in the test VM runs the
#   installer), direct access, the real kubectl, down; a re-run reuses; a gpuprov killed while
#   creating, re-run, finds the VM by name; the user's own firewall rules survive two
#   overlapping VMs (rulesets, and the account-wide list with firewall = "account").
#   The Kubernetes test also crashes the cluster's points (issue 15, cluster_crash_chain of
#   crash_points.bash): its VM is made by runs killed at each point the route reaches.
# - memory backend: the faults (capacity, 5xx after the launch happened, throttling, a wrong
#   key, an instance vanishing, a GPU Lambda does not have), each with a clear message and
#   nothing left behind: the emulator's counts of instances, keys, rulesets and account rules
#   equal the start.

load helpers
load crash_points
bats_require_minimum_version 1.5.0

setup_file() {
  export LAMBDA_API_KEY="secret_e2e_$$_lambda_api_key"
  export HOME="$BATS_FILE_TMPDIR/userhome" # no ~/.lambda_cloud of the machine's user
  mkdir -p "$HOME"
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  start_emulator docker --clouds lambda --backend docker
  start_emulator memory --clouds lambda --backend memory --boot-seconds 1
}

teardown_file() {
  stop_emulators
}

setup() {
  printf '[defaults.timeouts]\nssh_wait_seconds = 180\napi_wait_seconds = 120\n' >"$GPUPROV_HOME/config.toml"
}

teardown() {
  reset_emulators
  rm -f "$GPUPROV_HOME"/state/*.json
}

# expect_lambda_clean [RULES]: nothing of gpuprov's left: no instance (API or backend), ruleset,
# SSH key, and RULES (default 0) account rules beyond the account's starting list.
expect_lambda_clean() {
  expect_nothing_left lambda ssh_keys rulesets || return 1
  [ "$(count lambda firewall_rules)" -eq "${1:-0}" ]
}

# user_rules: the user's own account-wide rules: SSH, ICMP and a notebook port. The API paces
# requests per key (a 429 without Retry-After), so curl retries.
user_rules() {
  curl -fsS --retry 10 --retry-delay 1 -X PUT -H "Authorization: Bearer $LAMBDA_API_KEY" "$GPUPROV_LAMBDA_ENDPOINT/firewall-rules" -d '{"data":[
    {"protocol":"tcp","port_range":[22,22],"source_network":"0.0.0.0/0","description":"Allow SSH"},
    {"protocol":"icmp","source_network":"0.0.0.0/0","description":"Allow ICMP"},
    {"protocol":"tcp","port_range":[8888,8888],"source_network":"0.0.0.0/0","description":"my notebook"}]}' >/dev/null
}

# quick_ssh_wait: the memory backend's addresses never answer SSH; a provision there ends soon
# after the VM runs.
quick_ssh_wait() {
  printf '[defaults.timeouts]\nssh_wait_seconds = 3\n' >"$GPUPROV_HOME/config.toml"
}

rules_text() {
  curl -fsS --retry 10 --retry-delay 1 -H "Authorization: Bearer $LAMBDA_API_KEY" "$GPUPROV_LAMBDA_ENDPOINT/firewall-rules"
}

@test "lambda: k3s by the boot route, direct access, kubectl works; a re-run reuses; down leaves nothing" {
  use_emulator docker
  # The cluster's crash points (issue 15): the VM is made by runs killed after the host key is
  # pinned, after the SAN re-run (a Lambda VM has no metadata service and, behind NAT, only its
  # private address on the interface: plugins/lambda/REFERENCE.md §6; so gpuprov re-runs the installer with
  # --public-ip) and after the kubeconfig is written; the run below is their re-run.
  cluster_crash_chain lambda lam-k8s "host-key-pinned san-rerun kubeconfig-written" --gpus A10:1
  run "$GPUPROV" -v provision --name lam-k8s --cloud lambda --gpus A10:1
  echo "$output"
  [ "$status" -eq 0 ]
  assert_cuda_check
  cluster_crash_converged lambda lam-k8s "$output"
  expect_k8s_by_boot_route "$output"
  expect_address_rerun lam-k8s "$CHAIN_OUTPUT$output" \
    "no public address on the VM's interfaces (the cloud puts none there: NAT)"
  [[ "$CHAIN_OUTPUT$output" == *"gpu_1x_a10"* ]]
  [[ "$output" == *"nvidia.com/gpu: 1"* ]]
  [[ "$output" != *"$LAMBDA_API_KEY"* ]]
  run ! grep -rqF "$LAMBDA_API_KEY" "$GPUPROV_HOME"
  [ "$(count lambda instances)" -eq 1 ]
  [ "$(count lambda rulesets)" -eq 1 ]
  [ "$(count lambda ssh_keys)" -eq 1 ]
  [ "$(count lambda firewall_rules)" -eq 0 ]
  # The kubeconfig points at the VM's public address (direct mode), and kubectl works.
  grep -q 'server: https://127\.90\.' "$GPUPROV_HOME/kube/lam-k8s.yaml"
  expect_cluster_ready lam-k8s
  run "$GPUPROV" ssh lam-k8s -- 'whoami; nvidia-smi -L'
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"ubuntu"* ]]
  [[ "$output" == *"A10"* ]]
  # A re-run reuses the VM and its ruleset and key.
  run "$GPUPROV" provision --name lam-k8s --cloud lambda --gpus A10:1
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"reusing"* ]]
  [ "$(count lambda instances)" -eq 1 ]
  [ "$(count lambda rulesets)" -eq 1 ]
  [ "$(count lambda ssh_keys)" -eq 1 ]
  run "$GPUPROV" down lam-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  [ ! -e "$GPUPROV_HOME/kube/lam-k8s.yaml" ]
  expect_lambda_clean
  cluster_crash_passed lambda "boot, direct"
}

@test "lambda: a re-run after gpuprov was killed finds the VM by name" {
  use_emulator docker
  "$GPUPROV" provision --name lam-rerun --cloud lambda --gpus A10:1 --no-k8s 3>&- &
  pid=$!
  for _ in $(seq 1 300); do
    [ "$(count lambda instances)" -eq 1 ] && break
    sleep 0.1
  done
  stop_child KILL "$pid"
  wait "$pid" || true
  [ "$(count lambda instances)" -eq 1 ]
  run "$GPUPROV" provision --name lam-rerun --cloud lambda --gpus A10:1 --no-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"reusing"* ]]
  [ "$(count lambda instances)" -eq 1 ]
  [ "$(count lambda rulesets)" -eq 1 ]
  [ "$(count lambda ssh_keys)" -eq 1 ]
  run "$GPUPROV" down lam-rerun
  [ "$status" -eq 0 ]
  expect_lambda_clean
}

@test "lambda: the user's own firewall rules survive two overlapping VMs (rulesets, then account rules)" {
  use_emulator docker
  user_rules
  base=$(count lambda firewall_rules)
  [ "$base" -eq 1 ]
  for mode in ruleset account; do
    printf '[defaults.timeouts]\nssh_wait_seconds = 180\n[clouds.lambda]\nfirewall = "%s"\n' "$mode" \
      >"$GPUPROV_HOME/config.toml"
    run "$GPUPROV" provision --name "lam-fw-a" --cloud lambda --gpus A10:1 --no-k8s
    echo "$output"
    [ "$status" -eq 0 ]
    run "$GPUPROV" provision --name "lam-fw-b" --cloud lambda --gpus A10:1 --no-k8s
    echo "$output"
    [ "$status" -eq 0 ]
    run "$GPUPROV" ssh lam-fw-b -- true
    [ "$status" -eq 0 ]
    rules=$(rules_text)
    [[ "$rules" == *"my notebook"* ]]
    if [ "$mode" = account ]; then
      [[ "$rules" == *'"gpuprov:lam-fw-a,lam-fw-b"'* ]]
    else
      [ "$(count lambda rulesets)" -eq 2 ]
      [ "$(count lambda firewall_rules)" -eq "$base" ]
    fi
    run "$GPUPROV" down lam-fw-a
    [ "$status" -eq 0 ]
    rules=$(rules_text)
    [[ "$rules" == *"my notebook"* ]]
    [[ "$rules" == *"Allow SSH"* ]]
    # b still answers SSH after a's rules went.
    run "$GPUPROV" ssh lam-fw-b -- true
    [ "$status" -eq 0 ]
    run "$GPUPROV" down lam-fw-b
    [ "$status" -eq 0 ]
    rules=$(rules_text)
    [[ "$rules" == *"my notebook"* ]]
    [[ "$rules" != *"gpuprov"* ]]
    expect_lambda_clean "$base"
  done
}

@test "lambda: no capacity is CAPACITY, said plainly, one launch only, nothing left" {
  use_emulator memory
  fault '{"cloud":"lambda","fault":"capacity","times":1}'
  curl -fsS -X DELETE "$CONTROL/requests?cloud=lambda" >/dev/null
  run "$GPUPROV" provision --name lam-cap --cloud lambda --gpus A10:1 --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"instance-operations/launch/insufficient-capacity"* ]]
  [[ "$output" == *"another region"* ]]
  launches=$(curl -fsS "$CONTROL/requests?cloud=lambda" |
    /usr/bin/python3 -c 'import json,sys; print(sum(r["path"].endswith("/launch") for r in json.load(sys.stdin)["requests"]))')
  [ "$launches" -eq 1 ]
  [ ! -e "$GPUPROV_HOME/state/lam-cap.json" ]
  expect_lambda_clean
}

@test "lambda: a 5xx after the launch happened finds the VM by name instead of making a second" {
  use_emulator memory
  quick_ssh_wait
  fault '{"cloud":"lambda","fault":"server_error","status":503,"value":"after_create","method":"POST","path":"/api/v1/instance-operations/launch"}'
  run "$GPUPROV" -v provision --name lam-5xx --cloud lambda --gpus A10:1 --no-k8s
  echo "$output"
  [[ "$output" == *"launched although Lambda's answer failed"* ]]
  [ "$(count lambda instances)" -eq 1 ]
  run "$GPUPROV" down lam-5xx
  echo "$output"
  [ "$status" -eq 0 ]
  expect_lambda_clean
}

@test "lambda: throttling (429 with Retry-After) is retried and the VM comes up once" {
  use_emulator memory
  quick_ssh_wait
  fault '{"cloud":"lambda","fault":"throttle","times":3,"retry_after":1}'
  run "$GPUPROV" -v provision --name lam-thr --cloud lambda --gpus A10:1 --no-k8s
  echo "$output"
  [[ "$output" == *"-> 429"* ]]
  [ "$(count lambda instances)" -eq 1 ]
  [ "$(count lambda rate_limited)" -ge 3 ]
  run "$GPUPROV" down lam-thr
  [ "$status" -eq 0 ]
  expect_lambda_clean
}

@test "lambda: a wrong API key fails with invalid-api-key, names where keys come from, leaks nothing" {
  use_emulator memory
  LAMBDA_API_KEY=secret_wrong_e2e_key run "$GPUPROV" -v provision --name lam-auth --cloud lambda --gpus A10:1 --no-k8s
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" == *"global/invalid-api-key"* ]]
  [[ "$output" == *"LAMBDA_API_KEY"* ]]
  [[ "$output" != *"secret_wrong_e2e_key"* ]]
  [ ! -e "$GPUPROV_HOME/state/lam-auth.json" ]
  expect_lambda_clean
}

@test "lambda: an instance that vanishes while booting: a clear message, and down leaves nothing" {
  use_emulator memory
  quick_ssh_wait
  fault '{"cloud":"lambda","fault":"vanish_during_boot"}'
  run "$GPUPROV" provision --name lam-gone --cloud lambda --gpus A10:1 --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"lam-gone"* ]]
  [[ "$output" == *"gpuprov"* ]]
  run "$GPUPROV" down lam-gone
  echo "$output"
  [ "$status" -eq 0 ]
  expect_lambda_clean
}

@test "lambda: L4 is not a Lambda type: refused before anything is created, naming what Lambda has" {
  use_emulator memory
  run "$GPUPROV" provision --name lam-l4 --cloud lambda --gpus L4:1 --no-k8s
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"Lambda does not offer L4:1"* ]]
  [[ "$output" == *"H100"* ]]
  expect_lambda_clean
}

@test "lambda: an instance quota of 0 says whom to ask, nothing left" {
  use_emulator memory
  fault '{"cloud":"lambda","fault":"quota","times":1}'
  run "$GPUPROV" provision --name lam-quota --cloud lambda --gpus A10:1 --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"global/quota-exceeded"* ]]
  [[ "$output" == *"Lambda support"* ]]
  [ ! -e "$GPUPROV_HOME/state/lam-quota.json" ]
  expect_lambda_clean
}

@test "lambda: an instance Lambda reports unhealthy stops the wait with Lambda's word; down leaves nothing" {
  use_emulator memory
  fault '{"cloud":"lambda","fault":"error_during_boot"}'
  run "$GPUPROV" provision --name lam-sick --cloud lambda --gpus A10:1 --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"state 'error'"* ]]
  [[ "$output" == *"unhealthy"* ]]
  [[ "$output" == *"gpuprov down lam-sick"* ]]
  run "$GPUPROV" down lam-sick
  echo "$output"
  [ "$status" -eq 0 ]
  expect_lambda_clean
}

# lambda_settings JSON_MEMBERS: POST /settings on the current emulator's lambda.
lambda_settings() {
  curl -fsS -X POST "$CONTROL/settings" -d "{\"cloud\":\"lambda\",$1}" >/dev/null
}

@test "lambda: down waits while Lambda still holds the ruleset in use (400 in-use), then leaves nothing" {
  # Lambda's OpenAPI spec v1.8.3, deleteFirewallRuleset: 400 firewall-rulesets/firewall-ruleset-in-use.
  use_emulator memory
  quick_ssh_wait
  run "$GPUPROV" provision --name lam-inuse --cloud lambda --gpus A10:1 --no-k8s
  echo "$output"
  [ "$(count lambda rulesets)" -eq 1 ]
  lambda_settings '"ruleset_release_seconds":4'
  run "$GPUPROV" down lam-inuse
  lambda_settings '"ruleset_release_seconds":0'
  echo "$output"
  [ "$status" -eq 0 ]
  in_use=$(curl -fsS "$CONTROL/requests?cloud=lambda" | /usr/bin/python3 -c 'import json,sys
print(sum(r["method"] == "DELETE" and "/firewall-rulesets/" in r["path"] and r["status"] == 400
          for r in json.load(sys.stdin)["requests"]))')
  [ "$in_use" -ge 1 ]
  expect_lambda_clean
}

@test "lambda: in us-south-1 the account-wide rules open nothing: firewall = account gives the VM a ruleset" {
  # Lambda's OpenAPI spec v1.8.3, firewallRulesList: "Firewall rules do not apply to the us-south-1 region".
  use_emulator memory
  quick_ssh_wait
  printf '[clouds.lambda]\nfirewall = "account"\n' >>"$GPUPROV_HOME/config.toml"
  run "$GPUPROV" provision --name lam-south --cloud lambda --gpus A10:1 --region us-south-1 --no-k8s
  echo "$output"
  [[ "$output" == *"do not apply in us-south-1"* ]]
  [ "$(count lambda rulesets)" -eq 1 ]
  [ "$(count lambda firewall_rules)" -eq 0 ]
  run "$GPUPROV" down lam-south
  echo "$output"
  [ "$status" -eq 0 ]
  expect_lambda_clean
}

@test "lambda: gpuprov processes started together share the API key's pace: no 429" {
  # Lambda's limits count per API key (its OpenAPI spec v1.8.3: about 1 request/s); the
  # emulator enforces them here. Three gpuprov runs at once, four calls each (gc).
  use_emulator memory
  before=$(count lambda rate_limited)
  for i in 1 2 3; do "$GPUPROV" gc --cloud lambda >"$BATS_TEST_TMPDIR/gc$i.out" 2>&1 & done
  wait
  cat "$BATS_TEST_TMPDIR"/gc*.out
  [ "$(count lambda rate_limited)" -eq "$before" ]
  [ -n "$(ls "$GPUPROV_HOME/pacer")" ]
  expect_lambda_clean
}
