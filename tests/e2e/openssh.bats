#!/usr/bin/env bats
# End to end for gpuprov's OpenSSH semantics (issue 16, item 8): the words after `--` joined with
# spaces for the remote shell, `ssh NAME -L` forwarding to a listener on the VM, and
# `ssh-config NAME` read by the real OpenSSH client (`ssh -F`). The VM is a container of the test
# image (tests/fixtures/testvm) on 127.89.1.3 (this file's address) with a hand-written record,
# as in tunnel.bats; its HTTP listener is a python3 server on the VM's own 127.0.0.1.

load helpers

VM_ADDR=127.89.1.3

setup_file() {
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  export VM="gpuprov-openssh-e2e-$$"
  export NAME="ossh-$$"
  mkdir -p "$BATS_FILE_TMPDIR/web"
  printf 'hello-from-the-vm\n' >"$BATS_FILE_TMPDIR/web/index.txt"
  # A listener on the VM's own loopback (nothing is published but SSH): only -L reaches it.
  start_vm_with_loopback_server "$VM" "$VM_ADDR" openssh-e2e "$BATS_FILE_TMPDIR/web" 8000

  write_docker_record "$NAME" "$VM" "$VM_ADDR" false none
}

teardown_file() {
  docker rm -f "$VM" >/dev/null 2>&1 || true
}

teardown() {
  if [[ -n "${SSH_PID:-}" ]]; then kill "$SSH_PID" 2>/dev/null || true; fi
}

# get_through PORT: the listener's file through a forward on 127.0.0.1:PORT, retried for 20 s.
get_through() {
  local _
  for _ in $(seq 1 40); do
    curl -fsS --max-time 3 "http://127.0.0.1:$1/index.txt" 2>/dev/null && return 0
    sleep 0.5
  done
  return 1
}

@test "the words after -- go to the remote shell joined with spaces, as OpenSSH does" {
  run "$GPUPROV" ssh "$NAME" -- 'exit 7'
  echo "$output"
  [ "$status" -eq 7 ]
  run "$GPUPROV" ssh "$NAME" -- 'printf "a\nb\nc\n" | head -n 2'
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "$(printf 'a\nb')" ]
  # Several words: joined, then parsed by the remote shell ($HOME expands there).
  run "$GPUPROV" ssh "$NAME" -- echo one 'two  three' '$HOME'
  [ "$status" -eq 0 ]
  [ "$output" = "one two three /root" ]
  run "$GPUPROV" ssh "$NAME" -- 'uname -s | tr A-Z a-z; exit 3'
  [ "$status" -eq 3 ]
  [ "$output" = "linux" ]
}

@test "ssh -L forwards a local port to a listener on the VM's own loopback" {
  local port
  port=$(free_port)
  # Without the forward nothing answers there.
  run curl -fsS --max-time 2 "http://127.0.0.1:$port/index.txt"
  [ "$status" -ne 0 ]
  "$GPUPROV" ssh "$NAME" -L "$port:localhost:8000" -- 'sleep 60' </dev/null >/dev/null \
    2>"$BATS_TEST_TMPDIR/ssh.err" 3>&- &
  SSH_PID=$!
  run get_through "$port"
  cat "$BATS_TEST_TMPDIR/ssh.err"
  [ "$status" -eq 0 ]
  [ "$output" = "hello-from-the-vm" ]
  kill "$SSH_PID"
  SSH_PID=
  # -N: forward only (until killed), the same listener.
  port=$(free_port)
  "$GPUPROV" ssh "$NAME" -N -L "127.0.0.1:$port:127.0.0.1:8000" </dev/null >/dev/null \
    2>"$BATS_TEST_TMPDIR/ssh.err" 3>&- &
  SSH_PID=$!
  run get_through "$port"
  cat "$BATS_TEST_TMPDIR/ssh.err"
  [ "$status" -eq 0 ]
  [ "$output" = "hello-from-the-vm" ]
}

@test "a bad -L or -N without -L is a usage error naming the form, before any connection" {
  run "$GPUPROV" ssh "$NAME" -L 8888:localhost
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"-L '8888:localhost'"* ]]
  [[ "$output" == *"[BIND:]PORT:HOST:HOSTPORT"* ]]
  run "$GPUPROV" ssh "$NAME" -L 8888:localhost:99999 -- true
  [ "$status" -eq 2 ]
  [[ "$output" == *"the host port must be a port number from 1 to 65535, not '99999'"* ]]
  run "$GPUPROV" ssh "$NAME" -N
  [ "$status" -eq 2 ]
  [[ "$output" == *"-N forwards only"* ]]
}

@test "ssh-config prints a Host block that the real ssh -F uses with the pinned host key" {
  # gpuprov pins the host key on first contact.
  run "$GPUPROV" ssh "$NAME" -- true
  [ "$status" -eq 0 ]
  run "$GPUPROV" ssh-config "$NAME"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == "Host gpuprov-$NAME"* ]]
  [[ "$output" == *"  HostName $VM_ADDR"* ]]
  [[ "$output" == *"  Port 22"* ]]
  [[ "$output" == *"  User root"* ]]
  [[ "$output" == *"  IdentityFile $GPUPROV_HOME/keys/id_ed25519"* ]]
  [[ "$output" == *"  UserKnownHostsFile $GPUPROV_HOME/known_hosts"* ]]
  [[ "$output" == *"  StrictHostKeyChecking yes"* ]]
  "$GPUPROV" ssh-config "$NAME" >"$BATS_TEST_TMPDIR/ssh_config"
  run ssh -F "$BATS_TEST_TMPDIR/ssh_config" -o BatchMode=yes "gpuprov-$NAME" 'hostname; exit 5'
  echo "$output"
  [ "$status" -eq 5 ]
  [ "$output" = "vm1" ]
  # The pinned key is what makes it work: with another known_hosts ssh refuses the host.
  : >"$BATS_TEST_TMPDIR/empty_known_hosts"
  run ssh -F "$BATS_TEST_TMPDIR/ssh_config" -o BatchMode=yes \
    -o UserKnownHostsFile="$BATS_TEST_TMPDIR/empty_known_hosts" "gpuprov-$NAME" true
  [ "$status" -eq 255 ]
  [[ "$output" == *"Host key verification failed"* ]]
}

@test "ssh-config of an unknown VM is a usage error" {
  run "$GPUPROV" ssh-config "no-such-vm-$$"
  [ "$status" -eq 2 ]
  [[ "$output" == *"no VM named 'no-such-vm-$$'"* ]]
  run "$GPUPROV" ssh-config
  [ "$status" -eq 2 ]
}
