#!/usr/bin/env bats
# A multi-node cluster (`--nodes 3`, docs/multi-node.md) on Nebius through the gRPC emulator
# (tests/emulators/nebius_api.cc) with test VMs (docker backend): the boot route and direct
# access as for one node; every node on the project's subnet (the emulator's private network)
# and in the cluster's security group gpuprov-<cluster>-peers, whose rules on 6443/tcp,
# 10250/tcp and 51820/udp have the group itself as their source. The emulator enforces the
# groups' rules on each node's private address, so the nodes reach each other on the peer
# ports and on nothing else; down leaves nothing.

load helpers
load multi_node
bats_require_minimum_version 1.5.0

setup_file() {
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  export_emulated_cloud_credentials multinodenebius
  remove_vm_containers nn nn-agent-1 nn-agent-2
  start_emulator emu --backend docker --clouds nebius
}

teardown_file() {
  stop_emulators
  remove_vm_containers nn nn-agent-1 nn-agent-2
}

setup() {
  use_emulator emu
  printf '[defaults.timeouts]\nssh_wait_seconds = 180\nboot_install_wait_seconds = 180\napi_wait_seconds = 180\n[clouds.nebius]\npoll_interval_ms = 200\n' \
    >"$GPUPROV_HOME/config.toml"
}

teardown() {
  reset_emulators
}

# private_ingress NAME: the emulator's firewall on VM NAME's private address, one rule a line,
# sorted: "PROTOCOL PORTS SOURCE,SOURCE..." with the sources sorted.
private_ingress() {
  curl -fsS "$CONTROL/instances?cloud=nebius" | /usr/bin/python3 -c "
import json, sys
row = [i for i in json.load(sys.stdin)['instances'] if i['name'] == '$1'][0]
print('\n'.join(sorted(r['protocol'] + ' ' + r['ports'] + ' ' + ','.join(sorted(r['sources']))
                       for r in row['private_ingress'] or [])))"
}

@test "nebius (boot route, direct, self-referencing security group): --nodes 3 makes one validated cluster; the nodes reach each other on the peer ports only; down leaves nothing" {
  run "$GPUPROV" -v provision --name nn --cloud nebius --gpus H100:1 --nodes 3 --no-smoke-test
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"nn: 3 of 3 nodes in the cluster"* ]]
  local kc="$GPUPROV_HOME/kube/nn.yaml"
  [ "$(ready_nodes "$kc")" -eq 3 ]
  [ "$(gpu_sum "$kc")" -eq 3 ]
  [ "$(cluster_json nn "c['nodes'][1]['role']")" = agent ]
  # Each node's private address is its interface's on the project's subnet.
  local ips=() i
  for i in 0 1 2; do
    ips+=("$(cluster_json nn "c['nodes'][$i]['private_ip']")")
    [[ "${ips[$i]}" == 10.* ]]
  done
  # The cloud's rules as the emulator applies them to an agent's private address: what its own
  # group opens to anywhere (the host's open_ports of a direct-access node), and the peer ports
  # from exactly the cluster's three nodes.
  local peers expected
  peers=$(printf '%s\n' "${ips[@]}" | sort | paste -sd,)
  expected=$(printf 'tcp 10250 %s\ntcp 22 0.0.0.0/0\ntcp 443 0.0.0.0/0\ntcp 6443 0.0.0.0/0\ntcp 6443 %s\ntcp 80 0.0.0.0/0\nudp 51820 %s' "$peers" "$peers" "$peers")
  run private_ingress nn-agent-1
  echo "$output"
  [ "$output" = "$expected" ]
  # Only this: agent 2 listens on 18080 too, which agent 1 cannot reach; the kubelet port it can.
  "$GPUPROV" ssh nn --node 2 -- "setsid python3 -m http.server 18080 >/dev/null 2>&1 </dev/null &"
  wait_for 10 tcp_connects nn 2 127.0.0.1 18080
  tcp_connects nn 1 "${ips[2]}" 10250
  run ! tcp_connects nn 1 "${ips[2]}" 18080
  # Nothing new to the internet: an agent's public side is its open_ports, no peer port.
  [ "$(curl -fsS "$CONTROL/instances?cloud=nebius" | /usr/bin/python3 -c "
import json, sys
print([i for i in json.load(sys.stdin)['instances'] if i['name'] == 'nn-agent-1'][0]['reachable_ports'])")" = 22,80,443,6443 ]
  [ "$(count nebius security_groups)" -eq 4 ] # each node's own and the cluster's
  run "$GPUPROV" down nn --yes
  echo "$output"
  [ "$status" -eq 0 ]
  expect_nothing_left nebius disks security_groups security_rules
}
