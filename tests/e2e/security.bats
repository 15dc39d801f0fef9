#!/usr/bin/env bats
# Security checks as tests (issue 15):
# - the shared hook of helpers.bash (wrapping bats' `run`) that scans every gpuprov command's
#   output, the state records and `list --output json` of every e2e file for the test
#   credentials and key material, and checks file modes under GPUPROV_HOME: shown here to fail
#   on a planted leak and a planted loose mode, so it cannot pass vacuously;
# - a host key that changes between runs (the test VM's keys regenerated) is refused by
#   provision and ssh, naming the way to accept the change, which then works.
# The installer's sha256 verification of downloads is tested in installer/tests/download.bats.

load helpers

setup_file() {
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  export HK_NAME="hk-$$"
  remove_vm_containers "$HK_NAME"
}

teardown_file() {
  remove_vm_containers "$HK_NAME"
}

@test "security hook: a credential, key material or a loose mode fails the checks; clean passes" {
  export DIGITALOCEAN_TOKEN="dop_v1_security_$$_token"
  run "$GPUPROV" version
  [ "$status" -eq 0 ]
  security_checks "$GPUPROV" version # clean

  output="error: token $DIGITALOCEAN_TOKEN refused"
  if security_checks "$GPUPROV" provision --name x 2>"$BATS_TEST_TMPDIR/err"; then
    echo "a leaked token passed" >&2
    return 1
  fi
  grep -q 'DIGITALOCEAN_TOKEN' "$BATS_TEST_TMPDIR/err"

  output=$'-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA'
  if security_checks "$GPUPROV" list 2>/dev/null; then
    echo "a private key block passed" >&2
    return 1
  fi
  output='users: [{user: {client-key-data: LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0t}}]'
  if security_checks "$GPUPROV" list 2>/dev/null; then
    echo "kubeconfig client-key-data passed" >&2
    return 1
  fi
  # gpuprov ssh prints the node's output: not scanned.
  security_checks "$GPUPROV" ssh x -- cat key

  output=""
  mkdir -p "$GPUPROV_HOME/state"
  chmod 700 "$GPUPROV_HOME" "$GPUPROV_HOME/state"
  echo '{}' >"$GPUPROV_HOME/state/planted.json"
  chmod 644 "$GPUPROV_HOME/state/planted.json"
  if security_checks "$GPUPROV" list 2>"$BATS_TEST_TMPDIR/err"; then
    rm -f "$GPUPROV_HOME/state/planted.json"
    echo "a 0644 state file passed" >&2
    return 1
  fi
  rm -f "$GPUPROV_HOME/state/planted.json"
  grep -q 'want 600' "$BATS_TEST_TMPDIR/err"
}

@test "host key: a VM whose host key changed is refused with how to accept the change" {
  run "$GPUPROV" provision --name "$HK_NAME" --cloud docker --no-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  run "$GPUPROV" ssh "$HK_NAME" -- true
  [ "$status" -eq 0 ]

  # The VM's host keys regenerated (as a reinstall, or someone in between, would present).
  local ctr
  ctr=$(docker ps -q --filter "label=io.gpuprov.managed=1" --filter "label=io.gpuprov.name=$HK_NAME")
  [ -n "$ctr" ]
  docker exec "$ctr" sh -c 'rm -f /etc/ssh/ssh_host_*; ssh-keygen -A >/dev/null; systemctl restart ssh || systemctl restart sshd'

  run "$GPUPROV" ssh "$HK_NAME" -- true
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" == *"host key for "*" changed (was SHA256:"*", now SHA256:"*"refusing to connect"* ]]
  [[ "$output" == *"this may be an attack"* ]]
  [[ "$output" == *"ssh-keygen"*"-R"* ]]

  run "$GPUPROV" provision --name "$HK_NAME" --cloud docker --no-k8s
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" == *"changed (was SHA256:"*"refusing to connect"* ]]

  # Accepting the change as the message says: the command it names, then SSH works again.
  local forget
  forget=$(grep -oE "ssh-keygen [^\`]*-R [^\`]*" <<<"$output" | head -1)
  [ -n "$forget" ]
  eval "$forget" >/dev/null 2>&1
  run "$GPUPROV" ssh "$HK_NAME" -- true
  echo "$output"
  [ "$status" -eq 0 ]

  run "$GPUPROV" down "$HK_NAME"
  [ "$status" -eq 0 ]
  [ "$(count_vm_containers "$HK_NAME")" -eq 0 ]
}
