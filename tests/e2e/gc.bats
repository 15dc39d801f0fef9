#!/usr/bin/env bats
# `gpuprov gc` against the cloud emulator (memory backend): orphans planted by provisioning
# with gpuprov and then losing the state record, plus resources made through the cloud's API
# without gpuprov's marks. gc lists exactly the orphans (with age and $/h), deletes them only
# with --delete --yes, and the untagged resources and a recorded VM survive; the emulator's
# /counts census proves it. Also: a driver of ABI 1.1 is named as unable to list orphans.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
  export DIGITALOCEAN_TOKEN="dop_v1_gc_$$_secret_token"
  export HOME="$BATS_FILE_TMPDIR/userhome" # no cloud CLI files of the machine's user
  mkdir -p "$HOME"
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  start_emulator memory --clouds digitalocean --backend memory --boot-seconds 1
}

teardown_file() {
  stop_emulators
}

setup() {
  use_emulator memory
  # The memory backend's addresses never answer SSH: a provision ends soon after the VM runs,
  # with the VM, its firewall and its key made and the record written.
  printf '[defaults.timeouts]\nssh_wait_seconds = 2\n' >"$GPUPROV_HOME/config.toml"
}

teardown() {
  reset_emulators
  rm -rf "$GPUPROV_HOME"/state
}

# gc_json ARGS...: `gpuprov gc -o json ARGS` as "cloud kind name vm_names" lines, sorted.
gc_lines() {
  "$GPUPROV" gc -o json "$@" | /usr/bin/python3 -c '
import json, sys
doc = json.load(sys.stdin)
for c in doc["clouds"]:
    for o in c["orphans"]:
        print(c["cloud"], o["kind"], o["name"], ",".join(o["vm_names"]))' | sort
}

# do_api METHOD PATH [BODY]: the emulated DigitalOcean API, as a user's own script would call it.
do_api() {
  curl -fsS -X "$1" -H "Authorization: Bearer $DIGITALOCEAN_TOKEN" \
    -H 'Content-Type: application/json' "$GPUPROV_DIGITALOCEAN_ENDPOINT$2" ${3:+-d "$3"}
}

# plant_digitalocean: a recorded VM (keep-me), an orphan (lost-one: provisioned, then its record
# deleted), and the user's own droplet, firewall and SSH key without gpuprov's marks.
plant_digitalocean() {
  local name
  for name in keep-me lost-one; do
    run "$GPUPROV" provision --name "$name" --cloud digitalocean --no-k8s --instance-type s-1vcpu-1gb
    echo "$output"
    [ -f "$GPUPROV_HOME/state/$name.json" ]
  done
  rm "$GPUPROV_HOME/state/lost-one.json"
  do_api POST /droplets '{"name":"users-own","region":"nyc2","size":"s-1vcpu-1gb","image":"ubuntu-22-04-x64","tags":["web"]}' >/dev/null
  do_api POST /firewalls '{"name":"users-firewall","inbound_rules":[{"protocol":"tcp","ports":"22","sources":{"addresses":["0.0.0.0/0"]}}],"outbound_rules":[]}' >/dev/null
  ssh-keygen -q -t ed25519 -N '' -f "$BATS_TEST_TMPDIR/userkey"
  do_api POST /account/keys "{\"name\":\"users-key\",\"public_key\":\"$(cat "$BATS_TEST_TMPDIR/userkey.pub")\"}" >/dev/null
  [ "$(count digitalocean instances)" -eq 3 ]
  [ "$(count digitalocean firewalls)" -eq 3 ]
  [ "$(count digitalocean ssh_keys)" -eq 2 ]
}

@test "digitalocean: gc lists only the orphans; --delete --yes removes them; the untagged and the recorded survive" {
  plant_digitalocean
  run gc_lines --cloud digitalocean
  echo "$output"
  [ "$status" -eq 0 ]
  # The shared SSH key is used by keep-me too (recorded): kept. users-* carry no mark.
  [ "$output" = "digitalocean firewall gpuprov-lost-one lost-one
digitalocean vm lost-one lost-one" ]
  # Text: age and $/h (s-1vcpu-1gb is $0.00893/h), and how to delete.
  run "$GPUPROV" gc --cloud digitalocean
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"0.009"* ]]
  [[ "$output" == *"2 resources carry gpuprov's marks but belong"* || "$output" == *"delete with \`gpuprov gc --delete\`"* ]]
  # Listing deleted nothing; --delete without --yes off a terminal is refused, nothing deleted.
  [ "$(count digitalocean instances)" -eq 3 ]
  run "$GPUPROV" gc --cloud digitalocean --delete </dev/null
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"needs --yes"* ]]
  [ "$(count digitalocean instances)" -eq 3 ]

  run "$GPUPROV" gc --cloud digitalocean --delete --yes
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *deleted* ]]
  [ "$(count digitalocean instances)" -eq 2 ]
  [ "$(count digitalocean firewalls)" -eq 2 ]
  [ "$(count digitalocean ssh_keys)" -eq 2 ]
  curl -fsS "$CONTROL/instances?cloud=digitalocean" | /usr/bin/python3 -c '
import json, sys
names = sorted(i["name"] for i in json.load(sys.stdin)["instances"])
assert names == ["keep-me", "users-own"], names'
  run gc_lines --cloud digitalocean
  [ "$output" = "" ]
  [[ "$(do_api GET /firewalls)" == *users-firewall* ]]
  [[ "$(do_api GET /account/keys)" == *users-key* ]]
  # The token is in no output.
  run "$GPUPROV" -v gc --cloud digitalocean
  [[ "$output" != *"$DIGITALOCEAN_TOKEN"* ]]

  # Another machine's view (a home without records): everything of gpuprov's is an orphan,
  # the shared key included now that no record claims its users.
  run env GPUPROV_HOME="$BATS_TEST_TMPDIR/other-home" "$GPUPROV" gc -o json --cloud digitalocean
  echo "$output"
  [ "$status" -eq 0 ]
  echo "$output" | /usr/bin/python3 -c '
import json, sys
orphans = json.load(sys.stdin)["clouds"][0]["orphans"]
kinds = sorted((o["kind"], o["name"]) for o in orphans)
assert [k for k, _ in kinds] == ["firewall", "ssh_key", "vm"], kinds
vm = [o for o in orphans if o["kind"] == "vm"][0]
assert vm["name"] == "keep-me" and vm["price_per_hour"] == 0.00893, vm
assert vm["age_seconds"] is not None and 0 <= vm["age_seconds"] < 600, vm
assert all("users" not in n for _, n in kinds), kinds'
  # down of the recorded VM still works after gc.
  run "$GPUPROV" down keep-me
  [ "$status" -eq 0 ]
  [ "$(count digitalocean instances)" -eq 1 ]
}

@test "gc: an ABI 1.1 driver is named as unable to list orphans; a bad flag is a usage error" {
  local fixtures="$BUILD_DIR/tests/fixture-drivers"
  run "$GPUPROV" --driver-path "$fixtures" gc --cloud abi11
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"the abi11 driver cannot list orphans"* ]]
  run "$GPUPROV" gc --yes --cloud digitalocean
  [ "$status" -eq 2 ]
  [[ "$output" == *"--yes only confirms --delete"* ]]
  run "$GPUPROV" gc extra
  [ "$status" -eq 2 ]
  run "$GPUPROV" gc --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"--delete"* ]]
  run "$GPUPROV" --help
  [[ "$output" == *"gc "*"belongs to no VM record"* ]]
}
