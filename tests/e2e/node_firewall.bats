#!/usr/bin/env bats
# Tunnel access really is the only way in (issue 13). Prime Intellect has no firewall API, and its
# emulator (docker backend) forwards every port the node listens on to the VM's address, as the
# real cloud exposes it: the installer's node firewall (--node-firewall ssh-only, passed because
# the driver lacks GPUPROV_CAP_OPEN_PORTS) is what closes 6443, and gpuprov checks that from this
# machine. DigitalOcean (direct access, a cloud firewall in front) is unchanged: 6443 answers.

load helpers

setup_file() {
  start_docker_clouds nodefw digitalocean,primeintellect
}

teardown_file() {
  stop_emulators
}

setup() {
  use_emulator emu
}

teardown() {
  end_docker_test
}

@test "tunnel access (Prime Intellect): 6443 is closed at the VM's address, kubectl works through gpuprov tunnel" {
  run "$GPUPROV" -v provision --name nf-pi --cloud primeintellect --gpus H100:1
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(field nf-pi access)" = tunnel ]
  [[ "$output" == *"checking that the API is closed at "*":6443 from this machine"* ]]
  [[ "$(field nf-pi probe.api_at_public_address)" == "closed: "* ]]
  local ip
  ip=$(field nf-pi address)
  [[ "$ip" == 127.* ]]
  run api_ping "$ip"
  echo "curl: $status $output"
  [ "$status" -ne 0 ]
  [ "$output" != pong ]
  # The node's own firewall did it: nft table, boot unit, status marker.
  run "$GPUPROV" ssh nf-pi -- nft list table inet gpuprov
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"tcp dport 22 accept"* ]]
  run "$GPUPROV" ssh nf-pi -- systemctl is-enabled gpuprov-firewall
  [ "$output" = enabled ]
  run "$GPUPROV" ssh nf-pi -- cat /var/lib/gpuprov/install-status.json
  [[ "$output" == *'"node_firewall": "ssh-only (nft)"'* ]]
  # kubectl through the tunnel (a free port, not 16443).
  run nodes_through_tunnel nf-pi
  echo "$output"
  [ "$status" -eq 0 ]

  # Without the node's rules the emulator exposes 6443 as the real cloud would, and gpuprov
  # refuses the cluster: a re-run fails naming the open address and the fix; the VM is kept.
  run "$GPUPROV" ssh nf-pi -- sh /etc/gpuprov/node-firewall.sh stop
  [ "$status" -eq 0 ]
  run api_ping "$ip"
  [ "$output" = pong ]
  run "$GPUPROV" provision --name nf-pi --cloud primeintellect --gpus H100:1
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"the Kubernetes API of nf-pi is open to the internet at $ip:6443"* ]]
  [[ "$output" == *"--node-firewall ssh-only"* ]]
  [[ "$output" == *"gpuprov down nf-pi"* ]]
  [ "$(field nf-pi phase)" = failed ]
  # The fix the hint gives closes it again, and the re-run then passes.
  run "$GPUPROV" ssh nf-pi -- bash /var/lib/gpuprov/gpuprov-install.sh --node-firewall ssh-only
  [ "$status" -eq 0 ]
  run api_ping "$ip"
  [ "$output" != pong ]
  run "$GPUPROV" provision --name nf-pi --cloud primeintellect --gpus H100:1
  echo "$output"
  [ "$status" -eq 0 ]
  run "$GPUPROV" down nf-pi
  [ "$status" -eq 0 ]
  expect_nothing_left primeintellect
}

@test "direct access (DigitalOcean) is unchanged: 6443 answers at the VM's address, no node firewall" {
  run "$GPUPROV" provision --name nf-do --cloud digitalocean --gpus H100:1
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(field nf-do access)" = direct ]
  local ip
  ip=$(field nf-do address)
  run api_ping "$ip"
  [ "$output" = pong ]
  run "$GPUPROV" ssh nf-do -- 'nft list tables; test -e /etc/gpuprov/node-firewall.sh && echo script; cat /var/lib/gpuprov/install-status.json'
  echo "$output"
  [[ "$output" != *gpuprov-firewall* ]]
  [[ "$output" != *"inet gpuprov"* ]]
  [[ "$output" != *script* ]]
  [[ "$output" == *'"node_firewall": null'* ]]
  run "$GPUPROV" down nf-do
  [ "$status" -eq 0 ]
  expect_nothing_left digitalocean
}
