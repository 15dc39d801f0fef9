#!/usr/bin/env bats
# --node-firewall ssh-only in a real test VM (tests/fixtures/testvm: systemd, cloud-init, nft,
# iptables, the k3s simulator listening on 0.0.0.0:6443), installed at boot by cloud-init as the
# boot route does. Probed from this machine at the VM's Docker bridge address (no port is
# published; the VM is our own container, so no traffic leaves the machine): SSH answers, 6443, 80
# and 443 do not, while they answer on the VM's loopback; a second run changes nothing; after
# `docker restart` the rules are back before k3s; the iptables fallback does the same. Needs docker
# and the image: runs only with GPUPROV_INSTALLER_VM_TESTS=1, like testvm.bats.

load vm_helpers

setup_file() {
  [[ "${GPUPROV_INSTALLER_VM_TESTS:-0}" == 1 ]] || return 0
  REPO="$BATS_TEST_DIRNAME/../.."
  IMAGE="${GPUPROV_TESTVM_IMAGE:-$(bash "$REPO/tests/fixtures/testvm/build-image.sh" --print-tag)}"
  VM="gpuprov-installer-fw-$$"
  export IMAGE VM
  seed="$BATS_FILE_TMPDIR/seed"
  mkdir -p "$seed/var/lib/cloud/seed/nocloud" "$seed/root"
  printf 'instance-id: i-installer-fw\nlocal-hostname: fw1\n' >"$seed/var/lib/cloud/seed/nocloud/meta-data"
  cat >"$seed/var/lib/cloud/seed/nocloud/user-data" <<'UD'
#!/bin/bash
exec /root/gpuprov-install.sh --public-ip 127.91.0.3 --no-metadata --toolkit skip --node-firewall ssh-only
UD
  install -m 0755 "$BATS_TEST_DIRNAME/../gpuprov-install.sh" "$seed/root/gpuprov-install.sh"
  # Stand-ins for an ingress on 80 and 443 (any address), started at boot like k3s's would be.
  mkdir -p "$seed/etc/systemd/system/multi-user.target.wants"
  for port in 80 443; do
    printf '[Service]\nExecStart=/usr/bin/python3 -m http.server %s --bind 0.0.0.0 --directory /etc/gpuprov-testvm\n' \
      "$port" >"$seed/etc/systemd/system/fake-ingress-$port.service"
    printf '[Install]\nWantedBy=multi-user.target\n' >>"$seed/etc/systemd/system/fake-ingress-$port.service"
    ln -s "../fake-ingress-$port.service" "$seed/etc/systemd/system/multi-user.target.wants/"
  done
  start_vm fw1 "$seed" var root etc
}


vm_ip() { docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$VM"; }

# ssh_answers: the VM's sshd sends its banner to this machine.
ssh_answers() {
  timeout 5 bash -c "exec 3<>/dev/tcp/$(vm_ip)/22 && head -c 4 <&3" 2>/dev/null | grep -q '^SSH-'
}

# closed_from_here PORT: a TCP connection from this machine to the VM's PORT does not open within
# 2 s (dropped: curl exit 28; refused would be 7 and means nothing filters).
closed_from_here() {
  local rc=0
  curl -sk --connect-timeout 2 --max-time 4 -o /dev/null "https://$(vm_ip):$1/" || rc=$?
  echo "port $1: curl exit $rc"
  [ "$rc" -eq 28 ]
}

# open_from_here PORT: an HTTP(S) answer from the VM's PORT reaches this machine.
open_from_here() {
  local scheme=https
  [ "$1" != 80 ] || scheme=http
  [ "$1" != 443 ] || scheme=http
  curl -sk --connect-timeout 2 --max-time 4 -o /dev/null "$scheme://$(vm_ip):$1/"
}

# open_on_loopback: 6443 (k3s's /ping), 80 and 443 answer on the VM's own 127.0.0.1.
open_on_loopback() {
  [ "$(vm curl -sk --max-time 5 https://127.0.0.1:6443/ping)" = pong ]
  vm curl -fs --max-time 5 -o /dev/null http://127.0.0.1:80/
  vm curl -fs --max-time 5 -o /dev/null http://127.0.0.1:443/
}

# firewall_before_k3s: gpuprov-firewall finished before k3s started (this boot's monotonic times).
firewall_before_k3s() {
  local fw k3s
  fw=$(vm systemctl show -p ExecMainExitTimestampMonotonic --value gpuprov-firewall)
  k3s=$(vm systemctl show -p ExecMainStartTimestampMonotonic --value k3s)
  echo "firewall exited at $fw, k3s started at $k3s"
  [ "$fw" -gt 0 ] && [ "$k3s" -gt "$fw" ]
}

@test "vm: the boot run applies the nft firewall before k3s: SSH answers from outside, 6443/80/443 do not, loopback does" {
  wait_for 240 sh -c 'cloud-init status | grep -qE "status: (done|error)"'
  vm cloud-init status --long || true
  vm grep -q '"result": "ok"' /var/lib/gpuprov/install-status.json
  vm grep -q '"node_firewall": "ssh-only (nft)"' /var/lib/gpuprov/install-status.json
  vm systemctl is-active gpuprov-firewall k3s
  vm nft list table inet gpuprov
  wait_for 60 sh -c 'ss -ltn | grep -q ":443 "'
  run firewall_before_k3s
  echo "$output"
  [ "$status" -eq 0 ]
  ssh_answers
  for port in 6443 80 443 10250; do closed_from_here "$port"; done
  open_on_loopback
  # Without the rules the same ports answer from here: the test sees the firewall, not a setup
  # where nothing was reachable anyway. Then the installer puts them back.
  vm sh /etc/gpuprov/node-firewall.sh stop
  refute_nft_table
  open_from_here 6443
  open_from_here 80
  open_from_here 443
  run vm /root/gpuprov-install.sh --public-ip 127.91.0.3 --no-metadata --toolkit skip --node-firewall ssh-only
  echo "$output"
  [ "$status" -eq 0 ]
  closed_from_here 6443
  closed_from_here 80
  ssh_answers
}

refute_nft_table() {
  if vm nft list table inet gpuprov >/dev/null 2>&1; then
    echo "table inet gpuprov still there" >&2
    return 1
  fi
}

@test "vm: a second run changes nothing (same table, no k3s restart)" {
  before=$(vm nft -a list tables | grep 'inet gpuprov')
  starts_before=$(vm systemctl show -p NRestarts,ExecMainStartTimestampMonotonic k3s)
  run vm /root/gpuprov-install.sh --public-ip 127.91.0.3 --no-metadata --toolkit skip --node-firewall ssh-only
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"node firewall unchanged: ssh-only (nft)"* ]]
  [[ "$output" == *"k3s running with the current config: no restart"* ]]
  [ "$(vm nft -a list tables | grep 'inet gpuprov')" = "$before" ]
  [ "$(vm systemctl show -p NRestarts,ExecMainStartTimestampMonotonic k3s)" = "$starts_before" ]
  vm grep -q '"phase": "done"' /var/lib/gpuprov/install-status.json
}

@test "vm: --peers-only applies a new peer set by a reload: k3s, which Requires the unit, keeps running" {
  starts_before=$(vm systemctl show -p NRestarts,ExecMainStartTimestampMonotonic k3s)
  run vm /root/gpuprov-install.sh --peers-only --peer 10.0.0.9
  echo "$output"
  [ "$status" -eq 0 ]
  vm nft list table inet gpuprov | grep -q '10.0.0.9'
  [ "$(vm systemctl show -p NRestarts,ExecMainStartTimestampMonotonic k3s)" = "$starts_before" ]
  vm systemctl is-active --quiet k3s
  run vm /root/gpuprov-install.sh --peers-only
  [ "$status" -eq 0 ]
  [ -z "$(vm nft list table inet gpuprov | grep '10.0.0.9')" ]
}

@test "vm: after docker restart the rules are back before k3s starts" {
  docker restart "$VM" >/dev/null
  wait_for 180 systemctl is-active k3s
  vm systemctl is-active gpuprov-firewall
  vm nft list table inet gpuprov
  run firewall_before_k3s
  echo "$output"
  [ "$status" -eq 0 ]
  for _ in $(seq 1 60); do ssh_answers && break; sleep 1; done
  ssh_answers
  wait_for 60 sh -c 'curl -sk --max-time 2 https://127.0.0.1:6443/ping | grep -q pong'
  closed_from_here 6443
  closed_from_here 443
  open_on_loopback
}

@test "vm: without nft the iptables fallback closes the same ports, idempotently; stop removes it" {
  vm sh /etc/gpuprov/node-firewall.sh stop
  vm mv /usr/sbin/nft /usr/sbin/nft.hidden
  run vm /root/gpuprov-install.sh --public-ip 127.91.0.3 --no-metadata --toolkit skip --node-firewall ssh-only
  vm mv /usr/sbin/nft.hidden /usr/sbin/nft
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"node firewall applied: ssh-only (iptables)"* ]]
  vm iptables -w -t mangle -S GPUPROV
  vm ip6tables -w -t mangle -S GPUPROV
  ssh_answers
  closed_from_here 6443
  closed_from_here 80
  open_on_loopback
  # Applied again (as at every boot): still one jump per family, the chain rebuilt, not doubled.
  vm sh /etc/gpuprov/node-firewall.sh
  [ "$(vm sh -c 'iptables -w -t mangle -S PREROUTING | grep -c GPUPROV')" -eq 1 ]
  [ "$(vm sh -c 'ip6tables -w -t mangle -S PREROUTING | grep -c GPUPROV')" -eq 1 ]
  [ "$(vm sh -c 'iptables -w -t mangle -S GPUPROV | grep -c -- "-j DROP"')" -eq 1 ]
  vm sh /etc/gpuprov/node-firewall.sh stop
  refute_chain() { ! vm iptables -w -t mangle -S GPUPROV >/dev/null 2>&1; }
  refute_chain
  open_from_here 6443
  # Back to nft, as a later run finds it.
  run vm /root/gpuprov-install.sh --public-ip 127.91.0.3 --no-metadata --toolkit skip --node-firewall ssh-only
  [ "$status" -eq 0 ]
  [[ "$output" == *"node firewall applied: ssh-only (nft)"* ]]
  closed_from_here 6443
}
