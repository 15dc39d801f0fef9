#!/usr/bin/env bats
# End to end for `gpuprov tunnel`: the real binary forwarding a local port over real SSH to a test
# VM (tests/fixtures/testvm) whose "Kubernetes API" is a python3 HTTP server on the VM's own
# 127.0.0.1:6443. The VM records are written by hand (a VM with Kubernetes on that the docker
# cloud cannot make); the VM is a container of the test image on 127.89.1.2 (this file's address).
# Every test listens on a free high port, never 16443, so a user's own tunnel is left alone.

load helpers

VM_ADDR=127.89.1.2

setup_file() {
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  export VM="gpuprov-tunnel-e2e-$$"
  export K8S_NAME="tun-k8s-$$"
  export PLAIN_NAME="tun-plain-$$"
  mkdir -p "$BATS_FILE_TMPDIR/api"
  printf 'ok-from-node\n' >"$BATS_FILE_TMPDIR/api/readyz"
  # The node's API stand-in, on the node's loopback only (nothing is published but SSH).
  start_vm_with_loopback_server "$VM" "$VM_ADDR" tunnel-e2e "$BATS_FILE_TMPDIR/api" 6443

  write_record "$K8S_NAME" true tunnel
  write_record "$PLAIN_NAME" false none
}

teardown_file() {
  docker rm -f "$VM" >/dev/null 2>&1 || true
}

teardown() {
  # A tunnel a failed test left running.
  if [[ -n "${TUNNEL_PID:-}" ]]; then stop_child TERM "$TUNNEL_PID" || true; fi
}

# write_record NAME KUBERNETES ACCESS_MODE: the state record of a VM at $VM_ADDR:22.
write_record() {
  write_docker_record "$1" "$VM" "$VM_ADDR" "$2" "$3"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_tunnel PORT: runs `gpuprov tunnel $K8S_NAME --local-port PORT` in the background
# (TUNNEL_PID, stderr in TUNNEL_ERR) and waits until its forwarding line is printed.
start_tunnel() {
  TUNNEL_ERR="$BATS_TEST_TMPDIR/tunnel.err"
  "$GPUPROV" tunnel "$K8S_NAME" --local-port "$1" >"$BATS_TEST_TMPDIR/tunnel.out" 2>"$TUNNEL_ERR" 3>&- &
  TUNNEL_PID=$!
  local i
  for i in $(seq 1 100); do
    grep -q 'Ctrl-C to stop' "$TUNNEL_ERR" && return 0
    kill -0 "$TUNNEL_PID" 2>/dev/null || break
    sleep 0.2
  done
  cat "$TUNNEL_ERR"
  return 1
}

# stop_tunnel: Ctrl-C (SIGINT) to the tunnel; its exit status in TUNNEL_STATUS.
stop_tunnel() {
  stop_child INT "$TUNNEL_PID"
  TUNNEL_STATUS=0
  wait "$TUNNEL_PID" || TUNNEL_STATUS=$?
  TUNNEL_PID=
}

# curl_api PORT: GET /readyz through the tunnel, retried for up to 30 s.
curl_api() {
  local i
  for i in $(seq 1 30); do
    curl -fsS --max-time 5 "http://127.0.0.1:$1/readyz" 2>/dev/null && return 0
    sleep 1
  done
  return 1
}

@test "tunnel forwards a local port to the node's 127.0.0.1:6443 and Ctrl-C ends it with 0" {
  port=$(free_port)
  start_tunnel "$port"
  cat "$TUNNEL_ERR"
  grep -qF "forwarding 127.0.0.1:$port -> $K8S_NAME:6443; KUBECONFIG=$GPUPROV_HOME/kube/$K8S_NAME.yaml; Ctrl-C to stop" "$TUNNEL_ERR"
  run curl_api "$port"
  [ "$status" -eq 0 ]
  [ "$output" = "ok-from-node" ]
  # Several connections at once, as kubectl opens them.
  pids=()
  for i in 1 2 3; do
    curl -fsS --max-time 10 "http://127.0.0.1:$port/readyz" >"$BATS_TEST_TMPDIR/c$i" 3>&- &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  for i in 1 2 3; do [ "$(cat "$BATS_TEST_TMPDIR/c$i")" = "ok-from-node" ]; done
  stop_tunnel
  cat "$TUNNEL_ERR"
  [ "$TUNNEL_STATUS" -eq 0 ]
  grep -q 'tunnel stopped' "$TUNNEL_ERR"
}

@test "tunnel reconnects after the node's SSH session is killed and says so" {
  port=$(free_port)
  start_tunnel "$port"
  run curl_api "$port"
  [ "$output" = "ok-from-node" ]
  docker exec "$VM" pkill -f 'sshd: root'
  run curl_api "$port"
  cat "$TUNNEL_ERR"
  [ "$status" -eq 0 ]
  [ "$output" = "ok-from-node" ]
  grep -q 'dropped' "$TUNNEL_ERR"
  grep -q 'reconnected' "$TUNNEL_ERR"
  stop_tunnel
  [ "$TUNNEL_STATUS" -eq 0 ]
}

@test "a taken local port is refused with how to find the holder" {
  holder_out="$BATS_TEST_TMPDIR/holder"
  python3 -c '
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
print(s.getsockname()[1], flush=True)
time.sleep(60)
' >"$holder_out" 3>&- &
  holder=$!
  for _ in $(seq 1 50); do [ -s "$holder_out" ] && break; sleep 0.1; done
  port=$(cat "$holder_out")
  run "$GPUPROV" tunnel "$K8S_NAME" --local-port "$port"
  kill "$holder"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"error: 127.0.0.1:$port is already in use"* ]]
  [[ "$output" == *"ss -ltnp 'sport = :$port'"* ]]
  [[ "$output" == *"--local-port"* ]]
}

@test "tunnel to an unknown VM is a usage error that says how to see the names" {
  run "$GPUPROV" tunnel "no-such-vm-$$" --local-port "$(free_port)"
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"no VM named 'no-such-vm-$$'"* ]]
  [[ "$output" == *"gpuprov list"* ]]
}

@test "tunnel to a VM with Kubernetes off is refused before anything listens" {
  port=$(free_port)
  run "$GPUPROV" tunnel "$PLAIN_NAME" --local-port "$port"
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"has Kubernetes off"* ]]
  [[ "$output" == *"gpuprov ssh $PLAIN_NAME"* ]]
}

@test "--local-port takes only a port number" {
  run "$GPUPROV" tunnel "$K8S_NAME" --local-port 70000
  [ "$status" -eq 2 ]
  [[ "$output" == *"--local-port must be a port number from 1 to 65535, not '70000'"* ]]
  run "$GPUPROV" tunnel "$K8S_NAME" --local-port http
  [ "$status" -eq 2 ]
  run "$GPUPROV" tunnel --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"--local-port N"* ]]
}
