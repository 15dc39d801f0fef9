#!/usr/bin/env bats
# Host options of issue 11: config.toml keys checked against what the driver declares (ABI 1.1),
# `gpuprov drivers NAME`, the --disk-gb and --tag flags, and ports opened on an existing VM by
# the driver's open_ports. Uses the fixture drivers, the real docker driver and the DigitalOcean
# emulator with real test VMs.

load helpers

setup_file() {
  export DIGITALOCEAN_TOKEN="dop_v1_hostopts_$$_secret_token"
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  start_emulator emu --backend docker --clouds digitalocean
}

teardown_file() {
  stop_emulators
}

setup() {
  FIXTURES="$BUILD_DIR/tests/fixture-drivers"
  rm -f "$GPUPROV_HOME/config.toml"
}

teardown() {
  reset_emulators
  remove_vm_containers "e2e-opts-$$"
  rm -f "$GPUPROV_HOME"/state/*.json
}

# field_json NAME KEY: one value of `gpuprov list --output json` for VM NAME, as JSON.
field_json() {
  "$GPUPROV" list --no-refresh --output json | /usr/bin/python3 -c "
import json, sys
vm = [v for v in json.load(sys.stdin) if v['name'] == '$1'][0]
print(json.dumps(vm.get('$2')))"
}

@test "an unknown key in [clouds.NAME] is refused with file:line, the key and the allowed list" {
  printf '[defaults]\ncloud = "docker"\n\n[clouds.docker]\nimgae = "x"\n' >"$GPUPROV_HOME/config.toml"
  run "$GPUPROV" provision --name "e2e-opts-$$" --no-k8s
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"$GPUPROV_HOME/config.toml:5: unknown key 'imgae' in [clouds.docker]; the docker driver accepts: endpoint, image"* ]]
  [[ "$output" == *"gpuprov drivers docker"* ]]
  [ ! -e "$GPUPROV_HOME/state/e2e-opts-$$.json" ]
  [ "$(count_vm_containers "e2e-opts-$$")" -eq 0 ]
}

@test "a mistyped key is refused naming both types; a 1.0 driver's table passes unchecked" {
  printf '[clouds.good]\nzone = "a"\nretries = "3"\n' >"$GPUPROV_HOME/config.toml"
  run "$GPUPROV" --driver-path "$FIXTURES" provision --name typed --cloud good --no-k8s
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"config.toml:3: key 'clouds.good.retries' must be an integer for the good driver, not a string"* ]]
  [[ "$output" == *"write the number without quotes"* ]]
  [ ! -e "$GPUPROV_HOME/state/typed.json" ]
  # abi10 was built with the ABI 1.0 header: it declares nothing, so its table passes to init
  # and the run gets as far as the offers (the fixture offers none).
  printf '[clouds.abi10]\nanything = "goes"\n' >"$GPUPROV_HOME/config.toml"
  run "$GPUPROV" --driver-path "$FIXTURES" provision --name typed --cloud abi10 --no-k8s
  echo "$output"
  [[ "$output" != *"unknown key"* ]]
  [[ "$output" == *"the abi10 cloud does not offer"* ]]
}

@test "gpuprov drivers NAME prints the keys of [clouds.NAME]" {
  run "$GPUPROV" drivers docker
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"settings: [clouds.docker] in config.toml accepts"* ]]
  [[ "$output" == *"endpoint  string"*"GPUPROV_DOCKER_ENDPOINT overrides it"* ]]
  [[ "$output" == *"image     string    the test VM image used when the request names none"* ]]
  run "$GPUPROV" drivers aws
  [ "$status" -eq 0 ]
  [[ "$output" == *"poll_interval_ms"*"integer"* ]]
  run "$GPUPROV" --driver-path "$FIXTURES" drivers good --output json
  echo "$output"
  [ "$status" -eq 0 ]
  /usr/bin/python3 -c "
import json, sys
d = json.loads(sys.argv[1])
assert d['abi'] == '1.0', d
assert [k['name'] for k in d['config_keys']] == ['fail_init', 'zone', 'retries'], d
assert d['config_keys'][2]['type'] == 'integer', d" "$output"
  run "$GPUPROV" --driver-path "$FIXTURES" drivers abi10
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"the driver declares none (ABI 1.0), so its [clouds.abi10] table in config.toml is passed to it unchecked"* ]]
  run "$GPUPROV" drivers no-such-cloud
  [ "$status" -eq 2 ]
  run "$GPUPROV" drivers a b
  [ "$status" -eq 2 ]
}

@test "--disk-gb and --tag are validated before anything is created, naming the flag" {
  for args in "--disk-gb 5" "--disk-gb lots" "--tag team" "--tag gpuprov=0" "--tag a=1 --tag a=2"; do
    # shellcheck disable=SC2086  # each case is several words on purpose
    run "$GPUPROV" provision --name "e2e-opts-$$" --cloud docker --no-k8s $args
    echo "$args: $output"
    [ "$status" -eq 2 ]
    [[ "$output" == *"${args%% *}"* ]]
  done
  [ ! -e "$GPUPROV_HOME/state/e2e-opts-$$.json" ]
  [ "$(count_vm_containers "e2e-opts-$$")" -eq 0 ]
}

@test "--disk-gb and --tag reach the driver and show in list --output json" {
  run "$GPUPROV" -v provision --name "e2e-opts-$$" --cloud docker --no-k8s \
    --disk-gb 20 --tag team=ml --tag owner=alice
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *'"disk_gb":20'* ]]
  [[ "$output" == *'"owner":"alice"'* ]]
  [ "$(docker ps -a --filter "label=io.gpuprov.name=e2e-opts-$$" --format '{{.Label "io.gpuprov.tag.team"}}')" = ml ]
  [ "$(field_json "e2e-opts-$$" disk_gb)" = 20 ]
  [ "$(field_json "e2e-opts-$$" tags)" = '{"owner": "alice", "team": "ml"}' ]
  [ "$(field_json "e2e-opts-$$" open_ports)" = '[22]' ]
  # The VM exists now: another tag on a re-run does not pretend to change it.
  run "$GPUPROV" provision --name "e2e-opts-$$" --cloud docker --no-k8s --tag team=other
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"its disk size and tags stay as they were made"* ]]
  [ "$(field_json "e2e-opts-$$" tags)" = '{"owner": "alice", "team": "ml"}' ]
  "$GPUPROV" down "e2e-opts-$$"
}

@test "a plain VM turned into a cluster gets its ports from open_ports; the summary says which" {
  use_emulator emu
  printf '[defaults.timeouts]\nssh_wait_seconds = 180\n' >"$GPUPROV_HOME/config.toml"
  run "$GPUPROV" provision --name plain2k8s --cloud digitalocean --no-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(field_json plain2k8s open_ports)" = '[22]' ]
  run "$GPUPROV" -v provision --name plain2k8s --cloud digitalocean
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"reusing existing VM plain2k8s"* ]]
  [[ "$output" == *"opening ports 22, 6443, 80 and 443 of plain2k8s"* ]]
  [[ "$output" == *'driver digitalocean: open_ports {"id":'*'"ports":[22,6443,80,443]}'* ]]
  [[ "$output" == *"(ports 22, 80, 443 and 6443 are open to 0.0.0.0/0)"* ]]
  [[ "$output" == *"--allow-from CIDR (or allow_from in config.toml) narrows 6443, 80 and 443"* ]]
  [ "$(field_json plain2k8s open_ports)" = '[22, 80, 443, 6443]' ]
  # The route printed and recorded is the one that ran: the boot script of the plain VM had no
  # installer, so it was pushed over SSH, and the summary says why.
  [[ "$output" == *"(ssh route: the boot install never ran (cloud-init done, no status marker); direct access; create "* ]]
  [ "$(field_json plain2k8s route)" = '"ssh"' ]
  # A third run needs nothing more: open_ports is not called again.
  run "$GPUPROV" -v provision --name plain2k8s --cloud digitalocean
  [ "$status" -eq 0 ]
  [[ "$output" != *"open_ports {"* ]]
  "$GPUPROV" down plain2k8s
}

@test "provision loads the driver file once" {
  marker="$BATS_TEST_TMPDIR/loads"
  # The fixture cloud's VM has no address, so the run stops after create; it loaded the file
  # into its own process once for its capabilities, the config check, init and every call (a
  # child process read its descriptor first: "probe" lines).
  GPUPROV_FIXTURE_LOAD_MARKER="$marker" run "$GPUPROV" --driver-path "$FIXTURES" \
    provision --name onceload --cloud good --no-k8s
  echo "$output"
  [[ "$output" == *"reported no public address"* ]]
  [ "$(grep -c '^load ' "$marker")" -eq 1 ]
}
