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
