#!/usr/bin/env bats
# A VM stopped and started on a cloud without a static address comes back at a new public
# address (issue 32, finding F11f: installer/README.md, "After a reboot"). The EC2 emulator's StopInstances/StartInstances do
# what EC2 does without an Elastic IP (a new public IPv4 at start; docker backend: a new
# loopback address, same container); `aws ec2` on this machine calls them. gpuprov's commands
# that connect to the VM (ssh, kubeconfig, ttl, tunnel) ask the cloud when the recorded address
# does not answer and follow the new one: record, pinned host key, API certificate, kubeconfig.

load helpers

setup_file() {
  export_emulated_cloud_credentials addr
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  printf '[defaults.timeouts]\nssh_wait_seconds = 180\napi_wait_seconds = 120\n' \
    >"$GPUPROV_HOME/config.toml"
  start_emulator emu --backend docker --clouds aws
}

teardown_file() {
  stop_emulators
}

setup() { use_emulator emu; }

teardown() {
  end_docker_test
}

# ec2 ARGS...: the AWS CLI against the EC2 emulator.
ec2() {
  NO_PROXY=127.0.0.1 no_proxy=127.0.0.1 aws --endpoint-url "$GPUPROV_AWS_ENDPOINT" --region us-east-1 \
    --output text ec2 "$@"
}

instance_state() { ec2 describe-instances --instance-ids "$1" --query 'Reservations[0].Instances[0].State.Name'; }
is_state() { [ "$(instance_state "$1")" = "$2" ]; }
public_ip() { ec2 describe-instances --instance-ids "$1" --query 'Reservations[0].Instances[0].PublicIpAddress'; }
record_field() { /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$GPUPROV_HOME/state/$1.json" "$2"; }

# node_ready KUBECONFIG: kubectl (TLS verified) lists the node Ready.
node_ready() { KUBECONFIG="$1" kubectl get nodes | grep -q " Ready "; }

# stop_and_start ID: StopInstances, wait for stopped, StartInstances, wait for running.
stop_and_start() {
  ec2 stop-instances --instance-ids "$1" >/dev/null
  wait_for 60 is_state "$1" stopped
  ec2 start-instances --instance-ids "$1" >/dev/null
  wait_for 60 is_state "$1" running
}

@test "after a stop and start at a new address, ssh, kubeconfig with kubectl and ttl follow it (direct access)" {
  run "$GPUPROV" provision --name ac --cloud aws --gpus L4:1
  echo "$output"
  [ "$status" -eq 0 ]
  local id old new ctr kc
  id=$(record_field ac vm_id)
  id=${id#*/} # the record keeps REGION/ID
  old=$(record_field ac public_ip)
  ctr=$(docker ps -q --filter label=io.gpuprov.emulator.name=ac)
  stop_and_start "$id"
  new=$(public_ip "$id")
  echo "address: $old -> $new"
  [ -n "$new" ] && [ "$new" != "$old" ]
  # The same VM (same container: same disk and host key), booted again.
  [ "$(docker ps -q --filter label=io.gpuprov.emulator.name=ac)" = "$ctr" ]

  run "$GPUPROV" ssh ac -- hostname
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"ac's address changed from $old to $new (the VM was restarted); kubeconfig and certificate updated"* ]]
  [ "$(record_field ac public_ip)" = "$new" ]
  grep -q "^$new " "$GPUPROV_HOME/known_hosts"
  ! grep -q "^$old " "$GPUPROV_HOME/known_hosts"

  kc="$BATS_TEST_TMPDIR/kubeconfig"
  "$GPUPROV" kubeconfig ac >"$kc"
  [ "$(KUBECONFIG=$kc kubectl config view -o jsonpath='{.clusters[0].cluster.server}')" = "https://$new:6443" ]
  # kubectl verifies the API certificate against the new address; the node is Ready again
  # once k3s, restarted by the installer's re-run, reports it.
  wait_for 60 node_ready "$kc"

  run "$GPUPROV" ttl ac 2h
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"powers itself off at"* ]]
  [[ "$output" != *"address changed"* ]] # followed once

  # Again, the kubeconfig command first: it follows too.
  stop_and_start "$id"
  new2=$(public_ip "$id")
  [ "$new2" != "$new" ]
  # (not `run`: the printed kubeconfig holds key material, which the output scan refuses)
  "$GPUPROV" kubeconfig ac >"$kc" 2>"$BATS_TEST_TMPDIR/said"
  cat "$BATS_TEST_TMPDIR/said"
  grep -qF "ac's address changed from $new to $new2 (the VM was restarted); kubeconfig and certificate updated" "$BATS_TEST_TMPDIR/said"
  grep -qF "server: https://$new2:6443" "$kc"
  wait_for 60 node_ready "$GPUPROV_HOME/kube/ac.yaml"

  "$GPUPROV" down ac
  expect_nothing_left aws
}

@test "a stopped VM: ssh says so instead of waiting on a dead address" {
  run "$GPUPROV" provision --name as --cloud aws --no-k8s
  [ "$status" -eq 0 ]
  local id
  id=$(record_field as vm_id)
  id=${id#*/}
  ec2 stop-instances --instance-ids "$id" >/dev/null
  wait_for 60 is_state "$id" stopped
  run "$GPUPROV" ssh as -- true
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" == *"VM as does not answer at "*": the VM is stopped, not running on aws"* ]]
  # A plain VM started again: ssh follows with the record and the host key only.
  ec2 start-instances --instance-ids "$id" >/dev/null
  wait_for 60 is_state "$id" running
  run "$GPUPROV" ssh as -- true
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"the record and the pinned SSH host key follow"* ]]
  "$GPUPROV" down as
  expect_nothing_left aws
}
