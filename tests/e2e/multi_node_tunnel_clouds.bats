#!/usr/bin/env bats
# Multi-node clusters (`--nodes N`, docs/multi-node.md) on the two tunnel-access clouds without
# a firewall API, end to end with the real gpuprov binary and drivers against the emulators'
# docker backend: Verda (boot route: the installer in each node's startup script) and Massed
# Compute (SSH route). Neither cloud can filter between its VMs, so each node's firewall (the
# installer's --peer) admits exactly its peers on 6443/tcp, 10250/tcp and 51820/udp, and a port
# a node listens on outside those is refused to its peers. The nodes reach each other on
# Verda's private network of the cluster (gpuprov-<cluster>), on Massed Compute at their public
# addresses (the emulator routes those between its VMs on every port, as the internet does).
# --nodes 3 on each (both tests take about a minute and a half here).

load helpers
load multi_node
bats_require_minimum_version 1.5.0

setup_file() {
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  export VERDA_CLIENT_ID="gpuprov-e2e-mn-$$"
  export VERDA_CLIENT_SECRET="secret_e2e_mn_$$_verda_client"
  export MASSED_API_KEY="mc_e2e_mn_$$_secret_api_key"
  unset MASSED_COMPUTE_API_TOKEN
  export HOME="$BATS_FILE_TMPDIR/userhome" # no ~/.verda of the machine's user
  mkdir -p "$GPUPROV_HOME" "$HOME"
  start_emulator emu --backend docker --clouds verda,massedcompute
}

teardown_file() {
  stop_emulators
}

setup() {
  use_emulator emu
  printf '[defaults.timeouts]\nssh_wait_seconds = 180\nboot_install_wait_seconds = 240\napi_wait_seconds = 180\n[clouds.verda]\npoll_interval_ms = 500\n' \
    >"$GPUPROV_HOME/config.toml"
}

teardown() {
  [ -z "${TUNNEL_PID:-}" ] || stop_child TERM "$TUNNEL_PID" || true
  reset_emulators
}

# peer_addresses NAME: the address each node of cluster NAME is reached at by its peers, one a
# line, by index: its private address where the cloud gives one, else its public one.
peer_addresses() {
  cluster_json "$1" "'\\n'.join(n['private_ip'] or n['address'] for n in c['nodes'])"
}

# three_node_cluster NAME CLOUD GPU NETWORK: provisions a 3-node cluster NAME on CLOUD and
# checks it as one validated cluster reached through the tunnel, whose nodes reach each other
# at their NETWORK ("private" or "public") addresses and whose node firewalls admit exactly the
# peers there; then down removes every node.
three_node_cluster() {
  local name=$1 cloud=$2 gpu=$3 network=$4 a
  run "$GPUPROV" -v provision --name "$name" --cloud "$cloud" --gpus "$gpu" --nodes 3 --no-smoke-test
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"$name: 3 of 3 nodes in the cluster"* ]]
  # The token travels only over SSH: never in a log line, a record or the kubeconfig.
  [[ "$output" != *"::server:"* ]]
  run ! grep -rq "::server:" "$GPUPROV_HOME/state" "$GPUPROV_HOME/kube"
  [ "$(cluster_json "$name" "len(c['nodes'])")" -eq 3 ]
  [ "$(cluster_json "$name" "c['access']")" = tunnel ]
  [ "$(cluster_json "$name" "c['nodes'][2]['role']")" = agent ]
  mapfile -t a < <(peer_addresses "$name")
  [ "$(printf '%s\n' "${a[@]}" | sort -u | grep -c .)" -eq 3 ]
  if [ "$network" = public ]; then
    # No private network: private_ip is "" and the peers are the public (127.90) addresses.
    [ -z "$(cluster_json "$name" "''.join(n['private_ip'] for n in c['nodes'])")" ]
    [[ "${a[0]}" == 127.* && "${a[1]}" == 127.* && "${a[2]}" == 127.* ]]
  else
    # The cluster's one network on the cloud, and the backend's private network of its subnet
    # (a 10.0.0.0/8 Docker network) under the nodes' addresses.
    [ "$(count "$cloud" private_networks)" -eq 1 ]
    [[ "${a[0]}" == 10.* && "${a[1]}" == 10.* && "${a[2]}" == 10.* ]]
  fi
  # kubectl through gpuprov tunnel: three Ready nodes, one GPU each (the overlay between them
  # is part of Ready: flannel's WireGuard on 51820/udp).
  [ "$(through_tunnel "$name" ready_nodes)" -eq 3 ]
  [ "$(through_tunnel "$name" gpu_sum)" -eq 3 ]
  # Each node's firewall admits exactly the two others, on 6443/tcp, 10250/tcp and 51820/udp.
  expect_firewall_peers "$name" 0 "${a[1]}" "${a[2]}"
  expect_firewall_peers "$name" 1 "${a[0]}" "${a[2]}"
  expect_firewall_peers "$name" 2 "${a[0]}" "${a[1]}"
  # The firewall is what filters: an agent reaches the server's API, not a port the server
  # listens on that the firewall does not admit.
  "$GPUPROV" ssh "$name" -- "setsid python3 -m http.server 18080 >/dev/null 2>&1 </dev/null &"
  wait_for 10 tcp_connects "$name" 0 127.0.0.1 18080
  tcp_connects "$name" 1 "${a[0]}" 6443
  run ! tcp_connects "$name" 1 "${a[0]}" 18080
  run "$GPUPROV" down "$name" --yes
  echo "$output"
  [ "$status" -eq 0 ]
  [ ! -e "$GPUPROV_HOME/state/$name-agent-1.json" ]
  [ ! -e "$GPUPROV_HOME/state/$name-agent-2.json" ]
}

@test "verda (boot route, tunnel): --nodes 3 on the cluster's private network, peers admitted by the node firewall, one validated cluster; down leaves nothing" {
  three_node_cluster vn verda H100:1 private
  # The network went with the last node; no script, key or OS volume is left.
  expect_nothing_left verda private_networks scripts ssh_keys volumes_in_trash detached_volumes
}

@test "massedcompute (SSH route, tunnel): --nodes 3, public addresses, peers admitted by the node firewall, one validated cluster; down leaves nothing" {
  three_node_cluster mm massedcompute RTX-A6000:1 public
  expect_nothing_left massedcompute ssh_keys
}
