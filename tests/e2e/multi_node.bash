# Helpers of the multi-node e2e files (tests/e2e/multi_node*.bats): a cluster's `list -o json`,
# kubectl counts, the node firewall's peer rules, the tunnel, reachability between nodes.
# shellcheck shell=bash
# shellcheck disable=SC2154  # status, output: set by bats' run

# cluster_json NAME PY: evaluates the Python expression PY on the cluster's `list -o json`
# object (c) and prints it.
cluster_json() {
  "$GPUPROV" list --no-refresh --output json | /usr/bin/python3 -c "
import json, sys
c = [v for v in json.load(sys.stdin) if v['name'] == '$1'][0]
print($2)"
}

# ready_nodes KUBECONFIG [KUBECTL ARGS...]: how many nodes kubectl shows Ready.
ready_nodes() {
  KUBECONFIG=$1 kubectl "${@:2}" get nodes --no-headers | awk '$2 == "Ready"' | wc -l
}

# internal_ips KUBECONFIG: the nodes' InternalIP addresses, sorted, one a line.
internal_ips() {
  KUBECONFIG=$1 kubectl get nodes \
    -o jsonpath='{range .items[*]}{range .status.addresses[?(@.type=="InternalIP")]}{.address}{"\n"}{end}{end}' |
    LC_ALL=C sort
}

# private_ips NAME: the private addresses of cluster NAME's nodes as gpuprov recorded them, sorted.
private_ips() {
  cluster_json "$1" "'\\n'.join(n['private_ip'] for n in c['nodes'])" | LC_ALL=C sort
}

# expect_boot_addresses_kept NAME OUTPUT: the server of cluster NAME learned k3s's addresses from
# the metadata service at boot (--node-ip metadata), so its installer did not run a second time
# (gpuprov -v's "server rerun:" line), and every node's InternalIP is its private address.
expect_boot_addresses_kept() {
  [[ "$2" == *"server rerun: none: the install found ran with every setting the cluster needs"* ]] ||
    { echo "the server's installer ran again: $(grep 'server rerun:' <<<"$2")"; false; }
  [[ "$2" != *"installer with the cluster's addresses"* ]]
  local internal private
  internal=$(internal_ips "$GPUPROV_HOME/kube/$1.yaml") private=$(private_ips "$1")
  echo "InternalIP: $internal; private: $private"
  [ -n "$private" ] && [ "$internal" = "$private" ]
}

# gpu_sum KUBECONFIG [KUBECTL ARGS...]: nvidia.com/gpu allocatable summed over the nodes.
gpu_sum() {
  KUBECONFIG=$1 kubectl "${@:2}" get nodes -o jsonpath='{range .items[*]}{.status.allocatable.nvidia\.com/gpu}{"\n"}{end}' |
    awk '{s += $1} END {print s + 0}'
}

# peer_rules: from an `nft list table inet gpuprov` listing on stdin, the node firewall's rules
# that admit sources other than the pod networks, one a line, sorted: "ADDRESSES MATCH" with
# the addresses sorted and joined by commas ("127.90.0.2,127.90.0.3 tcp dport { 6443, 10250 }").
peer_rules() {
  /usr/bin/python3 -c '
import re, sys
rules = []
for line in sys.stdin:
    m = re.search(r"ip6? saddr (\{ [^}]* \}|\S+)(.*) accept$", line.strip())
    if not m:
        continue
    sources = sorted(m.group(1).strip("{} ").split(", "))
    if all(a.startswith(("10.42.", "10.43.")) for a in sources):  # k3s pod and service CIDRs
        continue
    rules.append(",".join(sources) + " " + m.group(2).strip())
print("\n".join(sorted(rules)))'
}

# node_addresses NAME: the public address of each node of cluster NAME, one a line, by index.
node_addresses() {
  cluster_json "$1" "'\\n'.join(n['address'] for n in c['nodes'])"
}

# expect_firewall_peers NAME NODE ADDRESS...: status 0 when node NODE of cluster NAME has a node
# firewall admitting exactly ADDRESS... on 6443/tcp, 10250/tcp and 51820/udp (and no other
# sources but k3s's pod and service networks). The listing is root's (sudo for a cloud whose
# SSH user is not root, as Massed Compute's).
expect_firewall_peers() {
  local name=$1 node=$2 peers expected
  shift 2
  peers=$(printf '%s\n' "$@" | sort | paste -sd,)
  expected=$(printf '%s tcp dport { 6443, 10250 }\n%s udp dport 51820' "$peers" "$peers")
  # shellcheck disable=SC2016  # $(id -u) is the node's
  run "$GPUPROV" ssh "$name" --node "$node" -- \
    'if [ "$(id -u)" -eq 0 ]; then nft list table inet gpuprov; else sudo -n nft list table inet gpuprov; fi'
  echo "$name node $node: $output"
  [ "$status" -eq 0 ] && [ "$(peer_rules <<<"$output")" = "$expected" ]
}

# through_tunnel NAME FUNCTION: FUNCTION KUBECONFIG --server URL with `gpuprov tunnel NAME` on a
# free local port for the time it runs (tunnel-access clusters), once the API answers through it
# (up to 30 s); kubectl's node list and the tunnel's messages go to stderr.
through_tunnel() {
  local port rc=0 kc="$GPUPROV_HOME/kube/$1.yaml"
  port=$(free_port)
  start_tunnel "$1" "$port"
  wait_for 30 env KUBECONFIG="$kc" kubectl --server "https://127.0.0.1:$port" get --raw /readyz >/dev/null 2>&1 || true
  "$2" "$kc" --server "https://127.0.0.1:$port" || rc=$?
  KUBECONFIG="$kc" kubectl --server "https://127.0.0.1:$port" get nodes >&2 || true
  cat "$BATS_TEST_TMPDIR/tunnel.err" >&2
  stop_child INT "$TUNNEL_PID" || true
  wait "$TUNNEL_PID" || true
  TUNNEL_PID=
  return "$rc"
}

# test_ready_nodes NAME N: status 0 when kubectl shows N Ready nodes of cluster NAME (through
# its tunnel).
test_ready_nodes() {
  [ "$(through_tunnel "$1" ready_nodes 2>/dev/null)" -eq "$2" ]
}

# tcp_connects NAME NODE ADDRESS PORT: status 0 when node NODE of cluster NAME opens a TCP
# connection to ADDRESS:PORT within 3 s.
tcp_connects() {
  "$GPUPROV" ssh "$1" --node "$2" -- "timeout 3 bash -c '</dev/tcp/$3/$4'"
}

# Nothing of NAME exists: no record, no container.
nothing_made() {
  [ ! -e "$GPUPROV_HOME/state/$1.json" ]
  [ "$(count_vm_containers "$1")" -eq 0 ]
}

# expect_ttl_check NAME NODE TEXT: status 0 when one TTL check on node NODE of cluster NAME
# (gpuprov-ttl check, through `docker exec`: an SSH session would count as busy) says TEXT.
expect_ttl_check() {
  local vm
  vm=$(cluster_json "$1" "c['nodes'][$2]['name']")
  run docker exec "$(docker ps -q --filter "label=io.gpuprov.emulator.name=$vm")" /usr/local/sbin/gpuprov-ttl check
  echo "$vm TTL check: $output"
  [ "$status" -eq 0 ] && [[ "$output" == *"$3"* ]]
}
