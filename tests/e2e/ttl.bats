#!/usr/bin/env bats
# TTL on the node (docs/ttl.md) with compressed times (the node's timer checks every second):
# - docker test cloud (real test VMs, systemd as PID 1): --ttl powers the VM off (its
#   container exits), `list` then shows it stopped and EXPIRED, gc lists it, `down --expired`
#   deletes it; `gpuprov ttl NAME 1h` extends past the old deadline, `--off` removes the timer;
#   --idle-ttl does not fire while an SSH session is open and fires once it has closed; after a
#   reboot (docker start of the powered-off VM) the idle clock starts afresh; `gpuprov ttl` on a
#   running node does not make systemd reload (journal: "systemd[1]: Reloading.").
# - DigitalOcean through the emulator's docker backend: the emulated API reports the VM that
#   powered itself off as `off` (plugins/digitalocean/REFERENCE.md §3.2), gpuprov shows it stopped
#   and EXPIRED, and `down --expired` leaves nothing on the cloud.
# - DigitalOcean with Kubernetes (boot route): the timer is set up by the boot script before
#   the installer, with the deadline gpuprov records.
# - AWS through the emulator's docker backend: gpuprov launches with
#   InstanceInitiatedShutdownBehavior=terminate, so the instance that powered itself off is
#   terminated (plugins/aws/REFERENCE.md §3.1: stateReason Client.InstanceInitiatedShutdown);
#   `gc --delete` then deletes the expired VM: its security group, key and record.

load helpers

setup_file() {
  export DIGITALOCEAN_TOKEN="dop_v1_e2e_$$_ttl_token"
  export AWS_ACCESS_KEY_ID="AKIAE2E$$TTLKEY0001"
  export AWS_SECRET_ACCESS_KEY="e2e/$$/ttl+secret+access+key"
  export AWS_REGION=us-east-1
  export HOME="$BATS_FILE_TMPDIR/userhome" # no ~/.aws of the machine's user
  mkdir -p "$HOME"
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  # The docker scope keeps `gc --cloud docker` to this file's containers.
  printf '[defaults.timeouts]\nssh_wait_seconds = 180\nttl_check_seconds = 1\n[clouds.docker]\nscope = "ttl-%s"\n' \
    "$$" >"$GPUPROV_HOME/config.toml"
  export TTL_A="ttl-a-$$" TTL_B="ttl-b-$$" TTL_C="ttl-c-$$"
  remove_vm_containers "$TTL_A" "$TTL_B" "$TTL_C"
  start_emulator emu --backend docker --clouds digitalocean,aws
}

teardown_file() {
  stop_emulators
  remove_vm_containers "$TTL_A" "$TTL_B" "$TTL_C"
}

# container_status NAME: the docker test cloud's container of VM NAME: running, exited, ...
container_status() {
  docker ps -a --filter "label=io.gpuprov.managed=1" --filter "label=io.gpuprov.name=$1" \
    --format '{{.State}}'
}

container_exited() { [ "$(container_status "$1")" = exited ]; }
vm_container() { docker ps -aq --filter "label=io.gpuprov.managed=1" --filter "label=io.gpuprov.name=$1"; }
# systemd_reloads NAME: how many times systemd in VM NAME reloaded (its journal line per reload).
systemd_reloads() {
  docker exec "$(vm_container "$1")" journalctl _PID=1 -o cat --no-pager | grep -cx 'Reloading\.' || true
}
idle_clock_running() { docker exec "$(vm_container "$1")" test -s /run/gpuprov/ttl-idle-since; }
listed_state() { [ "$(field "$1" state)" = "$2" ]; }
no_backend_instance() { [ "$(count "$1" backend_instances)" -eq 0 ]; }

@test "docker: --ttl powers the VM off at its deadline; list marks it; gc lists it; down --expired deletes it" {
  run "$GPUPROV" provision --name "$TTL_A" --cloud docker --ttl 12s
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"at the TTL the VM powers off; on docker a powered-off VM is no longer billed"* ]]
  [[ "$output" == *"ttl:     the VM powers itself off at "* ]]
  run "$GPUPROV" list --no-refresh
  echo "$output"
  [[ "${lines[0]}" == *" TTL" ]]
  [[ "${lines[1]}" =~ \ ([1-9]|1[0-2])s$ ]]
  [ "$(container_status "$TTL_A")" = running ]
  run "$GPUPROV" ssh "$TTL_A" -- 'systemctl is-active gpuprov-ttl.timer; cat /etc/gpuprov/ttl.conf'
  echo "$output"
  [[ "$output" == *"active"* && "$output" == *"deadline="[0-9]* ]]
  # The node powers itself off: systemd as PID 1 ends, and so does the container.
  wait_for 25 container_exited "$TTL_A"
  [ "$(docker inspect -f '{{.State.ExitCode}}' "$(docker ps -aq --filter "label=io.gpuprov.name=$TTL_A")")" -eq 0 ]
  run "$GPUPROV" list
  echo "$output"
  [[ "${lines[1]}" == *" stopped "*" EXPIRED" ]]
  [ "$(field "$TTL_A" expired)" = True ]
  run "$GPUPROV" gc --cloud docker
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"expired VMs"*"$TTL_A"*"expired "* ]]
  run "$GPUPROV" down --expired </dev/null
  [ "$status" -eq 2 ]
  [[ "$output" == *"needs --yes when stdin is not a terminal"*"$TTL_A"* ]]
  [ "$(count_vm_containers "$TTL_A")" -eq 1 ]
  run "$GPUPROV" down --expired --yes
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"removed VM $TTL_A from docker"* ]]
  [ "$(count_vm_containers "$TTL_A")" -eq 0 ]
  [ ! -e "$GPUPROV_HOME/state/$TTL_A.json" ]
  run "$GPUPROV" down --expired --yes
  [ "$status" -eq 0 ]
  [[ "$output" == *"no expired VMs"* ]]
}

@test "docker: gpuprov ttl NAME 1h extends past the old deadline; --off removes the timer" {
  run "$GPUPROV" provision --name "$TTL_B" --cloud docker --ttl 10s
  [ "$status" -eq 0 ]
  run "$GPUPROV" ttl "$TTL_B" 1h
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"powers itself off at "*"(in 59m"* ]]
  sleep 12 # past the first deadline, with the timer checking every second
  [ "$(container_status "$TTL_B")" = running ]
  # `gpuprov ttl` again, the timer units unchanged: no daemon-reload (on a node with running GPU
  # pods it would cut them off their GPUs).
  local reloads_before
  reloads_before=$(systemd_reloads "$TTL_B")
  run "$GPUPROV" ttl "$TTL_B" 1h
  [ "$status" -eq 0 ]
  [ "$(systemd_reloads "$TTL_B")" -eq "$reloads_before" ]
  run "$GPUPROV" list --no-refresh
  [[ "${lines[1]}" =~ \ 5[0-9]m[0-9]*s?$ ]]
  run "$GPUPROV" ttl "$TTL_B" --off
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"removed the TTL timer from VM $TTL_B"* ]]
  run "$GPUPROV" ssh "$TTL_B" -- 'systemctl is-active gpuprov-ttl.timer; ls /etc/gpuprov/ttl.conf /usr/local/sbin/gpuprov-ttl'
  echo "$output"
  [[ "$output" == *"inactive"* && "$output" == *"No such file"* ]]
  run "$GPUPROV" ttl "$TTL_B"
  [[ "$output" == *"has no TTL deadline"* ]]
  run "$GPUPROV" list --no-refresh
  [[ "${lines[1]}" == *" -" ]]
  run "$GPUPROV" ttl "$TTL_B" soon
  [ "$status" -eq 2 ]
  [[ "$output" == *"gpuprov ttl NAME DURATION: 'soon' is not a duration"* ]]
  run "$GPUPROV" down "$TTL_B" --yes
  [ "$status" -eq 0 ]
}

@test "docker: --idle-ttl waits while an SSH session is open and fires once it has closed" {
  run "$GPUPROV" provision --name "$TTL_C" --cloud docker --idle-ttl 8s
  echo "$output"
  [ "$status" -eq 0 ]
  "$GPUPROV" ssh "$TTL_C" -- sleep 13 3>&- &
  local session=$!
  sleep 11 # idle TTL 8 s, timer every second: it would have fired without the session
  echo "after 11 s with a session: $(container_status "$TTL_C")"
  [ "$(container_status "$TTL_C")" = running ]
  wait "$session"
  # Idle from here: the first idle check starts the clock, 8 s later the VM powers off.
  wait_for 20 container_exited "$TTL_C"
  # Started again (a reboot): the old idle clock is not used, the first check starts a new one.
  docker start "$(vm_container "$TTL_C")"
  wait_for 60 idle_clock_running "$TTL_C"
  sleep 3
  [ "$(container_status "$TTL_C")" = running ]
  wait_for 25 container_exited "$TTL_C"
  run "$GPUPROV" list --no-refresh
  [[ "${lines[1]}" == *" idle 8s" ]]
  # No deadline passed, but the cloud says the VM is off: down --expired takes it.
  run "$GPUPROV" down --expired --yes
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"removed VM $TTL_C from docker"* ]]
  [ ! -e "$GPUPROV_HOME/state/$TTL_C.json" ]
}

@test "digitalocean (emulated): the VM that powered itself off is off on the API; down --expired leaves nothing" {
  use_emulator emu
  run "$GPUPROV" provision --name ttl-do --cloud digitalocean --no-k8s --ttl 5s
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"on digitalocean a powered-off VM is still billed in full: use \`gpuprov down ttl-do\`"* ]]
  [ "$(field ttl-do powered_off_cost)" = full ]
  wait_for 25 listed_state ttl-do stopped
  local id
  id=$(field ttl-do vm_id)
  run curl -fsS -H "Authorization: Bearer $DIGITALOCEAN_TOKEN" "$GPUPROV_DIGITALOCEAN_ENDPOINT/droplets/$id"
  echo "$output"
  [[ "$output" == *'"status":"off"'* ]]
  run "$GPUPROV" down --expired --yes
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"removed VM ttl-do from digitalocean"* ]]
  expect_nothing_left digitalocean ssh_keys
}

@test "aws (emulated): the instance that powered itself off is terminated; gc --delete cleans up" {
  use_emulator emu
  run "$GPUPROV" provision --name ttl-aws --cloud aws --no-k8s --ttl 5s
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"on aws a powered-off VM is no longer billed"* ]]
  # The driver lists no terminated instance: gpuprov sees it missing.
  wait_for 30 listed_state ttl-aws missing
  # Terminated: the emulator removes the test VM behind it.
  wait_for 20 no_backend_instance aws
  run "$GPUPROV" gc --cloud aws --delete --yes
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"expired VMs"*"ttl-aws"*"deleted"* ]]
  [ ! -e "$GPUPROV_HOME/state/ttl-aws.json" ]
  expect_nothing_left aws ssh_keys
}

@test "digitalocean (emulated), Kubernetes on the boot route: the boot script sets the timer up first" {
  use_emulator emu
  run "$GPUPROV" -v provision --name ttl-k8s --cloud digitalocean --ttl 1h
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"cluster plan: route boot"* ]]
  [[ "$output" == *"boot script: the TTL timer first"* ]]
  run "$GPUPROV" ssh ttl-k8s -- 'grep gpuprov-ttl /var/log/cloud-init-output.log; cat /etc/gpuprov/ttl.conf'
  echo "$output"
  [[ "$output" == *"gpuprov-ttl: timer installed at boot"* ]]
  local deadline
  deadline=$(date -u -d "$(field ttl-k8s ttl_deadline)" +%s)
  [[ "$output" == *"deadline=$deadline"* ]]
  run "$GPUPROV" down ttl-k8s --yes
  [ "$status" -eq 0 ]
  expect_nothing_left digitalocean ssh_keys
}
