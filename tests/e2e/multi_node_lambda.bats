#!/usr/bin/env bats
# Lambda clusters (`--nodes N`, docs/multi-node.md) end to end with the real gpuprov binary and
# driver against the Lambda emulator (tests/emulators/lambda_api.cc) on the docker backend: the
# boot route, direct access. Lambda's firewall (account-wide rules and rulesets) admits traffic
# from public source networks only (Lambda's OpenAPI spec, FirewallRule.source_network), so
# the instances of one region reach each other on their private_ip unfiltered, and nothing is
# opened to the internet for a cluster: each node's own firewall (an nft table the host sets
# over SSH) admits only the peers from the private network (plugins/lambda/README.md,
# "Clusters"). The emulator's pacing is off here (lambda.bats enforces it).

load helpers
load multi_node
bats_require_minimum_version 1.5.0

setup_file() {
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  export LAMBDA_API_KEY="secret_mn_$$_lambda_api_key"
  export HOME="$BATS_FILE_TMPDIR/userhome" # no ~/.lambda_cloud of the machine's user
  mkdir -p "$HOME" "$GPUPROV_HOME"
  start_emulator emu --backend docker --clouds lambda --no-rate-limits
}

teardown_file() {
  stop_emulators
}

setup() {
  use_emulator emu
  printf '[defaults.timeouts]\nssh_wait_seconds = 180\nboot_install_wait_seconds = 180\napi_wait_seconds = 180\n[clouds.lambda]\nrequest_interval_ms = 0\nlaunch_interval_ms = 0\n' \
    >"$GPUPROV_HOME/config.toml"
}

teardown() {
  reset_emulators
}

# lambda_api PATH: GET PATH of the Lambda API with the key.
lambda_api() {
  curl -fsS --retry 5 --retry-delay 1 -H "Authorization: Bearer $LAMBDA_API_KEY" "$GPUPROV_LAMBDA_ENDPOINT$1"
}

# private_peer_rules NAME NODE: the rules of node NODE's private-peers firewall (the nft table
# gpuprov_peers the host sets over SSH) that admit sources, one a line, as multi_node.bash's
# peer_rules gives them ("!= NET" for what comes from outside the private network).
private_peer_rules() {
  run "$GPUPROV" ssh "$1" --node "$2" -- sudo nft list table inet gpuprov_peers
  echo "$1 node $2: $output" >&2
  [ "$status" -eq 0 ] || return 1
  peer_rules <<<"$output"
}

@test "lambda (boot route, direct): --nodes 3 makes one validated cluster on private addresses; only the peers reach k3s's ports there; nothing opens to the internet; scale down; down leaves nothing" {
  run "$GPUPROV" -v provision --name ml --cloud lambda --gpus A10:1 --nodes 3 --no-smoke-test
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"ml: 3 of 3 nodes in the cluster"* ]]
  local kc="$GPUPROV_HOME/kube/ml.yaml"
  [ "$(ready_nodes "$kc")" -eq 3 ]
  [ "$(gpu_sum "$kc")" -eq 3 ]
  [ "$(cluster_json ml "c['nodes'][2]['name']")" = ml-agent-2 ]
  [ "$(cluster_json ml "c['nodes'][1]['role']")" = agent ]
  # Every node has Lambda's private_ip, and the nodes know each other by it (k3s's node-ip).
  local k ip ips=()
  for k in 0 1 2; do
    ip=$(cluster_json ml "c['nodes'][$k]['private_ip']")
    [[ "$ip" == 10.* ]]
    ips+=("$ip")
  done
  run "$GPUPROV" ssh ml -- "sudo grep '^node-ip:' /etc/rancher/k3s/config.yaml"
  echo "$output"
  [[ "$output" == *"${ips[0]}"* ]]
  # The overlay check ran over the private addresses: an agent reaches the server's API and
  # the server an agent's kubelet there.
  tcp_connects ml 1 "${ips[0]}" 6443
  tcp_connects ml 0 "${ips[2]}" 10250
  # Each node's firewall admits exactly the other two from the private network, on k3s's
  # ports; a peer is refused on any other port (sshd listens on 22 on every address).
  local net
  net=$(private_peer_rules ml 0 | sed -n 's/^!= //p')
  [[ "$net" == 10.*/* ]]
  for k in 0 1 2; do
    local others=() j
    for j in 0 1 2; do [ "$j" -eq "$k" ] || others+=("${ips[$j]}"); done
    local peers expected
    peers=$(printf '%s\n' "${others[@]}" | sort | paste -sd,)
    expected=$(printf '!= %s\n%s tcp dport { 6443, 10250 }\n%s udp dport 51820' "$net" "$peers" "$peers")
    [ "$(private_peer_rules ml "$k")" = "$expected" ]
  done
  run ! tcp_connects ml 1 "${ips[0]}" 22
  run ! tcp_connects ml 2 "${ips[1]}" 22
  # From outside the private network SSH still answers (the cloud's ruleset opens 22).
  run "$GPUPROV" ssh ml --node 1 -- true
  [ "$status" -eq 0 ]
  # Lambda's tags name the cluster and the role of each instance.
  run lambda_api /instances
  [[ "$output" == *'{"key":"gpuprov-cluster","value":"ml"}'* ]]
  [ "$(grep -o '"key":"gpuprov-role","value":"agent"' <<<"$output" | wc -l)" -eq 2 ]
  # The cloud's rules: one ruleset per node with the direct-access ports from anywhere, none of
  # the peer ports (nothing new opens to the internet); the private side is left unfiltered,
  # as Lambda's firewall leaves it.
  [ "$(count lambda rulesets)" -eq 3 ]
  run lambda_api /firewall-rulesets
  echo "$output"
  [[ "$output" != *10250* ]]
  [[ "$output" != *51820* ]]
  run curl -fsS "$CONTROL/instances?cloud=lambda"
  [ "$(/usr/bin/python3 -c 'import json,sys; print(sorted({str(i.get("private_ingress")) for i in json.load(sys.stdin)["instances"]}))' <<<"$output")" = "['None']" ]
  # Scale down: the nodes that stay admit only each other (the removed node's address goes).
  run "$GPUPROV" scale ml --nodes 2 --yes
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(ready_nodes "$kc")" -eq 2 ]
  [ "$(private_peer_rules ml 0)" = "$(printf '!= %s\n%s tcp dport { 6443, 10250 }\n%s udp dport 51820' "$net" "${ips[1]}" "${ips[1]}")" ]
  [ "$(private_peer_rules ml 1)" = "$(printf '!= %s\n%s tcp dport { 6443, 10250 }\n%s udp dport 51820' "$net" "${ips[0]}" "${ips[0]}")" ]
  run "$GPUPROV" down ml --yes
  echo "$output"
  [ "$status" -eq 0 ]
  [ ! -e "$GPUPROV_HOME/state/ml-agent-1.json" ]
  expect_nothing_left lambda ssh_keys rulesets
}
