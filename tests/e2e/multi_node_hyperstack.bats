#!/usr/bin/env bats
# Multi-node clusters on Hyperstack (docs/multi-node.md, plugins/hyperstack/README.md "Clusters")
# end to end with the real gpuprov binary and driver against the emulator's docker backend. The
# nodes are VMs of the region's one environment and share its private network (fixed_ip); each
# admits the peer ports from the others' fixed_ip by security rules of its own, which the
# emulator enforces there (a VM admits nothing on its private address that its ingress rules do
# not allow).

load helpers
load multi_node
bats_require_minimum_version 1.5.0

setup_file() {
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  export E2E_NAME="e2e-mnh-$$"
  export HYPERSTACK_API_KEY="hs-e2e-$$-multinode-key"
  export HOME="$BATS_FILE_TMPDIR/userhome"
  mkdir -p "$GPUPROV_HOME" "$HOME"
  remove_vm_containers "$E2E_NAME"
  start_emulator emu --backend docker --clouds hyperstack
}

teardown_file() {
  stop_emulators
  remove_vm_containers "$E2E_NAME"
}

setup() {
  use_emulator emu
  printf '%s\n' '[defaults.timeouts]' 'ssh_wait_seconds = 180' 'boot_install_wait_seconds = 180' \
    'api_wait_seconds = 180' '[clouds.hyperstack]' 'poll_interval_ms = 500' \
    'delete_retry_ms = 1000' >"$GPUPROV_HOME/config.toml"
}

teardown() {
  reset_emulators
}

# peer_rules_of NAME: the security rules of Hyperstack VM NAME from other sources than the
# internet, as the API returns them, one a line, sorted: "udp 51820 10.64.0.3/32".
peer_rules_of() {
  curl -fsS -H "api_key: $HYPERSTACK_API_KEY" \
    "$GPUPROV_HYPERSTACK_ENDPOINT/core/virtual-machines?search=$1&page=1&pageSize=100" |
    /usr/bin/python3 -c "
import json, sys
vm = [v for v in json.load(sys.stdin)['instances'] if v['name'] == '$1'][0]
print('\n'.join(sorted('%s %s %s' % (r['protocol'], r['port_range_min'], r['remote_ip_prefix'])
                       for r in vm['security_rules'] if r['remote_ip_prefix'] != '0.0.0.0/0')))"
}

# expect_peer_rules NAME ADDRESS...: VM NAME admits exactly ADDRESS... on the peer ports.
expect_peer_rules() {
  local name=$1 a expected
  shift
  expected=$(for a in "$@"; do printf 'tcp 10250 %s/32\ntcp 6443 %s/32\nudp 51820 %s/32\n' "$a" "$a" "$a"; done | sort)
  run peer_rules_of "$name"
  echo "$name: $output"
  [ "$status" -eq 0 ] && [ "$output" = "$expected" ]
}

# private_ingress_of NAME: what the emulator enforces on VM NAME's private address (its control
# API's private_ingress), one rule a line: "udp 51820 10.64.0.3/32,...".
private_ingress_of() {
  curl -fsS "$CONTROL/instances?cloud=hyperstack" | /usr/bin/python3 -c "
import json, sys
row = [r for r in json.load(sys.stdin)['instances'] if r['name'] == '$1'][0]
print('\n'.join(sorted('%s %s %s' % (r['protocol'], r['ports'], ','.join(sorted(r['sources'])))
                       for r in row['private_ingress'])))"
}

@test "hyperstack (boot route, direct): --nodes 3 on the environment's private network, peers admitted by per-VM security rules, down leaves nothing" {
  run "$GPUPROV" -v provision --name mh --cloud hyperstack --gpus A100:1 --nodes 3 --no-smoke-test
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"mh: 3 of 3 nodes in the cluster"* ]]
  [[ "$output" != *"::server:"* ]]
  local kc="$GPUPROV_HOME/kube/mh.yaml"
  [ "$(ready_nodes "$kc")" -eq 3 ]
  [ "$(gpu_sum "$kc")" -eq 3 ]
  # One environment (the region's) and one key pair hold the whole cluster.
  [ "$(count hyperstack environments)" -eq 1 ]
  [ "$(count hyperstack ssh_keys)" -eq 1 ]
  local p
  mapfile -t p < <(cluster_json mh "'\\n'.join(n['private_ip'] for n in c['nodes'])")
  echo "private addresses: ${p[*]}"
  [[ "${p[0]}" == 10.* && "${p[1]}" == 10.* && "${p[2]}" == 10.* ]]
  [ "$(cluster_json mh "c['nodes'][1]['role']")" = agent ]
  # Each node's own rules admit the peer ports from the two others' fixed_ip...
  expect_peer_rules mh "${p[1]}" "${p[2]}"
  expect_peer_rules mh-agent-1 "${p[0]}" "${p[2]}"
  expect_peer_rules mh-agent-2 "${p[0]}" "${p[1]}"
  # ... and the emulator enforces exactly those rules on the private network (besides the
  # internet's 22 and 6443 the VM was created with).
  run private_ingress_of mh-agent-1
  echo "$output"
  [[ "$output" == *"udp 51820 ${p[0]}/32"* ]]
  [[ "$output" == *"tcp 10250 ${p[2]}/32"* ]]
  [[ "$output" != *"${p[1]}"* ]]
  # The cloud's rules are what filter between the nodes: an agent reaches the server's API at
  # its private address, not a port the server listens on that no rule admits.
  "$GPUPROV" ssh mh -- "setsid python3 -m http.server 18080 >/dev/null 2>&1 </dev/null &"
  wait_for 10 tcp_connects mh 0 127.0.0.1 18080
  tcp_connects mh 1 "${p[0]}" 6443
  run ! tcp_connects mh 1 "${p[0]}" 18080
  # 10250 is open to nothing but the peers' rules: the server reaches an agent's kubelet there.
  tcp_connects mh 0 "${p[1]}" 10250
  run "$GPUPROV" down mh --yes
  echo "$output"
  [ "$status" -eq 0 ]
  [ ! -e "$GPUPROV_HOME/state/mh-agent-1.json" ]
  expect_nothing_left hyperstack ssh_keys environments security_rules
}

@test "hyperstack: scale 2 to 3 and back to 2; the nodes that stay no longer admit the removed agent" {
  run "$GPUPROV" provision --name ms --cloud hyperstack --gpus A100:1 --nodes 2 --no-smoke-test
  echo "$output"
  [ "$status" -eq 0 ]
  run "$GPUPROV" scale ms --nodes 3
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(ready_nodes "$GPUPROV_HOME/kube/ms.yaml")" -eq 3 ]
  local p
  mapfile -t p < <(cluster_json ms "'\\n'.join(n['private_ip'] for n in c['nodes'])")
  expect_peer_rules ms "${p[1]}" "${p[2]}"
  run "$GPUPROV" scale ms --nodes 2
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(count hyperstack instances)" -eq 2 ]
  expect_peer_rules ms "${p[1]}"
  expect_peer_rules ms-agent-1 "${p[0]}"
  run "$GPUPROV" down ms --yes
  [ "$status" -eq 0 ]
  expect_nothing_left hyperstack ssh_keys environments security_rules
}
