#!/usr/bin/env bats
# What k3s's own install.sh leaves on a node and users rely on: k3s-killall.sh, k3s-uninstall.sh,
# the unit's k3s.service.env with the proxy settings, kubectl/crictl/ctr links whatever the route.

load helpers

setup() { common_setup; }
teardown() { common_teardown; }

@test "the air-gap route (k3s already there) links kubectl, crictl and ctr too; existing ones kept" {
  printf '#!/bin/sh\n' >"$SANDBOX/usr/local/bin/ctr"
  # The machine's own commands but kubectl, crictl and ctr: only the sandbox counts.
  bin="$BATS_TEST_TMPDIR/bin"
  mkdir -p "$bin"
  for f in /usr/local/bin/* /usr/bin/* /bin/* /usr/sbin/* /sbin/*; do
    case "${f##*/}" in kubectl | crictl | ctr) ;; *) ln -sf "$f" "$bin/" ;; esac
  done
  export PATH="$SPY_DIR:$FAKES:$bin"
  refute command -v kubectl
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  [ "$(readlink "$SANDBOX/usr/local/bin/kubectl")" = k3s ]
  [ "$(readlink "$SANDBOX/usr/local/bin/crictl")" = k3s ]
  [ ! -L "$SANDBOX/usr/local/bin/ctr" ]
}

@test "k3s-killall.sh and k3s-uninstall.sh: 0755, valid sh, and uninstall removes gpuprov's files" {
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  for f in k3s-killall.sh k3s-uninstall.sh; do
    [ "$(stat -c %a "$SANDBOX/usr/local/bin/$f")" = 755 ]
    sh -n "$SANDBOX/usr/local/bin/$f"
    shellcheck -s sh -e SC2046 "$SANDBOX/usr/local/bin/$f"
  done
  u="$SANDBOX/usr/local/bin/k3s-uninstall.sh"
  grep -q '^/usr/local/bin/k3s-killall.sh$' "$u"
  for path in /etc/rancher/k3s /var/lib/rancher/k3s /var/lib/gpuprov /etc/gpuprov /usr/local/bin/k3s \
    /etc/apt/apt.conf.d/51gpuprov-nvidia-hold; do
    grep -q " $path " "$u"
  done
  grep -q 'rm -f k3s.service k3s.service.env gpuprov-firewall.service gpuprov-ttl' "$u"
  grep -q "systemctl stop k3s" "$SANDBOX/usr/local/bin/k3s-killall.sh"
  # A second run rewrites nothing.
  run "$INSTALLER"
  refute grep -q 'wrote k3s-' <(sed -n '/run '"$(status .pid)"'/p' "$SANDBOX/var/log/gpuprov-install.log")
}

@test "the proxy settings the installer ran with go to k3s.service.env (0600), read by the unit" {
  HTTPS_PROXY=http://127.0.0.1:3128 NO_PROXY=127.0.0.1,10.42.0.0/16 CONTAINERD_HTTP_PROXY=http://127.0.0.1:3129 \
    run "$INSTALLER"
  [ "$status" -eq 0 ]
  env_file="$SANDBOX/etc/systemd/system/k3s.service.env"
  [ "$(stat -c %a "$env_file")" = 600 ]
  grep -qx 'HTTPS_PROXY=http://127.0.0.1:3128' "$env_file"
  grep -qx 'NO_PROXY=127.0.0.1,10.42.0.0/16' "$env_file"
  grep -qx 'CONTAINERD_HTTP_PROXY=http://127.0.0.1:3129' "$env_file"
  grep -qx 'EnvironmentFile=-/etc/systemd/system/k3s.service.env' "$SANDBOX/etc/systemd/system/k3s.service"
  [ "$(k3s_starts)" -eq 1 ]
  # A run without proxies (sudo over SSH drops them) keeps the file and k3s as they are.
  run "$INSTALLER"
  grep -qx 'HTTPS_PROXY=http://127.0.0.1:3128' "$env_file"
  [ "$(k3s_starts)" -eq 1 ]
  # New proxy settings: the file changes and k3s restarts once to read them.
  HTTPS_PROXY=http://127.0.0.1:3130 run "$INSTALLER"
  grep -qx 'HTTPS_PROXY=http://127.0.0.1:3130' "$env_file"
  [ "$(k3s_starts)" -eq 2 ]
}

@test "no proxies: no k3s.service.env; one from k3s's own installer is kept as it is" {
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  [ ! -e "$SANDBOX/etc/systemd/system/k3s.service.env" ]
  printf 'K3S_TOKEN=abc\nHTTP_PROXY=http://127.0.0.1:8\n' >"$SANDBOX/etc/systemd/system/k3s.service.env"
  HTTP_PROXY=http://127.0.0.1:9 run "$INSTALLER"
  [ "$status" -eq 0 ]
  [ "$(cat "$SANDBOX/etc/systemd/system/k3s.service.env")" = $'K3S_TOKEN=abc\nHTTP_PROXY=http://127.0.0.1:8' ]
  grep -q 'k3s.service.env was not written by gpuprov: kept' "$SANDBOX/var/log/gpuprov-install.log"
}

@test "a k3s unit from get.k3s.io keeps its server flags; the ones gpuprov sets stay gpuprov's" {
  # The unit as k3s's install.sh writes it: one single-quoted word a line after `server`.
  mkdir -p "$SANDBOX/etc/systemd/system"
  printf '%s\n' '[Service]' 'Type=notify' 'ExecStart=/usr/local/bin/k3s \' '    server \' \
    "	'--disable' \\" "	'traefik' \\" "	'--node-label=gpu=yes' \\" "	'--tls-san' \\" \
    "	'k3s.example.org' \\" "	'--write-kubeconfig-mode' \\" "	'644' \\" "	'-c' \\" \
    "	'/etc/k3s-other.yaml' \\" "	'--default-runtime=runc' \\" "	'--kubelet-arg' \\" \
    "	'max-pods=250' \\" '' 'Restart=always' >"$SANDBOX/etc/systemd/system/k3s.service"
  run "$INSTALLER" --public-ip 203.0.113.9
  echo "$output"
  [ "$status" -eq 0 ]
  unit="$SANDBOX/etc/systemd/system/k3s.service"
  want="ExecStart=/usr/local/bin/k3s server '--disable' 'traefik' '--node-label=gpu=yes' '--tls-san' 'k3s.example.org' '--kubelet-arg' 'max-pods=250'"
  grep -qx "$want" "$unit"
  grep -q '^# Written by gpuprov-install' "$unit"
  # k3s adds a command line's --tls-san to config.yaml's; the kubeconfig mode, the runtime and
  # the config file stay gpuprov's (a flag would replace config.yaml's value, -c the whole file).
  grep -qx 'write-kubeconfig-mode: "0600"' "$SANDBOX/etc/rancher/k3s/config.yaml"
  [ "$(stat -c %a "$SANDBOX/var/lib/gpuprov/k3s-kept-flags")" = 600 ]
  grep -q 'kept the k3s server flags of /etc/systemd/system/k3s.service' "$SANDBOX/var/log/gpuprov-install.log"
  [ "$(k3s_starts)" -eq 1 ]
  # A second run reads gpuprov's own unit: the same flags, nothing rewritten, no restart.
  run "$INSTALLER" --public-ip 203.0.113.9
  [ "$status" -eq 0 ]
  grep -qx "$want" "$unit"
  [ "$(k3s_starts)" -eq 1 ]
}

@test "a k3s unit that runs no k3s server (an agent) keeps nothing; gpuprov's unit has no flags" {
  mkdir -p "$SANDBOX/etc/systemd/system"
  printf '[Service]\nExecStart=/usr/local/bin/k3s agent --server https://10.0.0.1:6443\n' \
    >"$SANDBOX/etc/systemd/system/k3s.service"
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  grep -qx 'ExecStart=/usr/local/bin/k3s server' "$SANDBOX/etc/systemd/system/k3s.service"
  [ ! -s "$SANDBOX/var/lib/gpuprov/k3s-kept-flags" ]
}
