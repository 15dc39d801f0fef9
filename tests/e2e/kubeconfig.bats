#!/usr/bin/env bats
# Kubeconfig merge and per-VM tunnel ports (issue 16, item 3), with the real kubectl: two
# tunnel-mode clusters made by the Massed Compute emulator (docker backend: real test VMs with
# the k3s simulator, SSH route) each get their own local port; `provision --merge-kubeconfig`
# and `gpuprov kubeconfig NAME --merge --switch` put their contexts into the user's kubeconfig
# (HOME is a temporary folder here) next to an entry of the user's own, two `gpuprov tunnel`s
# run at once, kubectl reaches both by context, and `down` leaves the user's file as it was; a
# user's file in flow style is rewritten whole (kubectl reads both) instead of refused.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
  export MASSED_API_KEY="mc_kube_$$_secret_api_key"
  unset MASSED_COMPUTE_API_TOKEN KUBECONFIG
  export HOME="$BATS_FILE_TMPDIR/userhome"
  mkdir -p "$HOME"
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  # The first tunnel port: a free high port, never a user's own 16443.
  FIRST_PORT=$(free_port)
  export FIRST_PORT
  printf '[defaults]\ntunnel_first_port = %s\n\n[defaults.timeouts]\nssh_wait_seconds = 180\nboot_install_wait_seconds = 300\napi_wait_seconds = 120\n' \
    "$FIRST_PORT" >"$GPUPROV_HOME/config.toml"
  start_emulator docker --clouds massedcompute --backend docker
}

teardown_file() {
  stop_emulators
}

setup() {
  use_emulator docker
}

teardown() {
  local pid
  for pid in ${TUNNEL_PIDS:-}; do stop_child TERM "$pid" || true; done
}

# start_vm_tunnel NAME: `gpuprov tunnel NAME` (the VM's own port) in the background, waiting
# for its forwarding line; its pid is added to TUNNEL_PIDS.
start_vm_tunnel() {
  local err="$BATS_TEST_TMPDIR/tunnel-$1.err" _
  "$GPUPROV" tunnel "$1" 2>"$err" 3>&- &
  TUNNEL_PIDS="${TUNNEL_PIDS:-} $!"
  for _ in $(seq 1 100); do
    grep -q 'Ctrl-C to stop' "$err" && return 0
    sleep 0.2
  done
  cat "$err"
  return 1
}

# kubectl_nodes ARGS...: `kubectl ARGS get nodes`, retried for up to 30 s (the tunnel's SSH
# session may still be coming up).
kubectl_nodes() {
  local _
  for _ in $(seq 1 15); do
    kubectl "$@" get nodes 2>&1 && return 0
    sleep 2
  done
  return 1
}

@test "two tunnel-mode VMs: own ports, merged contexts next to the user's, kubectl by context, down restores the file" {
  mkdir -p "$HOME/.kube"
  cat >"$HOME/.kube/config" <<'YAML'
apiVersion: v1
# the user's own cluster
clusters:
- cluster:
    certificate-authority-data: QUJD
    server: https://prod.example:6443
  name: prod
contexts:
- context:
    cluster: prod
    user: admin
  name: prod
current-context: prod
kind: Config
preferences: {}
users:
- name: admin
  user:
    token: abc
YAML
  cp "$HOME/.kube/config" "$BATS_TEST_TMPDIR/original"

  run "$GPUPROV" provision --name kc-a --cloud massedcompute --gpus RTX-A6000:1 --merge-kubeconfig
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"merged:     into $HOME/.kube/config; kubectl --context gpuprov-kc-a get nodes"* ]]
  [ "$(field kc-a tunnel_local_port)" = "$FIRST_PORT" ]
  [ "$(field kc-a kubeconfig_merged_into)" = "$HOME/.kube/config" ]
  [ "$(file_mode "$HOME/.kube/config")" = 600 ]
  cmp "$HOME/.kube/config.gpuprov-backup" "$BATS_TEST_TMPDIR/original"

  run "$GPUPROV" provision --name kc-b --cloud massedcompute --gpus RTX-A6000:1
  echo "$output"
  [ "$status" -eq 0 ]
  local second=$((FIRST_PORT + 1))
  [ "$(field kc-b tunnel_local_port)" = "$second" ]
  [[ "$output" == *"export KUBECONFIG=$GPUPROV_HOME/kube/kc-b.yaml:\${KUBECONFIG:-~/.kube/config}"* ]]
  [ "$(KUBECONFIG="$GPUPROV_HOME/kube/kc-b.yaml" kubectl config view -o jsonpath='{.clusters[0].cluster.server}')" = "https://127.0.0.1:$second" ]
  # `kubeconfig NAME` prints gpuprov's file for the VM.
  "$GPUPROV" kubeconfig kc-b >"$BATS_TEST_TMPDIR/printed"
  cmp "$BATS_TEST_TMPDIR/printed" "$GPUPROV_HOME/kube/kc-b.yaml"
  run "$GPUPROV" kubeconfig kc-b --merge --switch
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"merged cluster, user and context gpuprov-kc-b into $HOME/.kube/config"* ]]

  run kubectl config get-contexts -o name
  echo "$output"
  [ "$(sort <<<"$output" | tr '\n' ' ')" = "gpuprov-kc-a gpuprov-kc-b prod " ]
  [ "$(kubectl config current-context)" = "gpuprov-kc-b" ]
  # The user's entries are as they were (kubectl reads the same values).
  [ "$(kubectl config view -o jsonpath='{.clusters[?(@.name=="prod")].cluster.server}')" = "https://prod.example:6443" ]
  grep -qx '# the user.s own cluster' "$HOME/.kube/config"

  # Both tunnels at once, each on its VM's own port; kubectl by context reaches each cluster.
  start_vm_tunnel kc-a
  start_vm_tunnel kc-b
  grep -qF "forwarding 127.0.0.1:$FIRST_PORT -> kc-a:6443" "$BATS_TEST_TMPDIR/tunnel-kc-a.err"
  grep -qF "forwarding 127.0.0.1:$second -> kc-b:6443" "$BATS_TEST_TMPDIR/tunnel-kc-b.err"
  run kubectl_nodes --context gpuprov-kc-a
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *" Ready "* ]]
  run kubectl_nodes # the current context, gpuprov-kc-b
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *" Ready "* ]]
  for pid in $TUNNEL_PIDS; do kill -INT "$pid"; wait "$pid" || true; done
  TUNNEL_PIDS=

  # down removes exactly what was merged: the file is the user's again, current-context emptied
  # (it named a removed context).
  run "$GPUPROV" down kc-a
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"removed cluster, user and context gpuprov-kc-a from $HOME/.kube/config"* ]]
  run "$GPUPROV" down kc-b
  [ "$status" -eq 0 ]
  sed 's/^current-context: prod$/current-context: ""/' "$BATS_TEST_TMPDIR/original" >"$BATS_TEST_TMPDIR/expected"
  diff "$BATS_TEST_TMPDIR/expected" "$HOME/.kube/config"
  run kubectl config get-contexts -o name
  [ "$output" = "prod" ]
}

@test "a flow-style kubeconfig (what kubectl reads too) is merged by rewriting it whole, backup kept, and kubectl sees both" {
  mkdir -p "$HOME/.kube"
  printf '%s\n' 'apiVersion: v1' 'kind: Config' \
    "clusters: [{name: prod, cluster: {server: 'https://prod.example:6443'}}]" \
    'contexts: [{name: prod, context: {cluster: prod, user: admin, namespace: "123"}}]' \
    'users: [{name: admin, user: {token: "true"}}]' 'current-context: prod' >"$HOME/.kube/config"
  chmod 644 "$HOME/.kube/config"
  cp "$HOME/.kube/config" "$BATS_TEST_TMPDIR/original"
  run "$GPUPROV" provision --name kc-flow --cloud massedcompute --gpus RTX-A6000:1
  echo "$output"
  [ "$status" -eq 0 ]
  run "$GPUPROV" kubeconfig kc-flow --merge --switch
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"merged cluster, user and context gpuprov-kc-flow into $HOME/.kube/config"* ]]
  [[ "$output" == *"rewritten whole as kubectl does"* ]]
  cmp "$HOME/.kube/config.gpuprov-backup" "$BATS_TEST_TMPDIR/original"
  [ "$(file_mode "$HOME/.kube/config")" = 600 ]
  run kubectl config get-contexts -o name
  echo "$output"
  [ "$(sort <<<"$output" | tr '\n' ' ')" = "gpuprov-kc-flow prod " ]
  [ "$(kubectl config current-context)" = "gpuprov-kc-flow" ]
  [ "$(kubectl config view -o jsonpath='{.contexts[?(@.name=="prod")].context.namespace}')" = "123" ]
  run "$GPUPROV" down kc-flow
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"removed cluster, user and context gpuprov-kc-flow from $HOME/.kube/config"* ]]
  run kubectl config get-contexts -o name
  [ "$output" = "prod" ]
}

@test "kubeconfig of an unknown VM, or without a name, is a usage error" {
  run "$GPUPROV" kubeconfig "no-such-vm-$$"
  [ "$status" -eq 2 ]
  [[ "$output" == *"no VM named 'no-such-vm-$$'"* ]]
  run "$GPUPROV" kubeconfig
  [ "$status" -eq 2 ]
}
