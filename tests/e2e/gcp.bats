#!/usr/bin/env bats
# gpuprov on Google Compute Engine, through the emulator (tests/emulators/gce_api.cc) with the
# service-account key it issues (OAuth2: a signed JWT exchanged for a token).
# - docker backend: a real test VM; a gpuprov killed while creating it, the re-run that finds
#   it by name under API throttling, SSH as the user of the ssh-keys metadata, list, down.
# - memory backend: the faults that end before SSH (capacity in every zone, quota, a key the
#   emulator did not issue, an instance vanishing while it boots), each with a clear message
#   and nothing left behind (the emulator's /counts).
# Kubernetes is off (--no-k8s).

load helpers

# start_emulator NAME BACKEND: gpuprov-emulator serving gcp only; its key is written to
# $BATS_FILE_TMPDIR/NAME-key.json (GOOGLE_APPLICATION_CREDENTIALS names a missing file).
start_emulator() {
  local name=$1 backend=$2
  GOOGLE_APPLICATION_CREDENTIALS="$BATS_FILE_TMPDIR/$name-key.json" \
    "$BUILD_DIR/bin/gpuprov-emulator" --backend "$backend" --clouds gcp --boot-seconds 1 \
    >"$BATS_FILE_TMPDIR/$name.out" 2>"$BATS_FILE_TMPDIR/$name.err" 3>&- &
  echo $! >"$BATS_FILE_TMPDIR/$name.pid"
  for _ in $(seq 1 100); do
    grep -q '^control ' "$BATS_FILE_TMPDIR/$name.out" && return 0
    sleep 0.2
  done
  cat "$BATS_FILE_TMPDIR/$name.err" >&2
  return 1
}

stop_emulator() {
  local pid
  pid=$(cat "$BATS_FILE_TMPDIR/$1.pid" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

setup_file() {
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  printf '[defaults.timeouts]\nssh_wait_seconds = 180\n' >"$GPUPROV_HOME/config.toml"
  start_emulator docker docker
  start_emulator memory memory
}

teardown_file() {
  stop_emulator docker
  stop_emulator memory
}

# use BACKEND: point gpuprov at that emulator (endpoint, key, control URL).
use() {
  GPUPROV_GCP_ENDPOINT=$(awk '$1=="gcp"{print $2}' "$BATS_FILE_TMPDIR/$1.out")
  CONTROL=$(awk '$1=="control"{print $2}' "$BATS_FILE_TMPDIR/$1.out")
  GOOGLE_APPLICATION_CREDENTIALS="$BATS_FILE_TMPDIR/$1-key.json"
  export GPUPROV_GCP_ENDPOINT CONTROL GOOGLE_APPLICATION_CREDENTIALS
  curl -fsS -X DELETE "$CONTROL/faults" >/dev/null
}

teardown() {
  for backend in docker memory; do
    control=$(awk '$1=="control"{print $2}' "$BATS_FILE_TMPDIR/$backend.out")
    curl -fsS -X POST "$control/reset" -d '{}' >/dev/null || true
  done
  rm -f "$GPUPROV_HOME"/state/*.json
}

count() {
  curl -fsS "$CONTROL/counts?cloud=gcp" | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"
}

# Nothing left in the API (instances, firewall rules) or behind it (containers).
expect_nothing_left() {
  for _ in $(seq 1 60); do
    if [ "$(count instances)" -eq 0 ] && [ "$(count backend_instances)" -eq 0 ] &&
      [ "$(count firewalls)" -eq 0 ]; then
      return 0
    fi
    sleep 0.5
  done
  curl -fsS "$CONTROL/counts?cloud=gcp" >&2
  return 1
}

fault() {
  curl -fsS -X POST "$CONTROL/faults" -d "$1" >/dev/null
}

@test "gcp: a killed provision is found by name on re-run under throttling; ssh, list and down leave nothing" {
  use docker
  "$GPUPROV" provision --name gce-vm --cloud gcp --gpus L4:1 --no-k8s 3>&- &
  pid=$!
  for _ in $(seq 1 150); do
    [ "$(count instances)" -eq 1 ] && break
    sleep 0.2
  done
  [ "$(count instances)" -eq 1 ]
  kill -9 "$pid"
  wait "$pid" || true
  # API rate limits on the re-run: 429 with Retry-After, then 403 rateLimitExceeded (backoff).
  fault '{"cloud":"gcp","fault":"throttle","times":2,"retry_after":1,"path":"/compute/"}'
  fault '{"cloud":"gcp","fault":"throttle","times":2,"status":403,"path":"/compute/"}'
  run "$GPUPROV" provision --name gce-vm --cloud gcp --gpus L4:1 --no-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"reusing existing VM gce-vm"* ]]
  [[ "$output" == *"user ubuntu"* ]]
  [ "$(count instances)" -eq 1 ]
  [ "$(count firewalls)" -eq 1 ]
  curl -fsS "$CONTROL/requests?cloud=gcp" | grep -q '"status":429'
  curl -fsS "$CONTROL/requests?cloud=gcp" | grep -q '"status":403'
  run "$GPUPROV" ssh gce-vm -- sh -c 'whoami; nvidia-smi -L'
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"ubuntu"* ]]
  [[ "$output" == *"NVIDIA L4"* ]]
  run "$GPUPROV" list --output json
  echo "$output" | /usr/bin/python3 -c '
import json, sys
vm = [v for v in json.load(sys.stdin) if v["name"] == "gce-vm"][0]
assert vm["cloud"] == "gcp" and vm["state"] == "running", vm
assert vm["address"].startswith("127.90."), vm'
  # Neither the private key nor an access token reaches gpuprov's output or files.
  run "$GPUPROV" -v list
  [[ "$output" != *"PRIVATE KEY"* && "$output" != *"ya29."* ]]
  ! grep -rqE 'PRIVATE KEY|ya29\.' "$GPUPROV_HOME"
  run "$GPUPROV" down gce-vm
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"deleting firewall rule gpuprov-gce-vm"* ]]
  expect_nothing_left
}

@test "gcp: no capacity in any zone of the region: a clear message, no VM, no firewall rule, no state" {
  use memory
  fault '{"cloud":"gcp","fault":"capacity","times":-1}'
  run "$GPUPROV" provision --name gce-cap --cloud gcp --gpus L4:1 --region us-central1 --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"no capacity for g2-standard-4 in us-central1-a, us-central1-b, us-central1-c"* ]]
  [[ "$output" == *"ZONE_RESOURCE_POOL_EXHAUSTED"* ]]
  [ ! -e "$GPUPROV_HOME/state/gce-cap.json" ]
  expect_nothing_left
}

@test "gcp: quota from the insert operation: the metric is named and nothing is left" {
  use memory
  fault '{"cloud":"gcp","fault":"quota"}'
  run "$GPUPROV" provision --name gce-quota --cloud gcp --gpus L4:1 --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"QUOTA_EXCEEDED"* && "$output" == *"NVIDIA_L4_GPUS"* ]]
  [[ "$output" == *"quota"* ]]
  [ ! -e "$GPUPROV_HOME/state/gce-quota.json" ]
  expect_nothing_left
}

@test "gcp: a key the emulator did not issue is refused at the token endpoint before anything is made" {
  use memory
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$BATS_TEST_TMPDIR/other.pem" 2>/dev/null
  /usr/bin/python3 - "$GOOGLE_APPLICATION_CREDENTIALS" "$BATS_TEST_TMPDIR/other.pem" \
    >"$BATS_TEST_TMPDIR/other.json" <<'EOF'
import json, sys
key = json.load(open(sys.argv[1]))
key["private_key"] = open(sys.argv[2]).read()
print(json.dumps(key))
EOF
  GOOGLE_APPLICATION_CREDENTIALS="$BATS_TEST_TMPDIR/other.json" \
    run "$GPUPROV" provision --name gce-auth --cloud gcp --gpus L4:1 --no-k8s
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" == *"Invalid JWT Signature"* ]]
  [[ "$output" == *"GOOGLE_APPLICATION_CREDENTIALS"* ]]
  [[ "$output" != *"PRIVATE KEY"* ]]
  [ ! -e "$GPUPROV_HOME/state/gce-auth.json" ]
  expect_nothing_left
}

@test "gcp: an instance that vanishes while booting: a clear message, and nothing is left" {
  use memory
  fault '{"cloud":"gcp","fault":"vanish_during_boot"}'
  run "$GPUPROV" provision --name gce-gone --cloud gcp --gpus L4:1 --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"disappeared while it was being created"* ]]
  expect_nothing_left
  run "$GPUPROV" down gce-gone --cloud gcp
  [ "$status" -eq 0 ]
  expect_nothing_left
}
