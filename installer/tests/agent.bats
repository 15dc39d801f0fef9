#!/usr/bin/env bats
# The installer's cluster modes on a sandboxed root with the fake systemctl: an agent prepared
# without --server-url (no unit, nothing started), its join with --server-url and --token-file
# (k3s-agent.service and its 0600 env file as k3s's install.sh writes them, the token file
# removed, the token in no log or marker), the server of a multi-node cluster
# (wireguard-native), and the refusals. testvm.bats joins a prepared agent in a test VM.

load helpers

setup() {
  common_setup
  UNIT="$SANDBOX/etc/systemd/system/k3s-agent.service"
  AGENT_ENV="$UNIT.env"
  CONFIG="$SANDBOX/etc/rancher/k3s/config.yaml"
  LOG="$SANDBOX/var/log/gpuprov-install.log"
  TOKEN="K10$(printf 'a%.0s' {1..64})::server:0123456789abcdef0123456789abcdef"
}
teardown() { common_teardown; }

# token_file: the join token in a 0600 file under the sandbox, as gpuprov pushes it; prints its
# path on the node.
token_file() {
  install -D -m 0600 /dev/null "$SANDBOX/run/gpuprov/join-token"
  printf '%s\n' "$TOKEN" >"$SANDBOX/run/gpuprov/join-token"
  echo /run/gpuprov/join-token
}

join() { run "$INSTALLER" --role agent --server-url https://10.0.0.2:6443 --token-file "$(token_file)" "$@"; }

# token_leaked: the token appears in a file gpuprov writes that is not the agent's env file.
token_leaked() {
  grep -rlF -e "$TOKEN" -e "${TOKEN##*:}" "$SANDBOX" "$BATS_TEST_TMPDIR/systemd" 2>/dev/null |
    grep -vx "$AGENT_ENV"
}

@test "an agent without --server-url is prepared: binary, links, GPU runtime, config; no unit, nothing started" {
  with_gpu "L4:1"
  with_toolkit
  run "$INSTALLER" --role agent --node-ip 10.0.0.3 --node-external-ip 203.0.113.3
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(status .role)" = agent ]
  [ "$(status .state)" = agent-prepared ]
  [ "$(status .result)" = ok ]
  grep -q "step k3s-binary" "$LOG"
  grep -qx 'default-runtime: "nvidia"' "$CONFIG"
  grep -qx 'node-ip: "10.0.0.3"' "$CONFIG"
  grep -qx 'node-external-ip: "203.0.113.3"' "$CONFIG"
  # Agent keys only: tls-san and the kubeconfig mode are the server's.
  refute grep -q 'tls-san\|write-kubeconfig-mode\|flannel-backend' "$CONFIG"
  [ ! -e "$UNIT" ]
  [ ! -e "$AGENT_ENV" ]
  [ ! -e "$SANDBOX/etc/systemd/system/k3s.service" ]
  # The device plugin is the server's to apply; the boot helper asks the server's API.
  [ ! -e "$SANDBOX/var/lib/rancher/k3s/server/manifests/nvidia-device-plugin.yaml" ]
  [ ! -e "$SANDBOX/usr/local/sbin/gpuprov-device-plugin-boot" ]
  [ -x "$SANDBOX/usr/local/bin/k3s-agent-uninstall.sh" ]
  [ -x "$SANDBOX/usr/local/bin/k3s-killall.sh" ]
  [ ! -e "$SANDBOX/usr/local/bin/k3s-uninstall.sh" ]
  refute grep -qE ' (start|restart|enable) k3s' "$FAKE_SYSTEMCTL_DIR/calls.log"
  refute grep -q daemon-reload "$FAKE_SYSTEMCTL_DIR/calls.log"
  # A second prepare run changes nothing.
  run "$INSTALLER" --role agent --node-ip 10.0.0.3 --node-external-ip 203.0.113.3
  [ "$status" -eq 0 ]
  [ "$(status .state)" = agent-prepared ]
  grep -q 'config.yaml unchanged' "$LOG"
}

@test "an agent joins: token read and removed, k3s-agent.service and its 0600 env as k3s's installer, started once" {
  run "$INSTALLER" --role agent --node-ip 10.0.0.3
  [ "$status" -eq 0 ]
  HTTPS_PROXY=http://127.0.0.1:3128 join --node-ip 10.0.0.3
  echo "$output"
  [ "$status" -eq 0 ]
  [ ! -e "$SANDBOX/run/gpuprov/join-token" ]
  grep -qx 'HTTPS_PROXY=http://127.0.0.1:3128' "$AGENT_ENV"
  grep -q 'K3S_URL=https://10.0.0.2:6443 K3S_TOKEN=(token) HTTPS_PROXY=http://127.0.0.1:3128' "$LOG"
  [ "$(stat -c %a "$AGENT_ENV")" = 600 ]
  grep -qx 'K3S_URL=https://10.0.0.2:6443' "$AGENT_ENV"
  grep -qx "K3S_TOKEN=$TOKEN" "$AGENT_ENV"
  grep -qx 'ExecStart=/usr/local/bin/k3s agent' "$UNIT"
  grep -qx 'EnvironmentFile=-/etc/systemd/system/k3s-agent.service.env' "$UNIT"
  grep -qx 'EnvironmentFile=-/etc/default/%N' "$UNIT"
  grep -qx 'Type=notify' "$UNIT"
  [ "$(grep -c ' start k3s-agent.service' "$FAKE_SYSTEMCTL_DIR/calls.log")" -eq 1 ]
  grep -q 'enable k3s-agent.service' "$FAKE_SYSTEMCTL_DIR/calls.log"
  [ "$(status .state)" = agent-joined ]
  [ "$(status .k3s_action)" = started ]
  grep -q 'step agent-join' "$LOG"
  # The token is in the env file only: not in the log, the marker, stderr or systemctl's calls.
  [[ "$output" != *"${TOKEN##*:}"* ]]
  run token_leaked
  [ -z "$output" ]
  # Again with the same token: nothing restarts.
  HTTPS_PROXY=http://127.0.0.1:3128 join --node-ip 10.0.0.3
  [ "$status" -eq 0 ]
  [ "$(status .k3s_action)" = none ]
  [ "$(grep -cE ' (start|restart) k3s-agent' "$FAKE_SYSTEMCTL_DIR/calls.log")" -eq 1 ]
  # A later run without --server-url (the boot run, a re-run) keeps the agent joined.
  run "$INSTALLER" --role agent --node-ip 10.0.0.3
  [ "$status" -eq 0 ]
  [ "$(status .state)" = agent-joined ]
  grep -qx "K3S_TOKEN=$TOKEN" "$AGENT_ENV"
  [ "$(grep -cE ' (start|restart) k3s-agent' "$FAKE_SYSTEMCTL_DIR/calls.log")" -eq 1 ]
  # A new server address restarts the agent once.
  run "$INSTALLER" --role agent --server-url https://10.0.0.9:6443 --token-file "$(token_file)" --node-ip 10.0.0.3
  [ "$status" -eq 0 ]
  [ "$(status .k3s_action)" = restarted ]
}

@test "an agent that does not come up fails its agent-join step, naming the unit" {
  mkdir -p "$FAKE_SYSTEMCTL_DIR"
  touch "$FAKE_SYSTEMCTL_DIR/fail-start"
  join
  [ "$status" -eq 1 ]
  [ "$(status .failed_step)" = agent-join ]
  [[ "$(status .message)" == *"journalctl -u k3s-agent"* ]]
  [ "$(status .state)" = null ]
  [ ! -e "$SANDBOX/run/gpuprov/join-token" ]
}

@test "a token file that is missing or not a token fails before anything, and is removed" {
  run "$INSTALLER" --role agent --server-url https://10.0.0.2:6443 --token-file /run/gpuprov/none
  [ "$status" -eq 1 ]
  [[ "$output" == *"--token-file /run/gpuprov/none: missing, or not a k3s token"* ]]
  f="$(token_file)"
  printf 'two words\n' >"$SANDBOX$f"
  run "$INSTALLER" --role agent --server-url https://10.0.0.2:6443 --token-file "$f"
  [ "$status" -eq 1 ]
  [[ "$output" == *"not a k3s token"* ]]
  [[ "$output" != *"two words"* ]]
  [ ! -e "$SANDBOX$f" ]
  [ ! -e "$AGENT_ENV" ]
}

@test "the server of a multi-node cluster: wireguard-native (kept once set), node-ip and node-external-ip in config.yaml" {
  run "$INSTALLER" --cluster-nodes 3 --node-ip 10.0.0.2 --node-external-ip 203.0.113.2 --public-ip 203.0.113.2
  echo "$output"
  [ "$status" -eq 0 ]
  grep -qx 'flannel-backend: "wireguard-native"' "$CONFIG"
  grep -qx 'node-ip: "10.0.0.2"' "$CONFIG"
  grep -qx 'node-external-ip: "203.0.113.2"' "$CONFIG"
  grep -qx 'ExecStart=/usr/local/bin/k3s server' "$SANDBOX/etc/systemd/system/k3s.service"
  [ "$(status .role)" = server ]
  [ "$(status .state)" = server ]
  [ -x "$SANDBOX/usr/local/bin/k3s-uninstall.sh" ]
  # Kept once set (a running cluster's backend is not switched), even when the cluster shrinks
  # to one node: nothing restarts.
  run "$INSTALLER" --cluster-nodes 1 --node-ip 10.0.0.2 --node-external-ip 203.0.113.2 --public-ip 203.0.113.2
  [ "$status" -eq 0 ]
  grep -qx 'flannel-backend: "wireguard-native"' "$CONFIG"
  [ "$(status .k3s_action)" = none ]
}

@test "a single-node server's files are as before the cluster modes" {
  run "$INSTALLER" --public-ip 203.0.113.2
  [ "$status" -eq 0 ]
  refute grep -q 'flannel-backend\|node-ip' "$CONFIG"
  grep -qx 'Description=Lightweight Kubernetes (k3s, single node, managed by gpuprov)' \
    "$SANDBOX/etc/systemd/system/k3s.service"
  [ "$(status .state)" = server ]
}

@test "bad cluster arguments are usage errors (exit 2) and change nothing" {
  for args in "--role worker" "--role agent --server-url https://10.0.0.2:6443" \
    "--role agent --token-file /run/t" "--server-url https://10.0.0.2:6443 --token-file /run/t" \
    "--role agent --server-url http://10.0.0.2:6443 --token-file /run/t" \
    "--role agent --server-url https://10.0.0.2:6443 --token-file run/t" \
    "--peer 10.0.0" "--peer host.example" "--node-ip 10.0.0.256" "--cluster-nodes 0" "--cluster-nodes x"; do
    # shellcheck disable=SC2086 # words on purpose
    run "$INSTALLER" $args
    echo "$args: $output"
    [ "$status" -eq 2 ]
  done
  [ ! -e "$SANDBOX/etc" ]
  [ ! -e "$FAKE_SYSTEMCTL_DIR/calls.log" ]
}

@test "k3s-agent-uninstall.sh and k3s-killall.sh on an agent: valid sh, they stop and remove the agent" {
  join
  [ "$status" -eq 0 ]
  u="$SANDBOX/usr/local/bin/k3s-agent-uninstall.sh"
  sh -n "$u"
  shellcheck -s sh -e SC2046 "$u" "$SANDBOX/usr/local/bin/k3s-killall.sh"
  grep -q 'for u in k3s k3s-agent ' "$u"
  grep -q ' k3s-agent.service\*' "$u"
  grep -q ' /usr/local/bin/k3s-agent-uninstall.sh' "$u"
  grep -qx 'systemctl stop k3s k3s-agent 2>/dev/null' "$SANDBOX/usr/local/bin/k3s-killall.sh"
}
