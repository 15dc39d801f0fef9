#!/usr/bin/env bats
# Multi-node clusters on Google Compute Engine (docs/multi-node.md, plugins/gcp/README.md) end
# to end through the GCE emulator's docker backend: the nodes on the project's default network
# (their internal addresses, networkInterfaces[0].networkIP), the peer ports admitted between
# them by the VPC firewall rule gpuprov-<cluster>-peers whose sourceTags and targetTags are the
# cluster's network tag; the emulator enforces the rules on the nodes' internal addresses.

load helpers
load multi_node
bats_require_minimum_version 1.5.0

setup_file() {
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  export E2E_NAME="e2e-mngcp-$$"
  mkdir -p "$GPUPROV_HOME"
  remove_vm_containers "$E2E_NAME"
  # GOOGLE_APPLICATION_CREDENTIALS names a missing file: the emulator writes its key there.
  GOOGLE_APPLICATION_CREDENTIALS="$BATS_FILE_TMPDIR/emu-key.json" \
    start_emulator emu --backend docker --clouds gcp
}

teardown_file() {
  stop_emulators
  remove_vm_containers "$E2E_NAME"
}

setup() {
  use_emulator emu
  export GOOGLE_APPLICATION_CREDENTIALS="$BATS_FILE_TMPDIR/emu-key.json"
  printf '[defaults.timeouts]\nssh_wait_seconds = 180\nboot_install_wait_seconds = 180\napi_wait_seconds = 180\n' \
    >"$GPUPROV_HOME/config.toml"
}

teardown() {
  reset_emulators
}

# private_ingress VM PROTO PORTS: the sources the emulator's rules admit to VM's internal
# address on PROTO PORTS, sorted, joined by commas ("" when none).
private_ingress() {
  curl -fsS "$CONTROL/instances?cloud=gcp" | /usr/bin/python3 -c "
import json, sys
row = [i for i in json.load(sys.stdin)['instances'] if i['name'] == '$1'][0]
print(','.join(sorted(s for r in row['private_ingress'] or []
                      if r['protocol'] == '$2' and r['ports'] == '$3' for s in r['sources'])))"
}

@test "gcp (boot route, direct): --nodes 3 on the default network, peers by the firewall rule's tags, another port refused, scale down drops a peer, down leaves nothing" {
  run "$GPUPROV" -v provision --name "$E2E_NAME" --cloud gcp --gpus L4:1 --nodes 3 --no-smoke-test
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"$E2E_NAME: 3 of 3 nodes in the cluster"* ]]
  [[ "$output" == *"cluster plan: route boot, access direct"* ]]
  [[ "$output" != *"::server:"* ]]
  local kc="$GPUPROV_HOME/kube/$E2E_NAME.yaml"
  [ "$(ready_nodes "$kc")" -eq 3 ]
  [ "$(gpu_sum "$kc")" -eq 3 ]
  [ "$(cluster_json "$E2E_NAME" "c['nodes'][1]['role']")" = agent ]
  # Each node's internal address on the network, as networkInterfaces[0].networkIP gives it.
  local p
  mapfile -t p < <(cluster_json "$E2E_NAME" "'\\n'.join(n['private_ip'] for n in c['nodes'])")
  [[ "${p[0]}" == 10.* && "${p[1]}" == 10.* && "${p[2]}" == 10.* ]]
  # The cloud's rule as the emulator enforces it: each node admits the other two (and itself)
  # on the peer ports, the cluster's tag being the source; 10250 and 51820 from nowhere else.
  local all
  all=$(printf '%s\n' "${p[@]}" | sort | paste -sd,)
  [ "$(private_ingress "$E2E_NAME" tcp 10250)" = "$all" ]
  [ "$(private_ingress "$E2E_NAME-agent-2" udp 51820)" = "$all" ]
  [ "$(private_ingress "$E2E_NAME-agent-1" tcp 10250)" = "$all" ]
  [ "$(count gcp firewalls)" -eq 4 ] # one per node and the cluster's
  # A port outside the peer ports is refused between the nodes: the server listens on 18080
  # (it answers itself), an agent's connection to it on the internal address is not admitted.
  "$GPUPROV" ssh "$E2E_NAME" -- "setsid python3 -m http.server 18080 >/dev/null 2>&1 </dev/null &"
  wait_for 10 tcp_connects "$E2E_NAME" 0 127.0.0.1 18080
  tcp_connects "$E2E_NAME" 1 "${p[2]}" 10250
  run ! tcp_connects "$E2E_NAME" 1 "${p[0]}" 18080
  # Scaled down to 2: the removed agent no longer carries the tag, so it is no source.
  run "$GPUPROV" scale "$E2E_NAME" --nodes 2
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(count gcp firewalls)" -eq 3 ]
  [ "$(private_ingress "$E2E_NAME" tcp 10250)" = "$(printf '%s\n' "${p[0]}" "${p[1]}" | sort | paste -sd,)" ]
  [ "$(ready_nodes "$kc")" -eq 2 ]
  run "$GPUPROV" down "$E2E_NAME" --yes
  echo "$output"
  [ "$status" -eq 0 ]
  [ ! -e "$GPUPROV_HOME/state/$E2E_NAME-agent-2.json" ]
  expect_nothing_left gcp
}
