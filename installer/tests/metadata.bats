#!/usr/bin/env bats
# The public IP from the cloud metadata service (a local file tree here: nothing leaves 127.0.0.0/8).

load helpers

setup() {
  common_setup
  META="$BATS_TEST_TMPDIR/meta"
  mkdir -p "$META"
}
teardown() { common_teardown; }

# meta_file PATH VALUE: the local metadata server answers PATH with VALUE.
meta_file() { mkdir -p "$(dirname "$META/$1")"; printf '%s\n' "$2" >"$META/$1"; }

@test "EC2-style metadata (no token service, IMDSv1 path) gives the public IP" {
  meta_file latest/meta-data/public-ipv4 203.0.113.20
  start_http_server "$META"
  GPUPROV_METADATA_URL="$HTTP_URL" run "$INSTALLER"
  [ "$status" -eq 0 ]
  [[ "$output" == *"public address from the metadata service: 203.0.113.20"* ]]
  grep -qx '  - "203.0.113.20"' "$SANDBOX/etc/rancher/k3s/config.yaml"
  grep -q -- "-X PUT .*$HTTP_URL/latest/api/token" "$CURL_LOG"
}

@test "EC2 IMDSv2: token first, then the public IP with the token" {
  start_port_server "$REAL_PYTHON" -u "$BATS_TEST_DIRNAME/imds_server.py" 203.0.113.23
  GPUPROV_METADATA_URL="http://127.0.0.1:$SERVER_PORT" run "$INSTALLER"
  [ "$status" -eq 0 ]
  grep -qx '  - "203.0.113.23"' "$SANDBOX/etc/rancher/k3s/config.yaml"
  grep -q 'X-aws-ec2-metadata-token: fake-imds-token' "$CURL_LOG"
}

@test "GCE-style metadata gives the public IP, asked with Metadata-Flavor: Google" {
  meta_file computeMetadata/v1/instance/network-interfaces/0/access-configs/0/external-ip 203.0.113.21
  start_http_server "$META"
  run "$INSTALLER" --metadata-url "$HTTP_URL/"
  [ "$status" -eq 0 ]
  grep -qx '  - "203.0.113.21"' "$SANDBOX/etc/rancher/k3s/config.yaml"
  grep -q 'Metadata-Flavor: Google' "$CURL_LOG"
}

@test "DigitalOcean-style metadata gives the public IP" {
  meta_file metadata/v1/interfaces/public/0/ipv4/address 203.0.113.22
  start_http_server "$META"
  GPUPROV_METADATA_URL="$HTTP_URL" run "$INSTALLER"
  [ "$status" -eq 0 ]
  grep -qx '  - "203.0.113.22"' "$SANDBOX/etc/rancher/k3s/config.yaml"
}

@test "a metadata answer that is not an IPv4 address is ignored" {
  meta_file latest/meta-data/public-ipv4 '<html>captive portal</html>'
  start_http_server "$META"
  GPUPROV_METADATA_URL="$HTTP_URL" run "$INSTALLER"
  [ "$status" -eq 0 ]
  [ "$(status '.tls_san | join(",")')" = 127.0.0.1 ]
  [ "$(status .public_ip)" = null ]
}

@test "--public-ip wins and the metadata service is not asked" {
  meta_file latest/meta-data/public-ipv4 203.0.113.20
  start_http_server "$META"
  GPUPROV_METADATA_URL="$HTTP_URL" run "$INSTALLER" --public-ip 198.51.100.1
  [ "$status" -eq 0 ]
  grep -qx '  - "198.51.100.1"' "$SANDBOX/etc/rancher/k3s/config.yaml"
  refute grep -q 203.0.113.20 "$SANDBOX/etc/rancher/k3s/config.yaml"
  [ ! -s "$CURL_LOG" ]
}

@test "nothing listening: one quick refused request, then 127.0.0.1 only" {
  SECONDS=0
  run "$INSTALLER"
  [ "$status" -eq 0 ]
  [ "$SECONDS" -lt 30 ] # refused at once; the rest is this machine's load
  [[ "$output" == *"does not answer"* ]]
  [ "$(wc -l <"$CURL_LOG")" -eq 1 ]
  [ "$(status '.tls_san | join(",")')" = 127.0.0.1 ]
  [ "$(status .public_ip)" = null ]
}

@test "--public-ip-source openstack: Nova's EC2-compatible path without a token gives the floating IP" {
  meta_file latest/meta-data/public-ipv4 203.0.113.30
  start_http_server "$META" # answers the token PUT with 501, as a service without IMDSv2 would
  GPUPROV_METADATA_URL="$HTTP_URL" run "$INSTALLER" --public-ip-source openstack
  [ "$status" -eq 0 ]
  [[ "$output" == *"public address from the metadata service: 203.0.113.30"* ]]
  grep -qx '  - "203.0.113.30"' "$SANDBOX/etc/rancher/k3s/config.yaml"
  refute grep -q computeMetadata "$CURL_LOG"
}

@test "--public-ip-source gce asks only the GCE path" {
  meta_file computeMetadata/v1/instance/network-interfaces/0/access-configs/0/external-ip 203.0.113.31
  meta_file latest/meta-data/public-ipv4 203.0.113.99
  start_http_server "$META"
  GPUPROV_METADATA_URL="$HTTP_URL" run "$INSTALLER" --public-ip-source gce
  [ "$status" -eq 0 ]
  grep -qx '  - "203.0.113.31"' "$SANDBOX/etc/rancher/k3s/config.yaml"
  refute grep -q latest/ "$CURL_LOG"
}

@test "--public-ip-source nebius: IMDS network-data with Metadata: true gives the public IP" {
  meta_file v1/network-data '{"network_interfaces": [{"name": "eth0",
    "ip_address": {"address": "10.0.0.7/32"}, "public_ip_address": {"address": "203.0.113.32/32"}}]}'
  start_http_server "$META"
  GPUPROV_METADATA_URL="$HTTP_URL" run "$INSTALLER" --public-ip-source nebius
  [ "$status" -eq 0 ]
  [[ "$output" == *"public address from the metadata service: 203.0.113.32"* ]]
  grep -qx '  - "203.0.113.32"' "$SANDBOX/etc/rancher/k3s/config.yaml"
  grep -q -- "-H Metadata: true $HTTP_URL/v1/network-data" "$CURL_LOG"
  refute grep -q computeMetadata "$CURL_LOG"
}

@test "--public-ip-source nebius: no public address in network-data, then the GCE-compatible path" {
  meta_file v1/network-data '{"network_interfaces": [{"ip_address": {"address": "10.0.0.7/32"}}]}'
  meta_file computeMetadata/v1/instance/network-interfaces/0/access-configs/0/external-ip 203.0.113.33
  start_http_server "$META"
  GPUPROV_METADATA_URL="$HTTP_URL" run "$INSTALLER" --public-ip-source nebius
  [ "$status" -eq 0 ]
  grep -qx '  - "203.0.113.33"' "$SANDBOX/etc/rancher/k3s/config.yaml"
}

# fake_ip LINE...: `ip -4 -o addr show scope global` prints the LINEs.
fake_ip() {
  { printf '#!/bin/sh\ncat <<"LINES"\n'; printf '%s\n' "$@"; printf 'LINES\n'; } >"$SPY_DIR/ip"
  chmod +x "$SPY_DIR/ip"
}

@test "--public-ip-source interface: the global address that is not private, no metadata asked" {
  fake_ip '1: lo    inet 169.254.169.254/32 scope global lo' \
    '2: eth0    inet 10.0.0.5/24 brd 10.0.0.255 scope global eth0' \
    '2: eth0    inet 100.64.3.4/10 scope global eth0' \
    '3: eth1    inet 203.0.113.34/24 brd 203.0.113.255 scope global eth1'
  run "$INSTALLER" --public-ip-source interface
  [ "$status" -eq 0 ]
  [[ "$output" == *"public address from a network interface: 203.0.113.34"* ]]
  grep -qx '  - "203.0.113.34"' "$SANDBOX/etc/rancher/k3s/config.yaml"
  [ ! -s "$CURL_LOG" ]
}

@test "--public-ip-source interface: only private addresses (NAT), so none is known" {
  fake_ip '2: eth0    inet 10.0.0.5/24 brd 10.0.0.255 scope global eth0' \
    '3: eth1    inet 172.20.1.2/16 scope global eth1'
  run "$INSTALLER" --public-ip-source interface
  [ "$status" -eq 0 ]
  [[ "$output" == *"no public address known"* ]]
  [ "$(status '.tls_san | join(",")')" = 127.0.0.1 ]
}

@test "--public-ip-source none: nothing asked, and the log says why" {
  run "$INSTALLER" --public-ip-source none
  [ "$status" -eq 0 ]
  [[ "$output" == *"the cloud tells no VM its public address"* ]]
  [ ! -s "$CURL_LOG" ]
  [ "$(status .public_ip)" = null ]
}

@test "--public-ip-source takes only the sources it knows" {
  run "$INSTALLER" --public-ip-source azure
  [ "$status" -eq 2 ]
  [[ "$output" == *"--public-ip-source: 'azure'?"* ]]
}

# node_addresses: the k3s address lines of the config written.
node_addresses() { grep -E '^node-(external-)?ip:' "$SANDBOX/etc/rancher/k3s/config.yaml" || true; }

@test "--node-ip metadata (DigitalOcean): node-ip the private address, node-external-ip the public one" {
  meta_file metadata/v1/interfaces/public/0/ipv4/address 203.0.113.40
  meta_file metadata/v1/interfaces/private/0/ipv4/address 10.0.0.40
  start_http_server "$META"
  GPUPROV_METADATA_URL="$HTTP_URL" run "$INSTALLER" --cluster-nodes 3 --public-ip-source digitalocean --node-ip metadata
  [ "$status" -eq 0 ]
  [[ "$output" == *"k3s addresses from the metadata service: '10.0.0.40' '203.0.113.40'"* ]]
  [ "$(node_addresses)" = $'node-ip: "10.0.0.40"\nnode-external-ip: "203.0.113.40"' ]
  grep -qx '  - "203.0.113.40"' "$SANDBOX/etc/rancher/k3s/config.yaml"
}

@test "--node-ip metadata (EC2): local-ipv4 and public-ipv4" {
  meta_file latest/meta-data/public-ipv4 203.0.113.41
  meta_file latest/meta-data/local-ipv4 172.31.5.41
  start_http_server "$META"
  GPUPROV_METADATA_URL="$HTTP_URL" run "$INSTALLER" --cluster-nodes 3 --public-ip-source ec2 --node-ip metadata
  [ "$status" -eq 0 ]
  [ "$(node_addresses)" = $'node-ip: "172.31.5.41"\nnode-external-ip: "203.0.113.41"' ]
}

@test "--node-ip metadata (GCE): network-interfaces/0/ip and the access config's external IP" {
  meta_file computeMetadata/v1/instance/network-interfaces/0/access-configs/0/external-ip 203.0.113.42
  meta_file computeMetadata/v1/instance/network-interfaces/0/ip 10.128.0.42
  start_http_server "$META"
  GPUPROV_METADATA_URL="$HTTP_URL" run "$INSTALLER" --cluster-nodes 3 --public-ip-source gce --node-ip metadata
  [ "$status" -eq 0 ]
  [ "$(node_addresses)" = $'node-ip: "10.128.0.42"\nnode-external-ip: "203.0.113.42"' ]
  grep -q 'Metadata-Flavor: Google' "$CURL_LOG"
}

@test "--node-ip metadata (Nebius): network-data's ip_address and public_ip_address" {
  meta_file v1/network-data '{"network_interfaces": [{"name": "eth0",
    "ip_address": {"address": "10.0.0.43/32"}, "public_ip_address": {"address": "203.0.113.43/32"}}]}'
  start_http_server "$META"
  GPUPROV_METADATA_URL="$HTTP_URL" run "$INSTALLER" --cluster-nodes 3 --public-ip-source nebius --node-ip metadata
  [ "$status" -eq 0 ]
  [ "$(node_addresses)" = $'node-ip: "10.0.0.43"\nnode-external-ip: "203.0.113.43"' ]
}

@test "--node-ip metadata without a private address: node-ip the public one, no external one" {
  meta_file metadata/v1/interfaces/public/0/ipv4/address 203.0.113.44
  start_http_server "$META"
  GPUPROV_METADATA_URL="$HTTP_URL" run "$INSTALLER" --cluster-nodes 3 --public-ip-source digitalocean --node-ip metadata
  [ "$status" -eq 0 ]
  [ "$(node_addresses)" = 'node-ip: "203.0.113.44"' ]
}

@test "--node-ip metadata with no metadata service: no address lines, k3s chooses (gpuprov re-runs)" {
  GPUPROV_METADATA_URL="http://127.0.0.1:9" run "$INSTALLER" --cluster-nodes 3 --public-ip-source digitalocean --node-ip metadata
  [ "$status" -eq 0 ]
  [ -z "$(node_addresses)" ]
}

@test "metadata is a value of --node-ip only" {
  run "$INSTALLER" --node-external-ip metadata
  [ "$status" -eq 2 ]
  [[ "$output" == *"--node-external-ip: not an IP address: 'metadata'"* ]]
}
