#!/usr/bin/env bats
# Kubernetes on emulated clouds with real test VMs (docs/design.md §3): DigitalOcean runs the
# installer from the boot script (cloud-init) and opens ports (direct mode); Prime Intellect has
# neither (SSH route, tunnel mode). The k3s simulator in the test image is the cluster; the real
# kubectl on this machine is its client. Each decision-table row of the probe is forced here.

load helpers

setup_file() {
  start_docker_clouds cluster digitalocean,primeintellect
}

teardown_file() {
  stop_emulators
}

setup() {
  use_emulator emu
  timeouts 120 60
}

teardown() {
  end_docker_test
}

kubeconfig_of() { echo "$GPUPROV_HOME/kube/$1.yaml"; }

# heal NAME: removes the k3s simulator's fault file on the VM (over gpuprov ssh).
heal() {
  run "$GPUPROV" ssh "$1" -- rm -f /etc/gpuprov-testvm/k3s-faults
  [ "$status" -eq 0 ]
}

@test "boot route, direct mode: cloud-init installed k3s at boot, one probe, kubeconfig works with kubectl" {
  run "$GPUPROV" -v provision --name kb --cloud digitalocean --gpus H100:1
  echo "$output"
  [ "$status" -eq 0 ]
  assert_cuda_check
  # The boot install (maybe still running at the first probe) finished: nothing was pushed.
  [[ "$output" == *"probe: check-api: installed, k3s running"* ]]
  [ "$(round_trips "$output" "push installer")" -eq 0 ]
  expect_address_learned_at_boot kb "$output"
  [[ "$output" == *"nvidia.com/gpu: 1, CUDA check passed (boot route, direct access; create "*" s, ssh "*", install "*", validate "*" s, access "*" s, cuda "*" s)"* ]]
  [[ "$output" == *"exposed to the internet"* ]]
  [[ "$output" == *"--no-k8s"* ]]
  # No credential in any log line, -v included.
  [[ "$output" != *"$DIGITALOCEAN_TOKEN"* ]]
  [[ "$output" != *"PRIVATE KEY"* ]]
  [[ "$output" != *"client-key-data"* ]]
  # The state files hold no key either (the kubeconfig alone carries the client key, 0600).
  ! grep -rq "PRIVATE KEY" "$GPUPROV_HOME/state"
  ! grep -rq "client-key-data" "$GPUPROV_HOME/state"
  # The installer ran under cloud-init.
  run "$GPUPROV" ssh kb -- grep -c gpuprov-install /var/log/cloud-init-output.log
  [ "$status" -eq 0 ]
  [ "$output" -gt 0 ]
  [ "$(field kb route)" = boot ]
  [ "$(field kb access)" = direct ]
  # The installer writes its marker from cloud-init's last stage, so the probe (cloud-init's
  # status read first, the marker last) can see the install ended while cloud-init still runs.
  [[ "$(field kb probe.cloud_init)" =~ ^(done|running)$ ]]
  [ "$(field kb probe.k3s_unit)" = active ]
  field kb phase_seconds.install
  # The kubeconfig: 0600, renamed, pointing at the public address, TLS verified.
  local kc ip
  kc=$(kubeconfig_of kb)
  [ "$(file_mode "$kc")" = 600 ]
  [ "$(file_mode "$GPUPROV_HOME/kube")" = 700 ]
  ip=$(field kb address)
  [ "$(KUBECONFIG=$kc kubectl config current-context)" = gpuprov-kb ]
  [ "$(KUBECONFIG=$kc kubectl config view -o jsonpath='{.clusters[0].cluster.server}')" = "https://$ip:6443" ]
  ! grep -q insecure-skip-tls-verify "$kc"
  run env KUBECONFIG="$kc" kubectl get nodes
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *" Ready "* ]]
  run env KUBECONFIG="$kc" kubectl apply -f "$REPO_ROOT/examples/gpu-test.yaml"
  [ "$status" -eq 0 ]
  run env KUBECONFIG="$kc" kubectl wait --for=condition=complete job/gpu-test --timeout=60s
  echo "$output"
  [ "$status" -eq 0 ]
  run env KUBECONFIG="$kc" kubectl logs job/gpu-test
  echo "$output"
  [[ "$output" == *"Test PASSED"* ]]
  # Decision row "installed at boot, k3s running": a re-run reuses the VM, probes exactly once
  # (one SSH round trip) and goes straight to the API check.
  run "$GPUPROV" -v provision --name kb --cloud digitalocean --gpus H100:1
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"reusing existing VM kb"* ]]
  [ "$(round_trips "$output" probe)" -eq 1 ]
  [[ "$output" == *"node round trip 1: probe"* ]]
  [[ "$output" == *"probe: check-api: installed, k3s running"* ]]
  [ "$(round_trips "$output" "push installer")" -eq 0 ]
  run "$GPUPROV" down kb
  [ "$status" -eq 0 ]
  [ ! -e "$kc" ]
  expect_nothing_left digitalocean
}

@test "SSH route, tunnel mode: the installer is pushed over SSH; kubectl works through gpuprov tunnel" {
  run "$GPUPROV" -v provision --name kt --cloud primeintellect --gpus H100:1
  echo "$output"
  [ "$status" -eq 0 ]
  assert_cuda_check
  [[ "$output" == *"probe: push-installer: not installed yet"* ]]
  [ "$(round_trips "$output" "push installer")" -eq 1 ]
  [[ "$output" == *"gpuprov tunnel kt"* ]]
  [[ "$output" != *"$PRIME_API_KEY"* ]]
  [ "$(field kt route)" = ssh ]
  [ "$(field kt access)" = tunnel ]
  local kc port
  kc=$(kubeconfig_of kt)
  [ "$(file_mode "$kc")" = 600 ]
  [ "$(KUBECONFIG=$kc kubectl config view -o jsonpath='{.clusters[0].cluster.server}')" = "https://127.0.0.1:16443" ]
  # A free high port instead of 16443, so the test never collides with a user's own tunnel.
  port=$(free_port)
  start_tunnel kt "$port"
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
  wait "$TUNNEL_PID"
  TUNNEL_PID=
  run "$GPUPROV" down kt
  [ "$status" -eq 0 ]
  expect_nothing_left primeintellect
}

@test "--install-route ssh on a boot-script cloud: no installer in the user data, pushed over SSH, direct access" {
  run "$GPUPROV" -v provision --name ks --cloud digitalocean --gpus H100:1 --install-route ssh
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"cluster plan: route ssh, access direct, boot script 0 of "* ]]
  [[ "$output" == *"probe: push-installer: not installed yet"* ]]
  [ "$(round_trips "$output" "push installer")" -eq 1 ]
  [[ "$output" == *"nvidia.com/gpu: 1, CUDA check passed (ssh route: --install-route ssh; direct access; "* ]]
  [ "$(field ks route)" = ssh ]
  [ "$(field ks route_reason)" = "--install-route ssh" ]
  [ "$(field ks access)" = direct ]
  # cloud-init ran no installer: the droplet's user data was empty.
  run "$GPUPROV" ssh ks -- grep -c gpuprov-install /var/log/cloud-init-output.log
  [ "$output" = 0 ]
  run env KUBECONFIG="$(kubeconfig_of ks)" kubectl get nodes
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *" Ready "* ]]
  "$GPUPROV" down ks
  expect_nothing_left digitalocean
}

@test "--install-route boot on a cloud without boot scripts is refused before anything is made" {
  run "$GPUPROV" provision --name kn --cloud primeintellect --gpus H100:1 --install-route boot
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"error: --install-route boot on primeintellect: the driver declares no boot script"* ]]
  [[ "$output" == *"nothing was created"* ]]
  [ ! -e "$GPUPROV_HOME/state/kn.json" ]
  expect_nothing_left primeintellect
  run "$GPUPROV" provision --name kn --cloud primeintellect --install-route cloud-init
  [ "$status" -eq 2 ]
  [[ "$output" == *"--install-route: 'cloud-init' is not a route"* ]]
  run "$GPUPROV" provision --name kn --cloud digitalocean --no-k8s --install-route ssh
  [ "$status" -eq 2 ]
  [[ "$output" == *"a plain VM installs nothing"* ]]
  # Kubernetes off by the spec file (not --no-k8s): the route would install nothing either.
  printf 'name: kn\ncloud: digitalocean\nkubernetes: false\n' >"$BATS_TEST_TMPDIR/plain.yaml"
  run "$GPUPROV" provision -f "$BATS_TEST_TMPDIR/plain.yaml" --install-route ssh
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"error: --install-route ssh: Kubernetes is off for this VM (Kubernetes off (from "*"plain.yaml"* ]]
  [[ "$output" == *"add --k8s to install it, or drop --install-route; nothing was created"* ]]
  expect_nothing_left digitalocean
}

@test "decision: a boot install still running is waited for, not pushed; a dropped SSH connection is re-made" {
  fault '{"cloud":"digitalocean","fault":"k3s_faults","value":"slow-start 10"}'
  "$GPUPROV" -v provision --name kw --cloud digitalocean >"$BATS_TEST_TMPDIR/out" 2>&1 3>&- &
  local pid=$! _
  # While gpuprov waits for the boot install, cut its SSH connection on the node.
  # (up to 2 minutes: on a loaded machine SSH alone can take half a minute to come up)
  for _ in $(seq 1 600); do
    grep -q "waiting for the boot install" "$BATS_TEST_TMPDIR/out" && break
    sleep 0.2
  done
  grep -q "waiting for the boot install" "$BATS_TEST_TMPDIR/out"
  docker exec "$(docker ps -q --filter label=io.gpuprov.emulator.name=kw)" pkill -f 'sshd: root@'
  local rc=0
  wait "$pid" || rc=$?
  output=$(cat "$BATS_TEST_TMPDIR/out")
  echo "$output"
  [ "$rc" -eq 0 ]
  [[ "$output" == *"dropped"*"reconnecting"* ]]
  [[ "$output" == *"probe: wait: the boot install is running"* ]]
  [[ "$output" == *"waiting for the boot install"* ]]
  [[ "$output" == *"probe: check-api: installed, k3s running"* ]]
  [ "$(round_trips "$output" "push installer")" -eq 0 ]
  "$GPUPROV" down kw
  expect_nothing_left digitalocean
}

@test "decision: a boot install still running after the limit is pushed over SSH" {
  timeouts 4 60
  fault '{"cloud":"digitalocean","fault":"k3s_faults","value":"slow-start 15"}'
  run "$GPUPROV" -v provision --name kl --cloud digitalocean
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"still running after 4s: installing over SSH"* ]]
  [ "$(round_trips "$output" "push installer")" -eq 1 ]
  "$GPUPROV" down kl
  expect_nothing_left digitalocean
}

@test "decision: a failed boot script is followed by the installer over SSH" {
  fault '{"cloud":"digitalocean","fault":"boot_script_fails"}'
  run "$GPUPROV" -v provision --name kf --cloud digitalocean
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"the boot script failed (cloud-init error"* ]]
  [ "$(round_trips "$output" "push installer")" -eq 1 ]
  [ "$(field kf probe.pushed_over_ssh)" = yes ]
  "$GPUPROV" down kf
  expect_nothing_left digitalocean
}

@test "decision: a reused VM whose boot never ran the installer gets it over SSH" {
  run "$GPUPROV" provision --name kr --cloud digitalocean --no-k8s
  [ "$status" -eq 0 ]
  run "$GPUPROV" -v provision --name kr --cloud digitalocean
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"reusing existing VM kr"* ]]
  [[ "$output" == *"the boot install never ran"* ]]
  [ "$(round_trips "$output" "push installer")" -eq 1 ]
  "$GPUPROV" down kr
  expect_nothing_left digitalocean
}

@test "decision: a GPU the boot run did not see is added over SSH" {
  # The GPU appears 3 s after boot, while the boot install (without it) is still starting k3s.
  fault '{"cloud":"digitalocean","fault":"gpu_after_boot","seconds":3}'
  fault '{"cloud":"digitalocean","fault":"k3s_faults","value":"slow-start 6"}'
  run "$GPUPROV" -v provision --name kg --cloud digitalocean --gpus H100:1
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"appeared that the last install did not see"* ]]
  [ "$(round_trips "$output" "push installer")" -eq 1 ]
  [[ "$output" == *"nvidia.com/gpu: 1"* ]]
  "$GPUPROV" down kg
  expect_nothing_left digitalocean
}

@test "SAN fallback: without the metadata service the installer is re-run once with the public IP" {
  fault '{"cloud":"digitalocean","fault":"no_metadata"}'
  run "$GPUPROV" -v provision --name ks --cloud digitalocean
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"the API certificate does not cover"* ]]
  [ "$(round_trips "$output" "re-run installer with the public IP")" -eq 1 ]
  [ "$(field ks probe.san_rerun)" = yes ]
  expect_address_rerun ks "$output" "the digitalocean metadata service did not give the installer the address"
  expect_cluster_ready ks
  "$GPUPROV" down ks
  expect_nothing_left digitalocean
}

@test "a blocked API port is reported as a firewall problem; the VM is kept, no kubeconfig" {
  fault '{"cloud":"digitalocean","fault":"port_blocked","value":"6443"}'
  run "$GPUPROV" provision --name kp --cloud digitalocean
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"port 6443 of kp is not reachable from this machine"* ]]
  [[ "$output" == *"firewall"* ]]
  [ ! -e "$(kubeconfig_of kp)" ]
  [ "$(field kp phase)" = failed ]
  [ "$(count digitalocean instances)" -eq 1 ]
  run "$GPUPROV" down kp
  [ "$status" -eq 0 ]
  expect_nothing_left digitalocean
}

# node_fault_evidence NAME CLOUD: what the node and the emulator hold, printed when a fault
# armed for the node did not show (bats prints it with the failure).
node_fault_evidence() {
  echo "--- the node's fault file and k3s"
  "$GPUPROV" ssh "$1" -- 'ls -la --time-style=full-iso /etc/gpuprov-testvm; cat /etc/gpuprov-testvm/k3s-faults; systemctl show -p ActiveEnterTimestamp k3s; hostname' || true
  echo "--- faults still armed"
  curl -fsS "$CONTROL/faults" || true
  echo "--- the cloud's requests"
  curl -fsS "$CONTROL/requests?cloud=$2" | head -c 4000 || true
  echo "--- containers"
  docker ps -a --format '{{.Names}} {{.Status}} {{.Labels}}' | grep -F "$1" || true
}

# check_fails_then_heals CLOUD NAME K3S_FAULT EXPECTED_MESSAGE [GPU]: provision fails naming the
# check, keeps the VM, then succeeds after the fault is removed on the node.
check_fails_then_heals() {
  local cloud=$1 name=$2 k3s_fault=$3 message=$4 gpus=("${@:5}")
  timeouts 60 8
  fault "{\"cloud\":\"$cloud\",\"fault\":\"k3s_faults\",\"value\":\"$k3s_fault\"}"
  run "$GPUPROV" provision --name "$name" --cloud "$cloud" "${gpus[@]}"
  echo "$output"
  [ "$status" -eq 1 ] || node_fault_evidence "$name" "$cloud"
  [ "$status" -eq 1 ]
  [[ "$output" == *"cluster check failed on $name"* ]]
  [[ "$output" == *"$message"* ]]
  [[ "$output" == *"gpuprov ssh $name"* ]]
  [[ "$output" == *"/var/log/cloud-init-output.log"* ]]
  [ ! -e "$(kubeconfig_of "$name")" ]
  [ "$(field "$name" phase)" = failed ]
  [ "$(count "$cloud" instances)" -eq 1 ]
  heal "$name"
  timeouts 60 60
  run "$GPUPROV" provision --name "$name" --cloud "$cloud" "${gpus[@]}"
  echo "$output"
  [ "$status" -eq 0 ]
  [ -e "$(kubeconfig_of "$name")" ]
  "$GPUPROV" down "$name"
  expect_nothing_left "$cloud"
}

@test "a node that never becomes Ready fails naming the check; a re-run succeeds once healed" {
  check_fails_then_heals digitalocean kn node-not-ready "is not Ready"
}

@test "CoreDNS not ready fails naming the check; a re-run succeeds once healed" {
  check_fails_then_heals primeintellect kc coredns-not-ready "CoreDNS is not ready" --gpus H100:1
}

@test "a GPU whose device plugin never registers fails naming nvidia.com/gpu; a re-run succeeds once healed" {
  check_fails_then_heals digitalocean ku no-gpu-allocatable "nvidia.com/gpu is not allocatable" --gpus H100:1
}

# ---- GPU driver (issue 32, F2, F4): the test VM's fake GPU state (tests/fixtures/testvm/README.md,
# gpu-state) leaves a GPU on the fake PCI bus with nvidia-smi failing (driver=absent), or makes an
# NVSwitch machine with or without fabric manager.

# provision_with_state CLOUD NAME GPUS STATE: `run` provision of a VM that starts with that fake
# GPU state (gpu-state lines, JSON-escaped), its output echoed.
provision_with_state() {
  fault "{\"cloud\":\"$1\",\"fault\":\"gpu_state\",\"value\":\"$4\"}"
  run "$GPUPROV" -v provision --name "$2" --cloud "$1" --gpus "$3"
  echo "$output"
}

@test "GPU driver, boot route: a GPU without a driver fails right after the boot install, with the GPU-image hint" {
  timeouts 600 600 # the defaults: a failure must not wait for them
  SECONDS=0
  provision_with_state digitalocean nd H100:1 driver=absent
  local took=$SECONDS
  [ "$status" -ne 0 ]
  [[ "$output" == *"nd: 1 NVIDIA GPU(s) on the PCI bus but no working NVIDIA driver (nvidia-smi: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."* ]]
  [[ "$output" == *"use a GPU image of digitalocean"* ]]
  [[ "$output" == *"plugins/digitalocean/README.md"* ]]
  [[ "$output" == *"--nvidia-driver install"* ]]
  # Decided from the boot install's marker: nothing pushed, no validation wait.
  [ "$(round_trips "$output" "push installer")" -eq 0 ]
  [[ "$output" != *"validating"* ]]
  echo "took ${took}s" >&3
  ((took < 180))
  # The node's marker says what the installer saw.
  run "$GPUPROV" ssh nd -- sudo cat /var/lib/gpuprov/install-status.json
  [[ "$output" == *'"failed_step": "gpu-detect"'* ]]
  [[ "$output" == *'"pci_nvidia": 1'* ]]
  "$GPUPROV" down nd
  expect_nothing_left digitalocean
}

@test "GPU driver, SSH route: a GPU without a driver fails at the first probe, before the installer is pushed" {
  provision_with_state primeintellect ns H100:1 driver=absent
  [ "$status" -ne 0 ]
  [[ "$output" == *"ns: 1 NVIDIA GPU(s) on the PCI bus but no working NVIDIA driver"* ]]
  [[ "$output" == *"use a GPU image of primeintellect"* ]]
  [ "$(round_trips "$output" "push installer")" -eq 0 ]
  "$GPUPROV" down ns
  expect_nothing_left primeintellect
}

@test "GPU driver: a GPU whose driver loads after the install: validation re-probes and re-runs the installer" {
  # The VM starts without a GPU (the emulator would add it only after 10 minutes); the test makes
  # it appear once the install is done and gpuprov validates.
  fault '{"cloud":"digitalocean","fault":"gpu_after_boot","seconds":600}'
  "$GPUPROV" -v provision --name nl --cloud digitalocean --gpus H100:1 >"$BATS_TEST_TMPDIR/out" 2>&1 3>&- &
  local pid=$! _
  for _ in $(seq 1 900); do
    grep -q "probe: check-api" "$BATS_TEST_TMPDIR/out" && break
    sleep 0.2
  done
  docker exec "$(docker ps -q --filter label=io.gpuprov.emulator.name=nl)" \
    sh -c 'echo H100:1 >/etc/gpuprov-testvm/gpu'
  SECONDS=0
  local rc=0
  wait "$pid" || rc=$?
  local took=$SECONDS
  cat "$BATS_TEST_TMPDIR/out"
  [ "$rc" -eq 0 ]
  grep -q "appeared that the install did not see: running the installer again" "$BATS_TEST_TMPDIR/out"
  grep -q "nvidia.com/gpu: 1" "$BATS_TEST_TMPDIR/out"
  echo "validated ${took}s after the GPU appeared" >&3
  ((took < 180))
  "$GPUPROV" down nl
  expect_nothing_left digitalocean
}

@test "GPU driver, --nvidia-driver install: the installer adds the driver, gpuprov reboots the VM once, then configures the GPU" {
  fault '{"cloud":"digitalocean","fault":"gpu_state","value":"driver=absent"}'
  run "$GPUPROV" -v provision --name ni --cloud digitalocean --gpus H100:1 --nvidia-driver install
  echo "$output"
  [ "$status" -eq 0 ]
  grep -q "the NVIDIA driver the installer added loads after a reboot: rebooting ni" <<<"$output"
  grep -q "ni is back after its reboot" <<<"$output"
  grep -q "appeared that the last install did not see" <<<"$output"
  grep -q "nvidia.com/gpu: 1" <<<"$output"
  assert_cuda_check
  # The emulator booted the same container again (docker_backend.cc): one VM, still running.
  [ "$(docker ps -aq --filter label=io.gpuprov.emulator.name=ni | wc -l)" -eq 1 ]
  curl -fsS "$CONTROL/instances?cloud=digitalocean" | grep -Eq '"state": ?"running"'
  run "$GPUPROV" ssh ni -- sudo cat /var/lib/gpuprov/install-status.json
  [[ "$output" == *'"reboot_required": false'* ]]
  [[ "$output" == *'"gpu_configured": true'* ]]
  run "$GPUPROV" ssh ni -- cat /var/log/gpuprov-testvm-apt.log
  [[ "$output" == *"install -y linux-headers-"*" nvidia-driver firmware-misc-nonfree"* ]]
  "$GPUPROV" down ni
  expect_nothing_left digitalocean
}

@test "GPU driver, NVSwitch: a stopped fabric manager is started and shown; a missing one fails naming its package" {
  provision_with_state digitalocean nf H100:1 'nvswitch=1\nfabricmanager=inactive'
  [ "$status" -eq 0 ]
  [[ "$output" == *"NVSwitch machine: nvidia-fabricmanager started"* ]]
  run "$GPUPROV" ssh nf -- systemctl is-active nvidia-fabricmanager
  [ "$output" = active ]
  "$GPUPROV" down nf
  provision_with_state digitalocean nf H100:1 nvswitch=1
  [ "$status" -ne 0 ]
  [[ "$output" == *"failed step: fabric-manager"*"install nvidia-fabricmanager-535"* ]]
  "$GPUPROV" down nf
  expect_nothing_left digitalocean
}
