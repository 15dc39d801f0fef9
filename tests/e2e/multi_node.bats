#!/usr/bin/env bats
# Multi-node clusters (`--nodes N`, docs/multi-node.md) end to end with the real gpuprov binary
# and drivers. Bad input is refused with exit 2 before anything is made: no container, no
# record, no cloud call that creates.

load helpers
load multi_node
bats_require_minimum_version 1.5.0

setup_file() {
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  export E2E_NAME="e2e-mn-$$"
  export DIGITALOCEAN_TOKEN="dop_v1_multinode_$$_secret_token"
  export PRIME_API_KEY="pit_multinode_$$_secret_key"
  export AWS_ACCESS_KEY_ID="AKIAE2E$$MULTINODE1"
  export AWS_SECRET_ACCESS_KEY="e2e/$$/multinode+secret"
  unset AWS_SESSION_TOKEN AWS_PROFILE AWS_DEFAULT_REGION
  export AWS_REGION=us-east-1
  export HOME="$BATS_FILE_TMPDIR/userhome" # no ~/.aws of the machine's user
  mkdir -p "$GPUPROV_HOME"
  remove_vm_containers "$E2E_NAME"
  start_emulator emu --backend docker --clouds digitalocean,primeintellect,aws
}

teardown_file() {
  stop_emulators
  remove_vm_containers "$E2E_NAME"
}

setup() {
  use_emulator emu
  printf '[defaults.timeouts]\nssh_wait_seconds = 180\nboot_install_wait_seconds = 180\napi_wait_seconds = 180\n' \
    >"$GPUPROV_HOME/config.toml"
}

teardown() {
  [ -z "${TUNNEL_PID:-}" ] || stop_child TERM "$TUNNEL_PID" || true
  reset_emulators
}

@test "--nodes 0 is refused with exit 2 before anything is made" {
  run "$GPUPROV" provision --name "$E2E_NAME" --cloud docker --nodes 0
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"a cluster has at least one node (--nodes 0 from the command line)"* ]]
  nothing_made "$E2E_NAME"
}

@test "--nodes that is not a whole number is refused with exit 2" {
  for bad in two 1.5 -3 ""; do
    run "$GPUPROV" provision --name "$E2E_NAME" --cloud docker --nodes "$bad"
    echo "$bad: $output"
    [ "$status" -eq 2 ]
  done
  run "$GPUPROV" provision --name "$E2E_NAME" --cloud docker --nodes two
  [[ "$output" == *'--nodes: "two" is not a whole number of nodes'* ]]
  nothing_made "$E2E_NAME"
}

@test "--nodes on the Docker test cloud is refused with exit 2, naming the clouds that can" {
  run "$GPUPROV" provision --name "$E2E_NAME" --cloud docker --nodes 3
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"the docker cloud is a test cloud of single VMs"* ]]
  [[ "$output" == *"nothing was created"* ]]
  nothing_made "$E2E_NAME"
}

@test "nodes: in a spec on the Docker test cloud is refused the same way" {
  printf 'name: %s\ncloud: docker\nnodes: 2\n' "$E2E_NAME" >"$BATS_TEST_TMPDIR/spec.yaml"
  run "$GPUPROV" provision -f "$BATS_TEST_TMPDIR/spec.yaml"
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"nodes: 2 in "*"spec.yaml"* ]]
  nothing_made "$E2E_NAME"
}

@test "--nodes with several candidate clouds is refused with exit 2" {
  run "$GPUPROV" provision --name "$E2E_NAME" --cloud docker,aws --nodes 2
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"share one cloud and region"* ]]
  nothing_made "$E2E_NAME"
}

@test "--nodes 1 on the Docker test cloud is one plain VM, as without --nodes" {
  run "$GPUPROV" provision --name "$E2E_NAME" --cloud docker --nodes 1
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(count_vm_containers "$E2E_NAME")" -eq 1 ]
  ! grep -q '"cluster"' "$GPUPROV_HOME/state/$E2E_NAME.json"
  run "$GPUPROV" down "$E2E_NAME" --yes
  [ "$status" -eq 0 ]
}

@test "digitalocean (boot route, direct): --nodes 3 makes one validated cluster, list, ssh --node, down" {
  run "$GPUPROV" -v provision --name mn --cloud digitalocean --gpus H100:1 --nodes 3 --no-smoke-test
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"mn: 3 of 3 nodes in the cluster"* ]]
  # --no-smoke-test: no CUDA check on any node, and each record says so.
  [[ "$output" != *"running a CUDA program"* ]]
  [[ "$output" != *"CUDA check passed"* ]]
  [ "$(cluster_json mn "c['nodes'][0]['probe']['cuda_check']")" = "skipped (smoke test off)" ]
  [ "$(cluster_json mn "c['nodes'][2]['probe']['cuda_check']")" = "skipped (smoke test off)" ]
  # The token travels only over SSH: never in a log line, a record or the kubeconfig.
  [[ "$output" != *"::server:"* ]]
  ! grep -rq "::server:" "$GPUPROV_HOME/state" "$GPUPROV_HOME/kube"
  local kc="$GPUPROV_HOME/kube/mn.yaml"
  [ "$(KUBECONFIG=$kc kubectl config current-context)" = gpuprov-mn ]
  [ "$(ready_nodes "$kc")" -eq 3 ]
  [ "$(gpu_sum "$kc")" -eq 3 ]
  [ "$(cluster_json mn "len(c['nodes'])")" -eq 3 ]
  [ "$(cluster_json mn "c['nodes'][2]['name']")" = mn-agent-2 ]
  [ "$(cluster_json mn "c['nodes'][1]['role']")" = agent ]
  [ -n "$(cluster_json mn "c['nodes'][1]['private_ip']")" ]
  expect_boot_addresses_kept mn "$output"
  run "$GPUPROV" list --no-refresh
  [[ "$output" == *"cluster mn: 3 of 3 nodes (mn server, mn-agent-1, mn-agent-2)"* ]]
  run "$GPUPROV" ssh mn --node 2 -- hostname
  echo "$output"
  [ "$status" -eq 0 ]
  # A re-run makes nothing new and ends as the first did.
  run "$GPUPROV" provision --name mn --cloud digitalocean --gpus H100:1 --nodes 3 --no-smoke-test
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(count digitalocean instances)" -eq 3 ]
  run "$GPUPROV" down mn --yes
  echo "$output"
  [ "$status" -eq 0 ]
  [ ! -e "$GPUPROV_HOME/state/mn-agent-1.json" ]
  [ ! -e "$GPUPROV_HOME/state/mn-agent-2.json" ]
  expect_nothing_left digitalocean
}

@test "digitalocean: the CUDA check runs on every node at once, each pod bound to its node; a node whose check fails is named (exit 1); every node has its own TTL timer" {
  run "$GPUPROV" provision --name mg --cloud digitalocean --gpus H100:1 --nodes 3 --ttl 2h --idle-ttl 1h
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"mg: 3 of 3 nodes in the cluster"* ]]
  [[ "$output" == *"running a CUDA program on each of 3 nodes at once"* ]]
  # Node by node: each check ran on its own node (the simulator runs a bound pod there).
  local vm k
  for vm in mg mg-agent-1 mg-agent-2; do
    [[ "$output" == *"CUDA check passed on $vm (node "*"): Done"* ]]
  done
  [[ "$output" == *", CUDA check passed ("* ]]
  for k in 0 1 2; do
    [ "$(cluster_json mg "c['nodes'][$k]['probe']['cuda_check']")" = "passed: Done" ]
  done
  no_check_pod_left "$GPUPROV_HOME/kube/mg.yaml"
  # TTL and idle TTL on every node: each node's own timer with the cluster's deadline.
  local deadline=""
  for k in 0 1 2; do
    run "$GPUPROV" ssh mg --node "$k" -- 'systemctl is-active gpuprov-ttl.timer; cat /etc/gpuprov/ttl.conf'
    echo "node $k: $output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"active"* ]]
    [[ "$output" == *"deadline="[0-9]* ]]
    [[ "$output" == *"idle_seconds=3600"* ]]
    local d="${output#*deadline=}"
    d="${d%%[!0-9]*}"
    [ -z "$deadline" ] || [ "$d" = "$deadline" ]
    deadline=$d
  done
  [ -n "$(cluster_json mg "c['nodes'][2]['ttl_deadline']")" ]
  # Idle is judged per node: a GPU pod bound to agent 1 keeps agent 1 busy (its TTL check lists
  # its own node's pods with the kubelet's credentials), not agent 2.
  KUBECONFIG="$GPUPROV_HOME/kube/mg.yaml" kubectl apply -f - <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: gpu-hold, namespace: default}
spec:
  nodeName: mg-agent-1
  containers:
    - name: hold
      image: registry.k8s.io/e2e-test-images/agnhost:2.47
      args: ["pause"]
      resources: {limits: {nvidia.com/gpu: 1}}
EOF
  KUBECONFIG="$GPUPROV_HOME/kube/mg.yaml" kubectl wait --for=condition=Ready pod/gpu-hold --timeout=60s
  expect_ttl_check mg 1 "busy: GPU pod(s) running: default/gpu-hold"
  # The server judges the whole cluster: its control plane stays up under a busy agent.
  expect_ttl_check mg 0 "busy: GPU pod(s) running: default/gpu-hold"
  expect_ttl_check mg 2 "idle for "
  KUBECONFIG="$GPUPROV_HOME/kube/mg.yaml" kubectl delete pod gpu-hold --wait=false
  # An agent that cannot pull the check's image (its kubelet's fault file; a re-run's installer
  # leaves it, as it would not a GPU state it can repair): its check fails, it is named with the
  # cause, the others pass, exit 1; no check pod is left.
  run "$GPUPROV" ssh mg --node 2 -- "echo 'image-unpullable nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda11.7.1-ubuntu20.04' >/etc/gpuprov-testvm/k3s-faults"
  [ "$status" -eq 0 ]
  run "$GPUPROV" provision --name mg --cloud digitalocean --gpus H100:1 --nodes 3
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"mg: 2 of 3 nodes in the cluster"* ]]
  [[ "$output" == *"CUDA check passed on mg (node "* ]]
  [[ "$output" == *"CUDA check passed on mg-agent-1 (node "* ]]
  [[ "$output" == *"mg-agent-2"*"not in the cluster: the CUDA check failed on mg-agent-2: the node could not pull the image"* ]]
  [[ "$output" == *"gpuprov ssh mg-agent-2 -- sudo k3s crictl pull"* ]]
  [[ "$(cluster_json mg "c['nodes'][2]['probe']['cuda_check']")" == "failed: the CUDA check failed on mg-agent-2: the node could not pull the image"* ]]
  no_check_pod_left "$GPUPROV_HOME/kube/mg.yaml"
  run "$GPUPROV" down mg --yes
  [ "$status" -eq 0 ]
  expect_nothing_left digitalocean
}

@test "digitalocean: no capacity for the third node leaves two, says so node by node (exit 1); a re-run makes only the third" {
  fault '{"cloud":"digitalocean","fault":"capacity","body":"mc-agent-2"}'
  run "$GPUPROV" provision --name mc --cloud digitalocean --gpus H100:1 --nodes 3 --no-smoke-test
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"mc: 2 of 3 nodes in the cluster"* ]]
  [[ "$output" == *"mc-agent-2"*"not in the cluster"* ]]
  [ ! -e "$GPUPROV_HOME/state/mc-agent-2.json" ]
  [ "$(count digitalocean instances)" -eq 2 ]
  run "$GPUPROV" provision --name mc --cloud digitalocean --gpus H100:1 --nodes 3 --no-smoke-test
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(count digitalocean instances)" -eq 3 ]
  [ "$(ready_nodes "$GPUPROV_HOME/kube/mc.yaml")" -eq 3 ]
  run "$GPUPROV" down mc --yes
  [ "$status" -eq 0 ]
  expect_nothing_left digitalocean
}

@test "digitalocean: kill -9 at each step of agent creation and join, then the re-run converges and down leaves nothing" {
  local point
  for point in intent-recorded vm-created cluster-vms-made peer-ports-opened agent-prepared agent-joined; do
    GPUPROV_TEST_CRASH_AT=$point run "$GPUPROV" provision --name mk --cloud digitalocean --gpus H100:1 \
      --nodes 3 --no-smoke-test
    echo "$point: $output"
    [ "$status" -eq 137 ]
    run "$GPUPROV" provision --name mk --cloud digitalocean --gpus H100:1 --nodes 3 --no-smoke-test
    echo "$point re-run: $output"
    [ "$status" -eq 0 ]
    [ "$(count digitalocean instances)" -eq 3 ]
    [ "$(ready_nodes "$GPUPROV_HOME/kube/mk.yaml")" -eq 3 ]
    run "$GPUPROV" down mk --yes
    [ "$status" -eq 0 ]
    expect_nothing_left digitalocean
  done
}

@test "digitalocean: scale up to 3 and down to 2 (the newest agent drained, deleted from Kubernetes, then its VM)" {
  run "$GPUPROV" provision --name ms --cloud digitalocean --gpus H100:1 --nodes 2 --no-smoke-test
  echo "$output"
  [ "$status" -eq 0 ]
  run "$GPUPROV" scale ms --nodes 3
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(count digitalocean instances)" -eq 3 ]
  [ "$(ready_nodes "$GPUPROV_HOME/kube/ms.yaml")" -eq 3 ]
  run "$GPUPROV" scale ms --nodes 2
  echo "$output"
  [ "$status" -eq 0 ]
  [ ! -e "$GPUPROV_HOME/state/ms-agent-2.json" ]
  [ "$(count digitalocean instances)" -eq 2 ]
  [ "$(KUBECONFIG=$GPUPROV_HOME/kube/ms.yaml kubectl get nodes --no-headers | wc -l)" -eq 2 ]
  [ "$(cluster_json ms "c['cluster_nodes']")" -eq 2 ]
  run "$GPUPROV" scale ms --nodes 0
  [ "$status" -eq 2 ]
  run "$GPUPROV" down ms --yes
  [ "$status" -eq 0 ]
  expect_nothing_left digitalocean
}

@test "primeintellect (SSH route, tunnel): --nodes 3, peers admitted by the node firewall, one validated cluster" {
  # No private network on Prime Intellect: the nodes join and validate (every node Ready with
  # its GPU, the overlay check) over their public addresses, which the emulator makes reachable
  # between its pods on every port, as the cloud does; each node's firewall admits the others.
  run "$GPUPROV" -v provision --name mp --cloud primeintellect --gpus H100:1 --nodes 3 --no-smoke-test
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"mp: 3 of 3 nodes in the cluster"* ]]
  [[ "$output" != *"::server:"* ]]
  run ! grep -rq "::server:" "$GPUPROV_HOME/state" "$GPUPROV_HOME/kube"
  [ "$(cluster_json mp "len(c['nodes'])")" -eq 3 ]
  [ "$(cluster_json mp "c['access']")" = tunnel ]
  [ -z "$(cluster_json mp "''.join(n['private_ip'] for n in c['nodes'])")" ]
  local a
  mapfile -t a < <(node_addresses mp)
  [[ "${a[0]}" == 127.* && "${a[1]}" == 127.* && "${a[2]}" == 127.* ]]
  # kubectl through gpuprov tunnel: three Ready nodes, one GPU each.
  [ "$(through_tunnel mp ready_nodes)" -eq 3 ]
  [ "$(through_tunnel mp gpu_sum)" -eq 3 ]
  # Each node's firewall admits exactly the two others, on 6443/tcp, 10250/tcp and 51820/udp.
  expect_firewall_peers mp 0 "${a[1]}" "${a[2]}"
  expect_firewall_peers mp 1 "${a[0]}" "${a[2]}"
  expect_firewall_peers mp 2 "${a[0]}" "${a[1]}"
  # The firewall is what filters: an agent reaches the server's API at its public address, not
  # a port the server listens on that the firewall does not admit.
  "$GPUPROV" ssh mp -- "setsid python3 -m http.server 18080 >/dev/null 2>&1 </dev/null &"
  wait_for 10 tcp_connects mp 0 127.0.0.1 18080
  tcp_connects mp 1 "${a[0]}" 6443
  run ! tcp_connects mp 1 "${a[0]}" 18080
  run "$GPUPROV" down mp --yes
  [ "$status" -eq 0 ]
  expect_nothing_left primeintellect
}

@test "primeintellect: scale up to 3 and down to 2; each node's firewall admits exactly the nodes there are" {
  run "$GPUPROV" provision --name mq --cloud primeintellect --gpus H100:1 --nodes 2 --no-smoke-test
  echo "$output"
  [ "$status" -eq 0 ]
  run "$GPUPROV" scale mq --nodes 3
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(count primeintellect instances)" -eq 3 ]
  [ "$(through_tunnel mq ready_nodes)" -eq 3 ]
  local a
  mapfile -t a < <(node_addresses mq)
  expect_firewall_peers mq 0 "${a[1]}" "${a[2]}"
  expect_firewall_peers mq 1 "${a[0]}" "${a[2]}"
  expect_firewall_peers mq 2 "${a[0]}" "${a[1]}"
  run "$GPUPROV" scale mq --nodes 2
  echo "$output"
  [ "$status" -eq 0 ]
  [ ! -e "$GPUPROV_HOME/state/mq-agent-2.json" ]
  [ "$(count primeintellect instances)" -eq 2 ]
  # The nodes that stay, Ready (their firewalls took the new peers by a reload: k3s kept running).
  wait_for 60 test_ready_nodes mq 2
  # The removed agent's address is no longer admitted by the nodes that stay.
  expect_firewall_peers mq 0 "${a[1]}"
  expect_firewall_peers mq 1 "${a[0]}"
  run "$GPUPROV" down mq --yes
  [ "$status" -eq 0 ]
  expect_nothing_left primeintellect
}

@test "aws (boot route, self-referencing security group): --nodes 3 makes one validated cluster" {
  run "$GPUPROV" -v provision --name ma --cloud aws --gpus L4:1 --nodes 3 --no-smoke-test
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"ma: 3 of 3 nodes in the cluster"* ]]
  expect_boot_addresses_kept ma "$output"
  [ "$(ready_nodes "$GPUPROV_HOME/kube/ma.yaml")" -eq 3 ]
  [ "$(gpu_sum "$GPUPROV_HOME/kube/ma.yaml")" -eq 3 ]
  run "$GPUPROV" down ma --yes
  [ "$status" -eq 0 ]
  expect_nothing_left aws
}
