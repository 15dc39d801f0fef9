#!/usr/bin/env bats
# gpuprov on Verda Cloud through the emulator (tests/emulators/verda_api.cc).
# - docker backend: the installer travels as a startup script object that the emulated cloud
#   runs at first boot as root (a systemd unit, not cloud-init); the probe decides from the
#   installer's marker and the script's own trace, never from `cloud-init status`; tunnel access
#   (no firewall API): kubectl through `gpuprov tunnel`; down removes the VM, its script and key.
#   The Kubernetes test also crashes the cluster's points (issue 15, cluster_crash_chain of
#   crash_points.bash): its VM is made by runs killed at each point the route reaches.
#   Each decision row on this route: installed at boot, still running, failed (its k3s start
#   killed), died (the boot installer killed), never ran (a reused VM made without the
#   script; a script that fails before its first line), a GPU that appeared later; both
#   boot-script forms (plain, compressed).
# - memory backend: the faults (capacity, no_capacity after the create, 429/503 bursts, an
#   expired token, wrong credentials, a GPU Verda does not rent, tags beyond Verda's limits)
#   and a killed run re-run, each with nothing left: the emulator's counts of instances,
#   scripts, keys, trashed or detached volumes and deprecated calls back at zero.

load helpers
load crash_points
bats_require_minimum_version 1.5.0

setup_file() {
  export VERDA_CLIENT_ID="gpuprov-e2e-$$"
  export VERDA_CLIENT_SECRET="secret_e2e_$$_verda_client"
  export HOME="$BATS_FILE_TMPDIR/userhome" # no ~/.verda of the machine's user
  mkdir -p "$HOME"
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  start_emulator docker --clouds verda --backend docker
  start_emulator memory --clouds verda --backend memory --boot-seconds 1
}

teardown_file() {
  stop_emulators
}

setup() {
  settings 120
}

teardown() {
  end_docker_test
}

# settings BOOT_INSTALL_WAIT [VERDA_LINES...]: config.toml with compressed timeouts and the
# driver's polls shortened; extra lines go into [clouds.verda].
settings() {
  local wait=$1
  shift
  {
    printf '[defaults.timeouts]\nssh_wait_seconds = 180\nboot_install_wait_seconds = %s\napi_wait_seconds = 120\n' "$wait"
    printf '[clouds.verda]\npoll_interval_ms = 500\n'
    printf '%s\n' "$@"
  } >"$GPUPROV_HOME/config.toml"
}

# quick_ssh_wait: the memory backend's addresses never answer SSH; a provision there ends soon
# after the VM runs.
quick_ssh_wait() {
  printf '[defaults.timeouts]\nssh_wait_seconds = 3\n[clouds.verda]\npoll_interval_ms = 200\n' >"$GPUPROV_HOME/config.toml"
}

expect_verda_clean() {
  expect_nothing_left verda ssh_keys scripts volumes_in_trash detached_volumes deprecated_calls
}

# script_of NAME: the startup script text the emulated cloud holds for instance NAME.
script_of() {
  curl -fsS "$CONTROL/instances?cloud=verda" | /usr/bin/python3 -c "
import json, sys
print([i for i in json.load(sys.stdin)['instances'] if i['name'] == '$1'][0]['startup_script'])"
}

# requests_matching TEXT: how many requests the emulator logged whose "METHOD path -> status"
# contains TEXT.
requests_matching() {
  curl -fsS "$CONTROL/requests?cloud=verda" | /usr/bin/python3 -c "
import json, sys
print(sum('$1' in '%s %s -> %s' % (r['method'], r['path'], r['status']) for r in json.load(sys.stdin)['requests']))"
}

container_of() {
  docker ps -q --filter "label=io.gpuprov.emulator.name=$1"
}

@test "verda: the startup script installs k3s at boot, tunnel access, kubectl through gpuprov tunnel; a re-run reuses; down removes VM, script and key" {
  use_emulator docker
  # The cluster's crash points (issue 15): the VM is made by runs killed after the host key is
  # pinned and after the kubeconfig is written; the run below is their re-run.
  cluster_crash_chain verda vd-k8s "host-key-pinned kubeconfig-written" --gpus H100:1
  run "$GPUPROV" -v provision --name vd-k8s --cloud verda --gpus H100:1
  echo "$output"
  [ "$status" -eq 0 ]
  assert_cuda_check
  cluster_crash_converged verda vd-k8s "$output"
  [[ "$output" == *"cluster plan: route boot, access tunnel"* ]]
  [[ "$output" == *"probe: check-api: installed, k3s running"* ]]
  [ "$(round_trips "$CHAIN_OUTPUT$output" "push installer")" -eq 0 ]
  [[ "$CHAIN_OUTPUT$output" == *"1H100.80S.30V"* ]]
  [[ "$output" == *"nvidia.com/gpu: 1"* ]]
  [[ "$output" == *"gpuprov tunnel vd-k8s"* ]]
  [[ "$CHAIN_OUTPUT$output" != *"$VERDA_CLIENT_SECRET"* ]]
  run ! grep -rqF "$VERDA_CLIENT_SECRET" "$GPUPROV_HOME"
  [ "$(field vd-k8s route)" = boot ]
  [ "$(field vd-k8s access)" = tunnel ]
  [ "$(count verda instances)" -eq 1 ]
  [ "$(count verda scripts)" -eq 1 ]
  [ "$(count verda ssh_keys)" -eq 1 ]
  # The installer went as the plain, traced boot script, and the cloud's runner (not cloud-init)
  # ran it: its trace says it ended with 0, its output is in the emulator's startup-script log.
  script=$(script_of vd-k8s)
  [[ "$script" == "#!/bin/bash"* ]]
  [[ "$script" == *"GPUPROV_INSTALLER_EOF"* ]]
  [[ "$script" == *"boot-script.status"* ]]
  [[ "$script" != *"base64 -d <<'GPUPROV_INSTALLER_EOF'"* ]]
  run "$GPUPROV" ssh vd-k8s -- 'whoami; cat /var/lib/gpuprov/boot-script.status; tail -n 3 /var/log/verda-startup-script.log'
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"root"* ]]
  [[ "$output" == *"exit 0"* ]]
  # The kubeconfig points at the local end of `gpuprov tunnel`; kubectl works through it.
  local kc="$GPUPROV_HOME/kube/vd-k8s.yaml" port
  [ "$(file_mode "$kc")" = 600 ]
  [ "$(KUBECONFIG=$kc kubectl config view -o jsonpath='{.clusters[0].cluster.server}')" = "https://127.0.0.1:16443" ]
  port=$(free_port)
  start_tunnel vd-k8s "$port"
  run env KUBECONFIG="$kc" kubectl --server "https://127.0.0.1:$port" get nodes
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *" Ready "* ]]
  run env KUBECONFIG="$kc" kubectl --server "https://127.0.0.1:$port" apply -f "$REPO_ROOT/examples/gpu-test.yaml"
  [ "$status" -eq 0 ]
  run env KUBECONFIG="$kc" kubectl --server "https://127.0.0.1:$port" wait --for=condition=complete job/gpu-test --timeout=60s
  [ "$status" -eq 0 ]
  run env KUBECONFIG="$kc" kubectl --server "https://127.0.0.1:$port" logs job/gpu-test
  echo "$output"
  [[ "$output" == *"Test PASSED"* ]]
  stop_child INT "$TUNNEL_PID"
  wait "$TUNNEL_PID" || true
  TUNNEL_PID=
  # A re-run reuses the VM, its script and key, probes once and goes to the API check.
  run "$GPUPROV" -v provision --name vd-k8s --cloud verda --gpus H100:1
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"reusing existing VM vd-k8s"* ]]
  [ "$(round_trips "$output" probe)" -eq 1 ]
  [[ "$output" == *"probe: check-api: installed, k3s running"* ]]
  [ "$(count verda instances)" -eq 1 ]
  [ "$(count verda scripts)" -eq 1 ]
  [ "$(count verda ssh_keys)" -eq 1 ]
  run "$GPUPROV" down vd-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  [ ! -e "$kc" ]
  expect_verda_clean
  cluster_crash_passed verda "boot, tunnel"
}

# Verda has no firewall API and the emulator's docker backend
# forwards every port the node listens on, as the real cloud is believed to; the installer's
# node firewall must close 6443 at the public address while the tunnel still reaches it.
@test "verda: the API port is not reachable at the public address, only through the tunnel (node firewall)" {
  use_emulator docker
  run "$GPUPROV" provision --name vd-fw --cloud verda --gpus H100:1
  echo "$output"
  [ "$status" -eq 0 ]
  # gpuprov's own validation said so (the firewall branch's check), and this machine agrees.
  [[ "$output" == *"the API is closed at"* ]]
  [[ "$(field vd-fw probe.api_at_public_address)" == closed* ]]
  local ip
  ip=$(field vd-fw address)
  run ! api_ping "$ip"
  run timeout 5 bash -c "exec 3<>/dev/tcp/$ip/22"
  [ "$status" -eq 0 ]
  run nodes_through_tunnel vd-fw
  [ "$status" -eq 0 ]
  run "$GPUPROV" down vd-fw
  [ "$status" -eq 0 ]
  expect_verda_clean
}

# boot_install_interrupted NAME PATTERN: provisions NAME with Kubernetes while k3s starts slowly,
# waits until the probe has seen the boot install running (still-running row: it waits), then
# heals the k3s fault and SIGKILLs the node's processes matching PATTERN. The provision goes on;
# its -v output is in $output, its exit status in $rc.
boot_install_interrupted() {
  local name=$1 pattern=$2 pid _
  # k3s starts slowly enough (40 s) for the probe, a round trip every few seconds even on a
  # loaded machine, to see the k3s-start step running; the wait below allows for a slow boot.
  fault '{"cloud":"verda","fault":"k3s_faults","value":"slow-start 40"}'
  "$GPUPROV" -v provision --name "$name" --cloud verda >"$BATS_TEST_TMPDIR/out" 2>&1 3>&- &
  pid=$!
  for _ in $(seq 1 900); do
    grep -q "probe: wait: the boot install is running (k3s-start)" "$BATS_TEST_TMPDIR/out" && break
    sleep 0.2
  done
  grep -q "probe: wait: the boot install is running (k3s-start)" "$BATS_TEST_TMPDIR/out"
  docker exec "$(container_of "$name")" sh -c "rm -f /etc/gpuprov-testvm/k3s-faults; pkill -KILL -f '$pattern'"
  rc=0
  wait "$pid" || rc=$?
  output=$(cat "$BATS_TEST_TMPDIR/out")
  echo "$output"
}

@test "verda decision: a boot install still running is waited for; failed, it is pushed over SSH (compressed form)" {
  use_emulator docker
  # 24000 bytes: the plain installer does not fit, the compressed form does.
  settings 120 'startup_script_limit = 24000'
  # `systemctl start k3s` dies under the installer: it fails its k3s-start step and says so in
  # its marker; the trace records the script's exit status. ([s]: the pattern does not match
  # the shell that runs pkill.)
  boot_install_interrupted vd-fail '[s]ystemctl start k3s'
  [ "$rc" -eq 0 ]
  [[ "$output" == *"boot script "*" of 24000-byte limit"* ]]
  [[ "$(script_of vd-fail)" == *"base64 -d <<'GPUPROV_INSTALLER_EOF'"* ]]
  [[ "$output" == *"probe: push-installer: the boot install failed at step k3s-start: systemctl start k3s did not succeed"* ]]
  [ "$(round_trips "$output" "push installer")" -eq 1 ]
  [[ "$output" != *"cloud-init"* ]]
  [ "$(field vd-fail route)" = ssh ]
  [ "$(field vd-fail probe.pushed_over_ssh)" = yes ]
  run "$GPUPROV" ssh vd-fail -- cat /var/lib/gpuprov/boot-script.status
  [[ "$output" == *"exit 1"* ]]
  "$GPUPROV" down vd-fail
  expect_verda_clean
}

@test "verda decision: a boot install that died (marker still running, lock free) is pushed over SSH" {
  use_emulator docker
  # The installer itself is killed (as on a reboot): its marker still says running.
  boot_install_interrupted vd-died '[g]puprov-install.sh'
  [ "$rc" -eq 0 ]
  [[ "$output" == *"the boot install stopped in step k3s-start: installing over SSH"* ]]
  [ "$(round_trips "$output" "push installer")" -eq 1 ]
  run "$GPUPROV" ssh vd-died -- cat /var/lib/gpuprov/boot-script.status
  [[ "$output" == *"exit 137"* ]]
  "$GPUPROV" down vd-died
  expect_verda_clean
}

@test "verda decision: a reused VM whose startup script never ran the installer gets it over SSH" {
  use_emulator docker
  settings 8
  run "$GPUPROV" provision --name vd-nr --cloud verda --no-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(count verda scripts)" -eq 0 ]
  run "$GPUPROV" -v provision --name vd-nr --cloud verda
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"reusing existing VM vd-nr"* ]]
  [[ "$output" == *"the boot install never ran (no trace of the startup script"* ]]
  [ "$(round_trips "$output" "push installer")" -eq 1 ]
  [ "$(count verda scripts)" -eq 0 ]
  "$GPUPROV" down vd-nr
  expect_verda_clean
}

@test "verda decision: a startup script that fails before its first line reads as never ran and is pushed" {
  use_emulator docker
  settings 8
  # The emulated cloud runs the script with "exit 1" put right after its #! line.
  fault '{"cloud":"verda","fault":"boot_script_fails"}'
  run "$GPUPROV" -v provision --name vd-sf --cloud verda
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"the boot install never ran (no trace of the startup script"*"failed before its first line)"* ]]
  [ "$(round_trips "$output" "push installer")" -eq 1 ]
  run "$GPUPROV" ssh vd-sf -- cat /var/log/verda-startup-script.log
  [[ "$output" == *"injected boot script failure"* ]]
  "$GPUPROV" down vd-sf
  expect_verda_clean
}

@test "verda decision: a GPU the boot run did not see is added over SSH" {
  use_emulator docker
  # The GPU appears once the boot install has passed its GPU check, while k3s is still starting.
  fault '{"cloud":"verda","fault":"gpu_after_boot","seconds":3}'
  fault '{"cloud":"verda","fault":"k3s_faults","value":"slow-start 6"}'
  run "$GPUPROV" -v provision --name vd-gpu --cloud verda --gpus H100:1
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"appeared that the last install did not see"* ]]
  [ "$(round_trips "$output" "push installer")" -eq 1 ]
  [[ "$output" == *"nvidia.com/gpu: 1"* ]]
  "$GPUPROV" down vd-gpu
  expect_verda_clean
}

@test "verda: a killed run, re-run, finds the VM by name; down then leaves nothing" {
  use_emulator memory
  quick_ssh_wait
  "$GPUPROV" provision --name vd-kill --cloud verda --gpus H100:1 3>&- >/dev/null 2>&1 &
  local pid=$! _
  for _ in $(seq 1 300); do
    [ "$(count verda instances)" -eq 1 ] && break
    sleep 0.1
  done
  stop_child KILL "$pid"
  wait "$pid" || true
  [ "$(count verda instances)" -eq 1 ]
  [ "$(count verda scripts)" -eq 1 ]
  run "$GPUPROV" provision --name vd-kill --cloud verda --gpus H100:1
  echo "$output"
  [[ "$output" == *"reusing"* ]]
  [ "$(count verda instances)" -eq 1 ]
  [ "$(count verda scripts)" -eq 1 ]
  [ "$(count verda ssh_keys)" -eq 1 ]
  run "$GPUPROV" down vd-kill
  echo "$output"
  [ "$status" -eq 0 ]
  expect_verda_clean
}

@test "verda: no capacity (503 service_unavailable) is CAPACITY, one create only, nothing left" {
  use_emulator memory
  fault '{"cloud":"verda","fault":"capacity","times":1}'
  curl -fsS -X DELETE "$CONTROL/requests?cloud=verda" >/dev/null
  run "$GPUPROV" provision --name vd-cap --cloud verda --gpus H100:1
  echo "$output"
  [ "$status" -eq 1 ]
  # V-SPEC POST /v1/instances: no capacity is 503 {"code":"service_unavailable"}.
  [[ "$output" == *"service_unavailable"* ]]
  [[ "$output" == *"another location"* ]]
  [ "$(requests_matching 'POST /v1/instances ->')" -eq 1 ]
  [ ! -e "$GPUPROV_HOME/state/vd-cap.json" ]
  expect_verda_clean
}

@test "verda: an accepted create that ends in no_capacity is deleted, CAPACITY, nothing left" {
  use_emulator memory
  curl -fsS -X POST "$CONTROL/settings" -d '{"cloud":"verda","ordered_seconds":3}' >/dev/null
  fault '{"cloud":"verda","fault":"error_during_boot","value":"no_capacity"}'
  run "$GPUPROV" provision --name vd-nocap --cloud verda --gpus H100:1
  echo "$output"
  curl -fsS -X POST "$CONTROL/settings" -d '{"cloud":"verda","ordered_seconds":0.5}' >/dev/null
  [ "$status" -eq 1 ]
  [[ "$output" == *"no_capacity"* ]]
  [ ! -e "$GPUPROV_HOME/state/vd-nocap.json" ]
  expect_verda_clean
}

@test "verda: 429 and 503 bursts are retried and the VM is made once" {
  use_emulator memory
  quick_ssh_wait
  fault '{"cloud":"verda","fault":"throttle","times":2,"retry_after":1}'
  # A 503 burst on the create itself: before each new try the driver looks for the hostname.
  fault '{"cloud":"verda","fault":"server_error","status":503,"times":2,"method":"POST","path":"/v1/instances"}'
  curl -fsS -X DELETE "$CONTROL/requests?cloud=verda" >/dev/null
  run "$GPUPROV" -v provision --name vd-thr --cloud verda --gpus H100:1 --no-k8s
  echo "$output"
  [ "$(requests_matching '-> 429')" -eq 2 ]
  [ "$(requests_matching 'POST /v1/instances -> 503')" -eq 2 ]
  [ "$(requests_matching 'POST /v1/instances -> 202')" -eq 1 ]
  [ "$(count verda instances)" -eq 1 ]
  run "$GPUPROV" down vd-thr
  [ "$status" -eq 0 ]
  expect_verda_clean
}

@test "verda: an expired access token is renewed once and the run goes on" {
  use_emulator memory
  quick_ssh_wait
  fault '{"cloud":"verda","fault":"auth_failure","times":1,"method":"POST","path":"/v1/instances"}'
  curl -fsS -X DELETE "$CONTROL/requests?cloud=verda" >/dev/null
  run "$GPUPROV" -v provision --name vd-tok --cloud verda --gpus H100:1 --no-k8s
  echo "$output"
  [ "$(requests_matching 'POST /v1/instances -> 401')" -eq 1 ]
  [ "$(requests_matching 'POST /v1/oauth2/token')" -eq 2 ]
  [ "$(count verda instances)" -eq 1 ]
  [[ "$output" != *"$VERDA_CLIENT_SECRET"* ]]
  run "$GPUPROV" down vd-tok
  [ "$status" -eq 0 ]
  expect_verda_clean
}

@test "verda: wrong client credentials fail naming where they came from, leak nothing" {
  use_emulator memory
  VERDA_CLIENT_SECRET=secret_wrong_e2e run "$GPUPROV" -v provision --name vd-auth --cloud verda --gpus H100:1
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" == *"Invalid client id or client secret"* ]]
  [[ "$output" == *"VERDA_CLIENT_ID"* ]]
  [[ "$output" != *"secret_wrong_e2e"* ]]
  [ ! -e "$GPUPROV_HOME/state/vd-auth.json" ]
  expect_verda_clean
}

@test "verda: L4 is not a Verda GPU: refused before anything is created, naming what Verda has" {
  use_emulator memory
  run "$GPUPROV" provision --name vd-l4 --cloud verda --gpus L4:1
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"Verda does not offer L4:1"* ]]
  [[ "$output" == *"H100"* ]]
  expect_verda_clean
}

@test "verda: more tags than Verda takes, or a value over 127 characters, is refused (exit 2) naming the tag, nothing made" {
  use_emulator memory
  curl -fsS -X DELETE "$CONTROL/requests?cloud=verda" >/dev/null
  # V-SPEC DeployInstancePublicDto.tags: at most 10 per instance (gpuprov uses 2), TagDto value
  # up to 127 characters.
  local tags=() i
  for i in 1 2 3 4 5 6 7 8 9; do tags+=(--tag "t$i=v"); done
  run "$GPUPROV" provision --name vd-tags --cloud verda --gpus H100:1 "${tags[@]}"
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"10 tags"* ]]
  run "$GPUPROV" provision --name vd-tags --cloud verda --gpus H100:1 --tag "note=$(printf 'x%.0s' $(seq 1 128))"
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"tag note"* ]]
  # Nothing made: no key, script or instance (only the token was asked for).
  [ "$(requests_matching 'POST /v1/ssh-keys')" -eq 0 ]
  [ "$(requests_matching 'POST /v1/scripts')" -eq 0 ]
  [ "$(requests_matching 'POST /v1/instances')" -eq 0 ]
  [ ! -e "$GPUPROV_HOME/state/vd-tags.json" ]
  expect_verda_clean
}

@test "verda: a GPU count only the live type list has (B300:8) is offered and provisioned; A6000 gets an image its type supports" {
  use_emulator memory
  quick_ssh_wait
  # V-SPEC GET /v1/instance-types is the list of types (gpuprov's table lacks 8B300.640S.176V),
  # and InstanceType.supported_os the images a type boots (A6000: the older ones only).
  run "$GPUPROV" provision --name vd-b300 --cloud verda --gpus B300:8 --no-k8s
  echo "$output"
  [[ "$output" == *"8B300.640S.176V"* ]]
  [ "$(count verda instances)" -eq 1 ]
  run "$GPUPROV" down vd-b300
  [ "$status" -eq 0 ]
  run "$GPUPROV" -v provision --name vd-a6000 --cloud verda --gpus A6000:1 --no-k8s
  echo "$output"
  [ "$(count verda instances)" -eq 1 ]
  [[ "$output" == *"using ubuntu-22.04-cuda-12.0-docker"* ]]
  run "$GPUPROV" down vd-a6000
  [ "$status" -eq 0 ]
  expect_verda_clean
}
