#!/usr/bin/env bats
# --node-firewall ssh-only on a sandboxed root with the fake systemctl: which script and unit are
# written (nft first, iptables when nft is missing), that the firewall is applied before k3s
# starts, that a second run changes nothing, and the refusals. firewall_vm.bats applies the same
# rules in a real test VM and probes them from outside.

load helpers

setup() {
  common_setup
  NODE_FW="$SANDBOX/etc/gpuprov/node-firewall.sh"
  FW_UNIT="$SANDBOX/etc/systemd/system/gpuprov-firewall.service"
}
teardown() { common_teardown; }

# with_nft: an `nft` on PATH (the installer only looks for it; systemd runs the script).
with_nft() { install -m 0755 /dev/null "$SPY_DIR/nft"; }

# without_sbin CMD...: CMD with a PATH that has neither nft nor iptables (they live in /usr/sbin).
without_sbin() { PATH="$SPY_DIR:$FAKES:/usr/bin:/bin" "$@"; }

# line_of PATTERN: the first line number of the fake systemctl's calls.log matching PATTERN.
line_of() { grep -n -m1 -E "$1" "$FAKE_SYSTEMCTL_DIR/calls.log" | cut -d: -f1; }

@test "without --node-firewall nothing of the firewall is written or started" {
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  [ ! -e "$NODE_FW" ]
  [ ! -e "$FW_UNIT" ]
  refute grep -q gpuprov-firewall "$FAKE_SYSTEMCTL_DIR/calls.log"
  [ "$(status .node_firewall)" = null ]
  refute grep -q 'step firewall' "$SANDBOX/var/log/gpuprov-install.log"
}

@test "a bad --node-firewall value is a usage error (exit 2) and changes nothing" {
  run "$INSTALLER" --node-firewall open
  [ "$status" -eq 2 ]
  [[ "$output" == *"--node-firewall: ssh-only, got 'open'"* ]]
  [ ! -e "$SANDBOX/etc" ]
  [ ! -e "$FAKE_SYSTEMCTL_DIR/calls.log" ]
}

@test "ssh-only with nft: one atomic nft script and a boot unit before k3s, applied before k3s starts" {
  with_nft
  run "$INSTALLER" --node-firewall ssh-only
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(stat -c %a "$NODE_FW")" = 755 ]
  # One `nft -f` transaction: create-or-keep, delete, define; only SSH is let in from outside.
  grep -q "echo 'table inet gpuprov'; echo 'delete table inet gpuprov'" "$NODE_FW"
  grep -q '| nft -f -$' "$NODE_FW"
  grep -qx '    type filter hook prerouting priority mangle; policy accept;' "$NODE_FW"
  grep -qx '    tcp dport 22 accept' "$NODE_FW"
  grep -qx '    iif lo accept' "$NODE_FW"
  grep -qx '    counter drop' "$NODE_FW"
  # The accepts come before the drop.
  [ "$(grep -n 'tcp dport 22 accept' "$NODE_FW" | cut -d: -f1)" -lt "$(grep -n 'counter drop' "$NODE_FW" | cut -d: -f1)" ]
  refute grep -q iptables "$NODE_FW"
  grep -qx 'ExecStart=/bin/sh /etc/gpuprov/node-firewall.sh' "$FW_UNIT"
  # Applied again by a reload: a restart would restart k3s too (RequiredBy).
  grep -qx 'ExecReload=/bin/sh /etc/gpuprov/node-firewall.sh' "$FW_UNIT"
  grep -qx 'Before=network-pre.target k3s.service' "$FW_UNIT"
  grep -qx 'RequiredBy=k3s.service' "$FW_UNIT"
  grep -qx 'WantedBy=sysinit.target' "$FW_UNIT"
  grep -qx 'DefaultDependencies=no' "$FW_UNIT"
  # Enabled and applied, before k3s is started.
  cat "$FAKE_SYSTEMCTL_DIR/calls.log"
  [ -n "$(line_of ' enable gpuprov-firewall')" ]
  [ "$(line_of ' reload-or-restart gpuprov-firewall')" -lt "$(line_of ' start k3s')" ]
  [ "$(status .node_firewall)" = "ssh-only (nft)" ]
  grep -q 'step firewall' "$SANDBOX/var/log/gpuprov-install.log"
  [[ "$output" == *"node firewall applied: ssh-only (nft)"* ]]
}

@test "a second run changes nothing: no firewall restart, no k3s restart" {
  with_nft
  run "$INSTALLER" --node-firewall ssh-only
  [ "$status" -eq 0 ]
  cp -p "$NODE_FW" "$BATS_TEST_TMPDIR/fw.before"
  run "$INSTALLER" --node-firewall ssh-only
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"node firewall unchanged: ssh-only (nft)"* ]]
  [ "$(grep -c ' reload-or-restart gpuprov-firewall' "$FAKE_SYSTEMCTL_DIR/calls.log")" -eq 1 ]
  [ "$(k3s_starts)" -eq 1 ]
  # Not rewritten (cp -p kept the mtime).
  [ "$(stat -c %Y "$NODE_FW")" = "$(stat -c %Y "$BATS_TEST_TMPDIR/fw.before")" ]
  [ "$(status .node_firewall)" = "ssh-only (nft)" ]
}

@test "an inactive firewall unit, or rules that are gone while it is active, are applied again" {
  with_nft
  run "$INSTALLER" --node-firewall ssh-only
  [ "$status" -eq 0 ]
  rm "$FAKE_SYSTEMCTL_DIR/active.gpuprov-firewall"
  run "$INSTALLER" --node-firewall ssh-only
  [ "$status" -eq 0 ]
  [ "$(grep -c ' reload-or-restart gpuprov-firewall' "$FAKE_SYSTEMCTL_DIR/calls.log")" -eq 2 ]
  # `nft list table inet gpuprov` fails: someone flushed the ruleset.
  printf '#!/bin/sh\necho "$*" >>"%s/nft.log"\nexit 1\n' "$BATS_TEST_TMPDIR" >"$SPY_DIR/nft"
  run "$INSTALLER" --node-firewall ssh-only
  [ "$status" -eq 0 ]
  grep -qx 'list table inet gpuprov' "$BATS_TEST_TMPDIR/nft.log"
  [ "$(grep -c ' reload-or-restart gpuprov-firewall' "$FAKE_SYSTEMCTL_DIR/calls.log")" -eq 3 ]
  [ "$(k3s_starts)" -eq 1 ]
}

@test "without nft the script uses iptables-restore for IPv4 and IPv6, in the mangle table" {
  for t in iptables-restore ip6tables-restore; do install -m 0755 /dev/null "$SPY_DIR/$t"; done
  run without_sbin "$INSTALLER" --node-firewall ssh-only
  echo "$output"
  [ "$status" -eq 0 ]
  grep -q 'for t in iptables ip6tables; do' "$NODE_FW"
  grep -qF "\$t-restore -w -n" "$NODE_FW"
  grep -q "'-p tcp --dport 22'" "$NODE_FW"
  grep -q "echo '-A GPUPROV -j DROP'" "$NODE_FW"
  refute grep -q 'nft -f' "$NODE_FW"
  [ "$(status .node_firewall)" = "ssh-only (iptables)" ]
}

@test "neither nft nor iptables: the firewall step fails naming the package, and k3s is not started" {
  run without_sbin "$INSTALLER" --node-firewall ssh-only
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "${lines[-1]}" == *"failed step: firewall: --node-firewall needs nft (package nftables) or iptables"* ]]
  [ "$(status .failed_step)" = firewall ]
  [ "$(k3s_starts)" -eq 0 ]
  [ ! -e "$SANDBOX/etc/systemd/system/k3s.service" ]
}

@test "a firewall that does not apply stops the install before k3s starts" {
  with_nft
  mkdir -p "$FAKE_SYSTEMCTL_DIR"
  touch "$FAKE_SYSTEMCTL_DIR/fail-start"
  run "$INSTALLER" --node-firewall ssh-only
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "${lines[-1]}" == *"failed step: firewall: the node firewall did not apply; look at 'journalctl -u gpuprov-firewall'"* ]]
  [ "$(k3s_starts)" -eq 0 ]
  [ "$(status .result)" = failed ]
}

# nft_check SCRIPT: runs the node firewall script with an `nft` that only checks (`nft -c`),
# when this machine's nft can check at all (root); else skips.
nft_check() {
  printf 'table inet gpuprov_probe\n' | /usr/sbin/nft -c -f - 2>/dev/null || skip "nft -c needs root here"
  mkdir -p "$BATS_TEST_TMPDIR/check"
  printf '#!/bin/sh\nexec /usr/sbin/nft -c "$@"\n' >"$BATS_TEST_TMPDIR/check/nft"
  chmod +x "$BATS_TEST_TMPDIR/check/nft"
  PATH="$BATS_TEST_TMPDIR/check:$PATH" sh "$1"
}

@test "peers: nft admits exactly the peers, on 6443/tcp, 10250/tcp, 51820/udp (+51821/udp IPv6)" {
  with_nft
  run "$INSTALLER" --node-firewall ssh-only --peer 10.0.0.3 --peer 10.0.0.4 --peer fd00::5
  echo "$output"
  [ "$status" -eq 0 ]
  cat "$NODE_FW"
  grep -qx '    ip saddr { 10.0.0.3,10.0.0.4 } tcp dport { 6443, 10250 } accept' "$NODE_FW"
  grep -qx '    ip saddr { 10.0.0.3,10.0.0.4 } udp dport 51820 accept' "$NODE_FW"
  grep -qx '    ip6 saddr { fd00::5 } tcp dport { 6443, 10250 } accept' "$NODE_FW"
  grep -qx '    ip6 saddr { fd00::5 } udp dport { 51820, 51821 } accept' "$NODE_FW"
  # Nothing else new: the accepts are those of ssh-only plus these four, all before the drop.
  [ "$(grep -c 'accept$' "$NODE_FW")" -eq 11 ]
  [ "$(grep -n 'counter drop' "$NODE_FW" | cut -d: -f1)" -gt "$(grep -n '51821' "$NODE_FW" | cut -d: -f1)" ]
  nft_check "$NODE_FW"
  [ "$(cat "$SANDBOX/etc/gpuprov/node-firewall.peers")" = "$(printf '10.0.0.3\n10.0.0.4\nfd00::5')" ]
}

@test "--peers-only rewrites only the peer set: no unit change, no daemon-reload, no k3s restart, marker kept" {
  with_nft
  run "$INSTALLER" --node-firewall ssh-only --peer 10.0.0.3
  [ "$status" -eq 0 ]
  cp -p "$FW_UNIT" "$BATS_TEST_TMPDIR/unit.before"
  cp "$SANDBOX/var/lib/gpuprov/install-status.json" "$BATS_TEST_TMPDIR/marker.before"
  calls_before="$(wc -l <"$FAKE_SYSTEMCTL_DIR/calls.log")"
  run "$INSTALLER" --peers-only --peer 10.0.0.3 --peer 10.0.0.7
  echo "$output"
  [ "$status" -eq 0 ]
  grep -qx '    ip saddr { 10.0.0.3,10.0.0.7 } tcp dport { 6443, 10250 } accept' "$NODE_FW"
  [ "$(stat -c %Y "$FW_UNIT")" = "$(stat -c %Y "$BATS_TEST_TMPDIR/unit.before")" ]
  new_calls="$(tail -n +"$((calls_before + 1))" "$FAKE_SYSTEMCTL_DIR/calls.log")"
  echo "$new_calls"
  [[ "$new_calls" == *" reload-or-restart gpuprov-firewall"* ]]
  [[ "$new_calls" != *daemon-reload* ]]
  [[ "$new_calls" != *k3s* ]]
  cmp "$SANDBOX/var/lib/gpuprov/install-status.json" "$BATS_TEST_TMPDIR/marker.before"
  # Idempotent: the same set again restarts nothing.
  run "$INSTALLER" --peers-only --peer 10.0.0.3 --peer 10.0.0.7
  [ "$status" -eq 0 ]
  [[ "$output" == *"node firewall unchanged"* ]]
  [ "$(grep -c ' reload-or-restart gpuprov-firewall' "$FAKE_SYSTEMCTL_DIR/calls.log")" -eq 2 ]
  # No peers left: their rules go, ssh-only stays.
  run "$INSTALLER" --peers-only
  [ "$status" -eq 0 ]
  refute grep -q 'saddr { 10.0.0' "$NODE_FW"
  grep -qx '    tcp dport 22 accept' "$NODE_FW"
  nft_check "$NODE_FW"
}

@test "an install without --peer keeps the peer set in force; an agent's unit orders the firewall before k3s-agent" {
  with_nft
  run "$INSTALLER" --role agent --node-firewall ssh-only --peer 10.0.0.2
  [ "$status" -eq 0 ]
  grep -qx 'Before=network-pre.target k3s-agent.service' "$FW_UNIT"
  grep -qx 'RequiredBy=k3s-agent.service' "$FW_UNIT"
  run "$INSTALLER" --role agent --node-firewall ssh-only
  [ "$status" -eq 0 ]
  [[ "$output" == *"node firewall unchanged"* ]]
  grep -qx '    ip saddr { 10.0.0.2 } udp dport 51820 accept' "$NODE_FW"
}

@test "peers with iptables: RETURN for the peers' ports per family, before the DROP" {
  for t in iptables-restore ip6tables-restore; do install -m 0755 /dev/null "$SPY_DIR/$t"; done
  run without_sbin "$INSTALLER" --node-firewall ssh-only --peer 10.0.0.3 --peer 10.0.0.4 --peer fd00::5
  echo "$output"
  [ "$status" -eq 0 ]
  grep -qx 'p4=10.0.0.3,10.0.0.4 p6=fd00::5' "$NODE_FW"
  # What the script feeds iptables-restore per family.
  mkdir -p "$BATS_TEST_TMPDIR/ipt"
  for t in iptables ip6tables; do
    printf '#!/bin/sh\ncat >"%s/%s.rules"\n' "$BATS_TEST_TMPDIR/ipt" "$t" >"$BATS_TEST_TMPDIR/ipt/$t-restore"
    printf '#!/bin/sh\nexit 0\n' >"$BATS_TEST_TMPDIR/ipt/$t"
  done
  chmod +x "$BATS_TEST_TMPDIR/ipt/"*
  PATH="$BATS_TEST_TMPDIR/ipt:$PATH" sh "$NODE_FW"
  cat "$BATS_TEST_TMPDIR/ipt/"*.rules
  v4="$BATS_TEST_TMPDIR/ipt/iptables.rules" v6="$BATS_TEST_TMPDIR/ipt/ip6tables.rules"
  grep -qx -- '-A GPUPROV -s 10.0.0.3,10.0.0.4 -p tcp -m multiport --dports 6443,10250 -j RETURN' "$v4"
  grep -qx -- '-A GPUPROV -s 10.0.0.3,10.0.0.4 -p udp -m multiport --dports 51820 -j RETURN' "$v4"
  grep -qx -- '-A GPUPROV -s fd00::5 -p tcp -m multiport --dports 6443,10250 -j RETURN' "$v6"
  grep -qx -- '-A GPUPROV -s fd00::5 -p udp -m multiport --dports 51820,51821 -j RETURN' "$v6"
  [ "$(grep -n 'multiport --dports 51820' "$v4" | cut -d: -f1)" -lt "$(grep -n -- '-j DROP' "$v4" | cut -d: -f1)" ]
  [ "$(grep -c -- '-s 10.0.0' "$v4")" -eq 2 ]
  refute grep -q -- '-s fd00' "$v4"
}
