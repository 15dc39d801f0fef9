#!/usr/bin/env bats
# A two-node cluster from the installer in two test VMs (tests/fixtures/testvm: systemd,
# cloud-init, nft) with the k3s simulator (tests/fixtures/k3s-simulator, its agent mode) as k3s:
# both boot with the node firewall, the server with --cluster-nodes 2, the agent prepared only
# (no --server-url at boot, as on a boot-route cloud before the server is up). Then, as gpuprov
# does over SSH: each node's firewall gets the other as its peer (--peers-only), the agent gets
# the server's node-token on stdin into a 0600 file and joins; the server's API lists both nodes
# Ready (the API asked on the server). A wrong token fails the join's step. The VMs are our own containers on Docker's bridge;
# nothing leaves the machine. Runs only with GPUPROV_INSTALLER_VM_TESTS=1, like testvm.bats.

load vm_helpers

setup_file() {
  [[ "${GPUPROV_INSTALLER_VM_TESTS:-0}" == 1 ]] || return 0
  REPO="$BATS_TEST_DIRNAME/../.."
  IMAGE="${GPUPROV_TESTVM_IMAGE:-$(bash "$REPO/tests/fixtures/testvm/build-image.sh" --print-tag)}"
  SERVER="gpuprov-installer-server-$$"
  AGENT="gpuprov-installer-agent-$$"
  export IMAGE SERVER AGENT
  local name args
  for name in server agent; do
    args="--cluster-nodes 2"
    [[ "$name" == server ]] || args="--role agent"
    seed="$BATS_FILE_TMPDIR/seed-$name"
    mkdir -p "$seed/var/lib/cloud/seed/nocloud" "$seed/root" "$seed/usr/local/bin"
    printf 'instance-id: i-installer-%s\nlocal-hostname: %s\n' "$name" "$name" \
      >"$seed/var/lib/cloud/seed/nocloud/meta-data"
    printf '#!/bin/bash\nexec /root/gpuprov-install.sh --no-metadata --toolkit skip --node-firewall ssh-only %s\n' \
      "$args" >"$seed/var/lib/cloud/seed/nocloud/user-data"
    install -m 0755 "$BATS_TEST_DIRNAME/../gpuprov-install.sh" "$seed/root/gpuprov-install.sh"
    # This checkout's simulator, whatever the image carries.
    install -m 0755 "$REPO/tests/fixtures/k3s-simulator/k3s" "$seed/usr/local/bin/k3s"
    VM="$(if [[ "$name" == server ]]; then echo "$SERVER"; else echo "$AGENT"; fi)"
    start_vm "$name" "$seed" var root usr
  done
}

teardown_file() {
  docker rm -f "${SERVER:-none}" "${AGENT:-none}" >/dev/null 2>&1 || true
}

# NODES_READY: run on the server, prints "NAME READY" for each node of its API.
# shellcheck disable=SC2016 # expanded on the server
NODES_READY='t=/var/lib/rancher/k3s/server/tls
curl -sSf -m 10 --cacert $t/server-ca.crt --cert $t/client-admin.crt --key $t/client-admin.key \
  https://127.0.0.1:6443/api/v1/nodes | python3 -c "
import json, sys
for n in json.load(sys.stdin)[\"items\"]:
    ready = [c[\"status\"] for c in n[\"status\"].get(\"conditions\", []) if c[\"type\"] == \"Ready\"]
    print(n[\"metadata\"][\"name\"], (ready or [\"?\"])[0])
"'

ip_of() { docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$1"; }

# on VM CMD...: CMD in that VM.
on() { docker exec "$1" "${@:2}"; }

# wait_on VM SECONDS CMD...: wait_for in that VM.
wait_on() {
  local VM="$1"
  shift
  export VM # read by vm_helpers.bash's vm
  wait_for "$@"
}

# join TOKEN [ARGS...]: the agent's join as gpuprov runs it (AgentJoinCommand): the token on
# stdin into /run/gpuprov/join-token (0600), then the installer already on the node.
join() {
  local token="$1"
  shift
  printf '%s\n' "$token" | docker exec -i "$AGENT" sh -c 'set -e; umask 077; mkdir -p /run/gpuprov
    head -n1 > /run/gpuprov/join-token; exec bash /root/gpuprov-install.sh "$@"' join \
    --no-metadata --toolkit skip --node-firewall ssh-only --role agent \
    --server-url "https://$(ip_of "$SERVER"):6443" --token-file /run/gpuprov/join-token \
    --node-ip "$(ip_of "$AGENT")" "$@"
}

@test "cluster vm: at boot the server runs with wireguard-native and the agent is only prepared" {
  wait_on "$SERVER" 240 grep -q '"state": "server"' /var/lib/gpuprov/install-status.json
  wait_on "$AGENT" 240 grep -q '"state": "agent-prepared"' /var/lib/gpuprov/install-status.json
  on "$SERVER" grep -qx 'flannel-backend: "wireguard-native"' /etc/rancher/k3s/config.yaml
  on "$SERVER" systemctl is-active k3s.service
  on "$SERVER" test -s /var/lib/rancher/k3s/server/node-token
  run on "$AGENT" systemctl is-active k3s-agent.service
  [ "$status" -ne 0 ]
  on "$AGENT" test ! -e /etc/systemd/system/k3s-agent.service
  on "$AGENT" test -x /usr/local/bin/k3s-agent-uninstall.sh
}

@test "cluster vm: with each other as peers and the server's token, the agent joins and is Ready" {
  run on "$SERVER" /root/gpuprov-install.sh --peers-only --peer "$(ip_of "$AGENT")"
  echo "$output"
  [ "$status" -eq 0 ]
  run on "$AGENT" /root/gpuprov-install.sh --peers-only --peer "$(ip_of "$SERVER")"
  [ "$status" -eq 0 ]
  on "$SERVER" nft list table inet gpuprov | grep -q "ip saddr $(ip_of "$AGENT") tcp dport { 6443, 10250 } accept"
  token="$(on "$SERVER" cat /var/lib/rancher/k3s/server/node-token)"
  [[ "$token" == K10*::server:* ]]
  run join "$token"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" != *"${token##*:}"* ]]
  on "$AGENT" test ! -e /run/gpuprov/join-token
  [ "$(on "$AGENT" stat -c %a /etc/systemd/system/k3s-agent.service.env)" = 600 ]
  on "$AGENT" systemctl is-active k3s-agent.service
  on "$AGENT" grep -q '"state": "agent-joined"' /var/lib/gpuprov/install-status.json
  run on "$AGENT" grep -rF "${token##*:}" /var/log/gpuprov-install.log /var/lib/gpuprov /var/log/cloud-init-output.log
  [ "$status" -ne 0 ]
  # The server's API (asked on the server with k3s's admin certificate, as the installer's boot
  # helper does) lists both nodes Ready.
  for _ in $(seq 60); do
    nodes="$(on "$SERVER" sh -c "$NODES_READY" 2>&1 || true)"
    [[ "$nodes" == *"agent True"* && "$nodes" == *"server True"* ]] && break
    sleep 1
  done
  echo "$nodes"
  [[ "$nodes" == *"agent True"* ]]
  [[ "$nodes" == *"server True"* ]]
  # Only the peers get in: from this machine (not a peer) the server's 6443 and the agent's
  # 10250 stay dropped (curl exit 28, no answer).
  rc=0
  curl -sk --connect-timeout 2 --max-time 4 -o /dev/null "https://$(ip_of "$SERVER"):6443/" || rc=$?
  [ "$rc" -eq 28 ]
  rc=0
  curl -sk --connect-timeout 2 --max-time 4 -o /dev/null "https://$(ip_of "$AGENT"):10250/" || rc=$?
  [ "$rc" -eq 28 ]
  # A second join changes nothing.
  run join "$token"
  [ "$status" -eq 0 ]
  on "$AGENT" grep -q '"k3s_action": "none"' /var/lib/gpuprov/install-status.json
}

@test "cluster vm: a wrong token is refused by the server and the join's step fails" {
  token="$(on "$SERVER" cat /var/lib/rancher/k3s/server/node-token)"
  run join "${token%:*}:wrong" --restart-timeout 20
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "${lines[-1]}" == *"failed step: agent-join:"* ]]
  on "$AGENT" test ! -e /run/gpuprov/join-token
}

@test "cluster vm: k3s-agent-uninstall.sh stops the agent and removes it, its env file and gpuprov's files" {
  run on "$AGENT" /usr/local/bin/k3s-agent-uninstall.sh
  echo "$output"
  [ "$status" -eq 0 ]
  run on "$AGENT" systemctl is-active k3s-agent.service
  [ "$status" -ne 0 ]
  for p in /etc/systemd/system/k3s-agent.service /etc/systemd/system/k3s-agent.service.env \
    /usr/local/bin/k3s /var/lib/gpuprov /etc/gpuprov /usr/local/bin/k3s-killall.sh \
    /usr/local/bin/k3s-agent-uninstall.sh /etc/systemd/system/gpuprov-firewall.service; do
    on "$AGENT" test ! -e "$p"
  done
  run on "$AGENT" nft list table inet gpuprov
  [ "$status" -ne 0 ]
}
