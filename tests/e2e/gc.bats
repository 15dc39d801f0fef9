#!/usr/bin/env bats
# `gpuprov gc` against the cloud emulator (memory backend): orphans planted by provisioning
# with gpuprov and then losing the state record, plus resources made through the cloud's API
# without gpuprov's marks. gc lists exactly the orphans (with age and $/h), deletes them only
# with --delete --yes, and the untagged resources and a recorded VM survive; the emulator's
# /counts census proves it. Also: a driver of ABI 1.1 is named as unable to list orphans.
# The docker test cloud is the machine's real Docker daemon, shared with other test runs: its
# rows set [clouds.docker] scope, so gc sees (and deletes) only this file's containers.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
  export_emulated_cloud_credentials gc
  export DOCKER_SCOPE="gcbats-$$"
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  # Every cloud, so that a sweep of every cloud sends nothing past this machine.
  start_emulator memory --backend memory --boot-seconds 1
}

teardown_file() {
  stop_emulators
}

setup() {
  use_emulator memory
  # The memory backend's addresses never answer SSH: a provision ends soon after the VM runs,
  # with the VM, its firewall and its key made and the record written.
  # Deletes are polled fast.
  printf '%s\n' '[defaults.timeouts]' 'ssh_wait_seconds = 2' \
    '[clouds.hyperstack]' 'poll_interval_ms = 500' 'delete_retry_ms = 1000' \
    '[clouds.verda]' 'poll_interval_ms = 200' \
    '[clouds.primeintellect]' 'poll_interval_ms = 200' \
    '[clouds.nebius]' 'poll_interval_ms = 200' \
    '[clouds.docker]' "scope = \"$DOCKER_SCOPE\"" >"$GPUPROV_HOME/config.toml"
}

teardown() {
  reset_emulators
  rm -rf "$GPUPROV_HOME"/state
  # What a failed docker row left: this file's scope and its planted containers.
  {
    docker ps -aq --filter "label=io.gpuprov.scope=$DOCKER_SCOPE"
    docker ps -aq --filter "name=^/gpuprov-gck$$-"
  } 2>/dev/null | xargs -r docker rm -f >/dev/null 2>&1 || true
}

# wait_count CLOUD FIELD N: waits up to 30 s until the emulator's count is N (some clouds
# delete asynchronously: the API lists a deleting instance for a while).
wait_count() {
  local _
  for _ in $(seq 1 60); do
    [ "$(count "$1" "$2")" -eq "$3" ] && return 0
    sleep 0.5
  done
  echo "$1 $2: $(count "$1" "$2"), expected $3" >&2
  return 1
}

# gc_lines ARGS...: `gpuprov gc -o json ARGS` as "cloud kind name vm_names" lines, sorted.
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
    run "$GPUPROV" provision --name "$name" --cloud digitalocean --no-k8s
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
  # Text: age and $/h (s-2vcpu-4gb, the CPU default, is $0.03571/h), and how to delete.
  run "$GPUPROV" gc --cloud digitalocean
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"0.036"* ]]
  [[ "$output" == *"2 resources carry gpuprov's marks but belong to no VM record here"* ]]
  [[ "$output" == *"delete with \`gpuprov gc --delete\`"* ]]
  # Listing deleted nothing; --delete without --yes off a terminal is refused, nothing deleted.
  [ "$(count digitalocean instances)" -eq 3 ]
  run "$GPUPROV" gc --cloud digitalocean --delete </dev/null
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"needs --yes"* ]]
  [ "$(count digitalocean instances)" -eq 3 ]

  # On a terminal it asks; anything but y deletes nothing.
  run script -qec "$GPUPROV gc --cloud digitalocean --delete" /dev/null <<<"n"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"delete these 2 resources? [y/N]"* ]]
  [[ "$output" == *"nothing deleted"* ]]
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
assert vm["name"] == "keep-me" and vm["price_per_hour"] == 0.03571, vm
assert vm["age_seconds"] is not None and 0 <= vm["age_seconds"] < 600, vm
assert all("users" not in n for _, n in kinds), kinds'
  # down of the recorded VM still works after gc.
  run "$GPUPROV" down keep-me
  [ "$status" -eq 0 ]
  [ "$(count digitalocean instances)" -eq 1 ]
}

@test "digitalocean: gc knows agent VMs by their tags: a lost agent record, then a lost server record, and --delete leaves nothing" {
  # A 3-node cluster whose VMs are made and recorded (SSH never answers on this backend: each
  # node ends failed, its VM and record kept).
  run "$GPUPROV" provision --name gcc --cloud digitalocean --gpus H100:1 --nodes 3
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$(count digitalocean instances)" -eq 3 ]
  [ "$(count digitalocean vpcs)" -eq 1 ]
  # An agent whose record is lost is an orphan, with its own firewall; the rest is the cluster's.
  rm "$GPUPROV_HOME/state/gcc-agent-2.json"
  run gc_lines --cloud digitalocean
  echo "$output"
  [ "$output" = "digitalocean firewall gpuprov-gcc-agent-2 gcc-agent-2
digitalocean vm gcc-agent-2 gcc-agent-2" ]
  run "$GPUPROV" gc -o json --cloud digitalocean
  echo "$output" | /usr/bin/python3 -c '
import json, sys
vm = [o for o in json.load(sys.stdin)["clouds"][0]["orphans"] if o["kind"] == "vm"][0]
assert (vm["cluster"], vm["role"]) == ("gcc", "agent"), vm'
  # The server's record is lost: the agent whose record is still here is an orphan too, and
  # so is everything of the cluster (its network and firewall, each node's own firewall).
  rm "$GPUPROV_HOME/state/gcc.json"
  [ -f "$GPUPROV_HOME/state/gcc-agent-1.json" ]
  run gc_lines --cloud digitalocean
  echo "$output"
  [[ "$output" == *"digitalocean ssh_key gpuprov-"*" gcc,gcc-agent-1,gcc-agent-2"* ]]
  [ "$(echo "$output" | grep -v ' ssh_key ')" = "digitalocean cluster_firewall gpuprov-gcc-peers gcc,gcc-agent-1,gcc-agent-2
digitalocean cluster_network gpuprov-gcc gcc,gcc-agent-1,gcc-agent-2
digitalocean firewall gpuprov-gcc gcc
digitalocean firewall gpuprov-gcc-agent-1 gcc-agent-1
digitalocean firewall gpuprov-gcc-agent-2 gcc-agent-2
digitalocean vm gcc gcc
digitalocean vm gcc-agent-1 gcc-agent-1
digitalocean vm gcc-agent-2 gcc-agent-2" ]
  run "$GPUPROV" gc --cloud digitalocean --delete --yes
  echo "$output"
  [ "$status" -eq 0 ]
  wait_count digitalocean instances 0
  [ "$(count digitalocean firewalls)" -eq 0 ]
  [ "$(count digitalocean vpcs)" -eq 0 ]
  run gc_lines --cloud digitalocean
  [ "$output" = "" ]
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

# aws_cli ARGS...: the AWS CLI against the emulator, as a user's own script would call it.
aws_cli() {
  env AWS_DEFAULT_REGION=us-east-1 AWS_PAGER='' AWS_EC2_METADATA_DISABLED=true \
    /usr/bin/aws --endpoint-url "$GPUPROV_AWS_ENDPOINT" --output json ec2 "$@"
}

@test "aws: gc lists the lost VM's instance, security group and key pair; --delete --yes removes only them" {
  local name
  for name in keep-aws lost-aws; do
    run "$GPUPROV" provision --name "$name" --cloud aws --no-k8s --gpus L4:1
    echo "$output"
    [ -f "$GPUPROV_HOME/state/$name.json" ]
  done
  rm "$GPUPROV_HOME/state/lost-aws.json"
  aws_cli create-security-group --group-name users-sg --description "the user's own" >/dev/null
  ssh-keygen -q -t ed25519 -N '' -f "$BATS_TEST_TMPDIR/userkey"
  aws_cli import-key-pair --key-name users-key --public-key-material "fileb://$BATS_TEST_TMPDIR/userkey.pub" >/dev/null
  aws_cli run-instances --instance-type t3.micro --count 1 --image-id \
    resolve:ssm:/aws/service/canonical/ubuntu/server/22.04/stable/current/amd64/hvm/ebs-gp2/ami-id >/dev/null
  [ "$(count aws instances)" -eq 3 ]
  [ "$(count aws firewalls)" -eq 3 ]
  [ "$(count aws ssh_keys)" -eq 3 ]

  run gc_lines --cloud aws
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "aws key_pair gpuprov-lost-aws lost-aws
aws security_group gpuprov-lost-aws lost-aws
aws vm lost-aws lost-aws" ]
  run "$GPUPROV" gc --cloud aws --delete --yes
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(count aws instances)" -eq 2 ]
  [ "$(count aws firewalls)" -eq 2 ]
  [ "$(count aws ssh_keys)" -eq 2 ]
  run gc_lines --cloud aws
  [ "$output" = "" ]
  [[ "$(aws_cli describe-security-groups)" == *users-sg* ]]
  [[ "$(aws_cli describe-key-pairs)" == *users-key* ]]
  run "$GPUPROV" down keep-aws
  [ "$status" -eq 0 ]
  [ "$(count aws instances)" -eq 1 ]
}

@test "gc without --cloud sweeps every cloud with credentials and says which it skipped" {
  run "$GPUPROV" provision --name lost-do --cloud digitalocean --no-k8s
  rm "$GPUPROV_HOME/state/lost-do.json"
  local json_doc
  json_doc=$(env -u LAMBDA_API_KEY -u NEBIUS_CREDENTIALS_FILE -u NEBIUS_PROJECT_ID \
    "$GPUPROV" gc -o json 2>"$BATS_TEST_TMPDIR/notes")
  cat "$BATS_TEST_TMPDIR/notes"
  echo "$json_doc"
  echo "$json_doc" | /usr/bin/python3 -c '
import json, sys
clouds = {c["cloud"]: c for c in json.load(sys.stdin)["clouds"]}
assert all(clouds[c]["swept"] for c in ("digitalocean", "aws", "gcp", "hyperstack", "verda", "massedcompute", "primeintellect", "docker")), clouds
assert [o["kind"] for o in clouds["digitalocean"]["orphans"]] == ["vm", "firewall", "ssh_key"], clouds
assert clouds["digitalocean"]["orphans"][0]["name"] == "lost-do", clouds
assert clouds["aws"]["orphans"] == [], clouds["aws"]
# Clouds without credentials here are skipped with a note, not failed.
assert all(clouds[c]["orphans"] == [] for c in ("gcp", "hyperstack", "verda", "massedcompute", "primeintellect", "docker")), clouds
assert not clouds["lambda"]["swept"] and "no credentials" in clouds["lambda"]["note"], clouds["lambda"]
assert not clouds["nebius"]["swept"] and "no credentials" in clouds["nebius"]["note"], clouds["nebius"]'
  grep -q "lambda skipped: no credentials" "$BATS_TEST_TMPDIR/notes"
  grep -q "nebius skipped: no credentials" "$BATS_TEST_TMPDIR/notes"
  [ "$(count digitalocean instances)" -eq 1 ]
}

# lambda_api METHOD PATH [BODY]: the emulated Lambda API (paced at about 1 request/s: curl
# retries a 429).
lambda_api() {
  curl -fsS --retry 10 --retry-delay 1 -X "$1" -H "Authorization: Bearer $LAMBDA_API_KEY" \
    -H 'Content-Type: application/json' "$GPUPROV_LAMBDA_ENDPOINT$2" ${3:+-d "$3"}
}

@test "lambda: gc lists the lost VM's instance, ruleset and key; --delete --yes removes only them" {
  local name
  for name in keep-lam lost-lam; do
    run "$GPUPROV" provision --name "$name" --cloud lambda --no-k8s --gpus A10:1 --region us-east-1
    echo "$output"
    [ -f "$GPUPROV_HOME/state/$name.json" ]
  done
  rm "$GPUPROV_HOME/state/lost-lam.json"
  ssh-keygen -q -t ed25519 -N '' -f "$BATS_TEST_TMPDIR/userkey"
  lambda_api POST /ssh-keys "{\"name\":\"users-key\",\"public_key\":\"$(cat "$BATS_TEST_TMPDIR/userkey.pub")\"}" >/dev/null
  lambda_api POST /firewall-rulesets '{"name":"users-rules","region":"us-east-1","rules":[{"protocol":"tcp","port_range":[22,22],"source_network":"0.0.0.0/0","description":"ssh"}]}' >/dev/null
  lambda_api POST /instance-operations/launch '{"region_name":"us-east-1","instance_type_name":"gpu_1x_a10","ssh_key_names":["users-key"],"name":"users-own"}' >/dev/null
  [ "$(count lambda instances)" -eq 3 ]
  [ "$(count lambda rulesets)" -eq 3 ]
  [ "$(count lambda ssh_keys)" -eq 2 ]

  run gc_lines --cloud lambda
  echo "$output"
  [ "$status" -eq 0 ]
  # The gpuprov key is shared with keep-lam (recorded): kept.
  [ "$output" = "lambda ruleset gpuprov-lost-lam lost-lam
lambda vm lost-lam lost-lam" ]
  run "$GPUPROV" gc --cloud lambda --delete --yes
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(count lambda instances)" -eq 2 ]
  [ "$(count lambda rulesets)" -eq 2 ]
  [ "$(count lambda ssh_keys)" -eq 2 ]
  run gc_lines --cloud lambda
  [ "$output" = "" ]
  [[ "$(lambda_api GET /firewall-rulesets)" == *users-rules* ]]
}

# gce_api METHOD PATH [BODY]: the emulated Compute Engine API of the key's project, with a token
# got as a user's script would (a JWT signed by the service-account key, exchanged at token_uri).
gce_api() {
  local token
  token=$(/usr/bin/python3 - "$GOOGLE_APPLICATION_CREDENTIALS" <<'PY'
import base64, json, sys, time, urllib.parse, urllib.request
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding
key = json.load(open(sys.argv[1]))
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=")
now = int(time.time())
claims = {"iss": key["client_email"], "aud": key["token_uri"], "iat": now, "exp": now + 600,
          "scope": "https://www.googleapis.com/auth/compute"}
head = b64(json.dumps({"alg": "RS256", "typ": "JWT"}).encode()) + b"." + b64(json.dumps(claims).encode())
pk = serialization.load_pem_private_key(key["private_key"].encode(), None)
jwt = head + b"." + b64(pk.sign(head, padding.PKCS1v15(), hashes.SHA256()))
form = urllib.parse.urlencode({"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
                               "assertion": jwt.decode()}).encode()
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
print(json.load(opener.open(key["token_uri"], form))["access_token"])
PY
)
  curl -fsS -X "$1" -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    "$GPUPROV_GCP_ENDPOINT/compute/v1/projects/gpuprov-emulator$2" ${3:+-d "$3"}
}

@test "gcp: gc lists the lost VM's instance and firewall rule; a look-alike rule and the recorded VM survive" {
  local name
  for name in keep-gce lost-gce; do
    run "$GPUPROV" provision --name "$name" --cloud gcp --no-k8s --gpus L4:1
    echo "$output"
    [ -f "$GPUPROV_HOME/state/$name.json" ]
  done
  rm "$GPUPROV_HOME/state/lost-gce.json"
  # The user's own rule, and one named like gpuprov's that does not target its own tag.
  gce_api POST /global/firewalls '{"name":"users-fw","allowed":[{"IPProtocol":"tcp","ports":["8888"]}],"sourceRanges":["10.0.0.0/8"]}' >/dev/null
  gce_api POST /global/firewalls '{"name":"gpuprov-lookalike","allowed":[{"IPProtocol":"tcp","ports":["22"]}],"sourceRanges":["10.0.0.0/8"],"targetTags":["web"]}' >/dev/null
  [ "$(count gcp instances)" -eq 2 ]
  [ "$(count gcp firewalls)" -eq 4 ]

  run gc_lines --cloud gcp
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "gcp firewall gpuprov-lost-gce lost-gce
gcp vm lost-gce lost-gce" ]
  run "$GPUPROV" gc --cloud gcp --delete --yes
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(count gcp instances)" -eq 1 ]
  [ "$(count gcp firewalls)" -eq 3 ]
  run gc_lines --cloud gcp
  [ "$output" = "" ]
  run gce_api GET /global/firewalls
  [[ "$output" == *users-fw* && "$output" == *gpuprov-lookalike* && "$output" == *gpuprov-keep-gce* ]]
}

@test "massedcompute: gc lists the lost VM's instance; the shared key of a recorded VM and the user's key survive" {
  local name
  for name in keep-mc lost-mc; do
    run "$GPUPROV" provision --name "$name" --cloud massedcompute --no-k8s --gpus RTX-A6000:1
    echo "$output"
    [ -f "$GPUPROV_HOME/state/$name.json" ]
  done
  rm "$GPUPROV_HOME/state/lost-mc.json"
  ssh-keygen -q -t ed25519 -N '' -f "$BATS_TEST_TMPDIR/userkey"
  curl -fsS -X POST -H "Authorization: Bearer $MASSED_API_KEY" -H 'Content-Type: application/json' \
    "$GPUPROV_MASSEDCOMPUTE_ENDPOINT/ssh-keys" \
    -d "{\"name\":\"users key\",\"publicKey\":\"$(cat "$BATS_TEST_TMPDIR/userkey.pub")\"}" >/dev/null
  [ "$(count massedcompute instances)" -eq 2 ]
  [ "$(count massedcompute ssh_keys)" -eq 2 ]
  run gc_lines --cloud massedcompute
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "massedcompute vm gpuprov-lost-mc lost-mc" ]
  run "$GPUPROV" gc --cloud massedcompute --delete --yes
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(count massedcompute instances)" -eq 1 ]
  [ "$(count massedcompute ssh_keys)" -eq 2 ]
  # With keep-mc's record gone too, its instance and the gpuprov key are orphans; the user's
  # key never is.
  rm "$GPUPROV_HOME/state/keep-mc.json"
  run gc_lines --cloud massedcompute
  echo "$output"
  [[ "$output" == "massedcompute ssh_key gpuprov "*" keep-mc
massedcompute vm gpuprov-keep-mc keep-mc" ]]
  # Answered y on a terminal: deleted.
  run script -qec "$GPUPROV gc --cloud massedcompute --delete" /dev/null <<<"y"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"delete these 2 resources? [y/N]"* ]]
  [ "$(count massedcompute instances)" -eq 0 ]
  [ "$(count massedcompute ssh_keys)" -eq 1 ]
}

# hs_api METHOD PATH [BODY]: the emulated Hyperstack API (the api_key header).
hs_api() {
  curl -fsS -X "$1" -H "api_key: $HYPERSTACK_API_KEY" -H 'Content-Type: application/json' \
    "$GPUPROV_HYPERSTACK_ENDPOINT$2" ${3:+-d "$3"}
}

@test "hyperstack: gc lists the lost VM; the shared key pair and environment, the user's key pair and environment survive" {
  local name
  for name in keep-hs lost-hs; do
    run "$GPUPROV" provision --name "$name" --cloud hyperstack --no-k8s --gpus A100:1
    echo "$output"
    [ -f "$GPUPROV_HOME/state/$name.json" ]
  done
  rm "$GPUPROV_HOME/state/lost-hs.json"
  ssh-keygen -q -t ed25519 -N '' -f "$BATS_TEST_TMPDIR/userkey"
  hs_api POST /core/environments '{"name":"users-env","region":"CANADA-1"}' >/dev/null
  hs_api POST /core/keypairs "{\"name\":\"users-key\",\"environment_name\":\"users-env\",\"public_key\":\"$(cat "$BATS_TEST_TMPDIR/userkey.pub")\"}" >/dev/null
  [ "$(count hyperstack instances)" -eq 2 ]
  [ "$(count hyperstack environments)" -eq 2 ]
  [ "$(count hyperstack ssh_keys)" -eq 2 ]
  run gc_lines --cloud hyperstack
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "hyperstack vm lost-hs lost-hs" ]
  run "$GPUPROV" gc --cloud hyperstack --delete --yes
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(count hyperstack instances)" -eq 1 ]
  [ "$(count hyperstack environments)" -eq 2 ]
  [ "$(count hyperstack ssh_keys)" -eq 2 ]
  # Another machine's view: keep-hs, its key pair and environment are orphans there; the
  # user's environment and key pair never are.
  run env GPUPROV_HOME="$BATS_TEST_TMPDIR/other-home" "$GPUPROV" gc --cloud hyperstack --delete --yes
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(count hyperstack instances)" -eq 0 ]
  [ "$(count hyperstack environments)" -eq 1 ]
  [ "$(count hyperstack ssh_keys)" -eq 1 ]
  [[ "$(hs_api GET /core/keypairs)" == *users-key* ]]
}

@test "verda: gc lists the lost VM's instance and a left startup script; the user's script and key survive" {
  local name
  for name in keep-vd lost-vd; do
    run "$GPUPROV" provision --name "$name" --cloud verda --no-k8s --gpus H100:1
    echo "$output"
    [ -f "$GPUPROV_HOME/state/$name.json" ]
  done
  rm "$GPUPROV_HOME/state/lost-vd.json"
  local token
  token=$(curl -fsS -X POST -H 'Content-Type: application/json' "$GPUPROV_VERDA_ENDPOINT/oauth2/token" \
    -d "{\"grant_type\":\"client_credentials\",\"client_id\":\"$VERDA_CLIENT_ID\",\"client_secret\":\"$VERDA_CLIENT_SECRET\"}" |
    /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["access_token"])')
  # With --no-k8s there is no startup script; a run killed after making lost-vd's script left
  # this one (gpuprov's name, no record), and the user has one of their own.
  local script
  for script in gpuprov-lost-vd users-script; do
    curl -fsS -X POST -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
      "$GPUPROV_VERDA_ENDPOINT/scripts" -d "{\"name\":\"$script\",\"script\":\"#!/bin/bash\\necho hi\\n\"}" >/dev/null
  done
  ssh-keygen -q -t ed25519 -N '' -f "$BATS_TEST_TMPDIR/userkey"
  curl -fsS -X POST -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    "$GPUPROV_VERDA_ENDPOINT/ssh-keys" -d "{\"name\":\"users-key\",\"key\":\"$(cat "$BATS_TEST_TMPDIR/userkey.pub")\"}" >/dev/null
  [ "$(count verda instances)" -eq 2 ]
  [ "$(count verda scripts)" -eq 2 ]
  [ "$(count verda ssh_keys)" -eq 2 ]
  run gc_lines --cloud verda
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "verda script gpuprov-lost-vd lost-vd
verda vm lost-vd lost-vd" ]
  run "$GPUPROV" gc --cloud verda --delete --yes
  echo "$output"
  [ "$status" -eq 0 ]
  wait_count verda instances 1
  [ "$(count verda scripts)" -eq 1 ]
  [ "$(count verda ssh_keys)" -eq 2 ]
  run gc_lines --cloud verda
  [ "$output" = "" ]
}

# pi_api METHOD PATH [BODY]: the emulated Prime Intellect API, as the prime CLI would call it.
pi_api() {
  curl -fsS -X "$1" -H "Authorization: Bearer $PRIME_API_KEY" -H 'Content-Type: application/json' \
    "$GPUPROV_PRIMEINTELLECT_ENDPOINT$2" ${3:+-d "$3"}
}

@test "primeintellect: gc lists the lost VM's pod (named gpuprov-<name>) with \$/h; the user's pod and key and the recorded VM survive" {
  local name
  for name in keep-pi lost-pi; do
    run "$GPUPROV" provision --name "$name" --cloud primeintellect --no-k8s --gpus A100:1
    echo "$output"
    [ -f "$GPUPROV_HOME/state/$name.json" ]
  done
  rm "$GPUPROV_HOME/state/lost-pi.json"
  pi_api POST /pods/ '{"pod":{"name":"users-pod","cloudId":"n3-A100x1","gpuType":"A100_80GB","gpuCount":1,"socket":"PCIe","dataCenterId":"CANADA-1"},"provider":{"type":"hyperstack"}}' >/dev/null
  ssh-keygen -q -t ed25519 -N '' -f "$BATS_TEST_TMPDIR/userkey"
  pi_api POST /ssh_keys/ "{\"name\":\"users-key\",\"publicKey\":\"$(cat "$BATS_TEST_TMPDIR/userkey.pub")\"}" >/dev/null
  [ "$(count primeintellect instances)" -eq 3 ]
  [ "$(count primeintellect ssh_keys)" -eq 2 ]

  run gc_lines --cloud primeintellect
  echo "$output"
  [ "$status" -eq 0 ]
  # The account key is shared with keep-pi (recorded): kept.
  [ "$output" = "primeintellect vm gpuprov-lost-pi lost-pi" ]
  # The pod's priceHr: the cheapest A100:1 offer of any kind, RunPod's $1.19/h.
  run "$GPUPROV" gc --cloud primeintellect
  echo "$output"
  [[ "$output" == *"1.19"* ]]
  [[ "$output" == *"1 resource carries gpuprov's marks"* ]]
  run "$GPUPROV" gc --cloud primeintellect --delete --yes
  echo "$output"
  [ "$status" -eq 0 ]
  wait_count primeintellect instances 2
  [ "$(count primeintellect ssh_keys)" -eq 2 ]
  run gc_lines --cloud primeintellect
  [ "$output" = "" ]
  # Another machine's view: keep-pi's pod and gpuprov's key are orphans there; the user's pod
  # and key never are.
  run env GPUPROV_HOME="$BATS_TEST_TMPDIR/other-home" "$GPUPROV" gc --cloud primeintellect --delete --yes
  echo "$output"
  [ "$status" -eq 0 ]
  wait_count primeintellect instances 1
  [ "$(count primeintellect ssh_keys)" -eq 1 ]
  [[ "$(pi_api GET '/pods/?offset=0&limit=100')" == *users-pod* ]]
  [[ "$(pi_api GET '/ssh_keys/?offset=0&limit=100')" == *users-key* ]]
}

@test "nebius: gc lists the lost VM's instance, boot disk and security group without \$/h; the user's unlabelled ones and the recorded VM survive" {
  local name
  for name in keep-nb lost-nb users-nb; do
    run "$GPUPROV" provision --name "$name" --cloud nebius --no-k8s
    echo "$output"
    [ -f "$GPUPROV_HOME/state/$name.json" ]
  done
  rm "$GPUPROV_HOME/state/lost-nb.json" "$GPUPROV_HOME/state/users-nb.json"
  # users-nb stands for the user's own instance, disk and group (one named like gpuprov's):
  # the emulator takes every label off them.
  for name in users-nb users-nb-boot gpuprov-users-nb; do
    curl -fsS -X POST "$CONTROL/settings" -d "{\"cloud\":\"nebius\",\"unlabel\":\"$name\"}" >/dev/null
  done
  [ "$(count nebius instances)" -eq 3 ]
  [ "$(count nebius disks)" -eq 3 ]
  [ "$(count nebius security_groups)" -eq 3 ]

  run gc_lines --cloud nebius
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "nebius disk lost-nb-boot lost-nb
nebius security_group gpuprov-lost-nb lost-nb
nebius vm lost-nb lost-nb" ]
  # Nebius's API reports no price: none shown; the age is.
  "$GPUPROV" gc -o json --cloud nebius | /usr/bin/python3 -c '
import json, sys
orphans = json.load(sys.stdin)["clouds"][0]["orphans"]
assert [o["kind"] for o in orphans] == ["vm", "disk", "security_group"], orphans
assert all(o["price_per_hour"] is None for o in orphans), orphans
assert all(o["age_seconds"] is not None and 0 <= o["age_seconds"] < 600 for o in orphans), orphans'
  run "$GPUPROV" gc --cloud nebius --delete --yes
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(count nebius instances)" -eq 2 ]
  [ "$(count nebius disks)" -eq 2 ]
  [ "$(count nebius security_groups)" -eq 2 ]
  run gc_lines --cloud nebius
  [ "$output" = "" ]
  curl -fsS "$CONTROL/instances?cloud=nebius" | /usr/bin/python3 -c '
import json, sys
names = sorted(i["name"] for i in json.load(sys.stdin)["instances"])
assert names == ["keep-nb", "users-nb"], names'
  run "$GPUPROV" down keep-nb
  [ "$status" -eq 0 ]
  [ "$(count nebius instances)" -eq 1 ]
  [ "$(count nebius disks)" -eq 1 ]
  [ "$(count nebius security_groups)" -eq 1 ]
}

# Spot VMs as any other (issue 34): a preempted spot VM stays on Nebius (stopped); with its
# record it is kept, without one it is an orphan like any lost VM.
@test "nebius: gc treats preempted spot VMs as any other: the recorded one survives, the lost one is listed and deleted" {
  local name
  for name in keep-spot lost-spot; do
    run "$GPUPROV" provision --name "$name" --cloud nebius --gpus H100:1 --no-k8s --spot
    echo "$output"
    [ -f "$GPUPROV_HOME/state/$name.json" ]
    curl -fsS -X POST "$CONTROL/preempt" -d "{\"cloud\":\"nebius\",\"name\":\"$name\"}" >/dev/null
  done
  rm "$GPUPROV_HOME/state/lost-spot.json"
  run gc_lines --cloud nebius
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "nebius disk lost-spot-boot lost-spot
nebius security_group gpuprov-lost-spot lost-spot
nebius vm lost-spot lost-spot" ]
  run "$GPUPROV" gc --cloud nebius --delete --yes
  [ "$status" -eq 0 ]
  wait_count nebius instances 1
  [ "$(count nebius disks)" -eq 1 ]
  [ "$(field keep-spot state)" = preempted ]
  run "$GPUPROV" down keep-spot
  [ "$status" -eq 0 ]
  wait_count nebius instances 0
}

@test "docker: gc lists the lost VM's container of this scope; another scope's, an unlabelled one and the recorded VM survive" {
  local image keep="gck$$-keep" lost="gck$$-lost" name
  image=$(bash "$REPO_ROOT/tests/fixtures/testvm/build-image.sh" --print-tag)
  docker image inspect "$image" >/dev/null 2>&1 || skip "test VM image $image not built"
  # ssh_wait_seconds = 2 (setup): the run ends at the SSH wait, with the container made and
  # the record written, as fast as the memory rows.
  for name in "$keep" "$lost"; do
    run "$GPUPROV" provision --name "$name" --cloud docker
    echo "$output"
    [ -f "$GPUPROV_HOME/state/$name.json" ]
  done
  rm "$GPUPROV_HOME/state/$lost.json"
  # The user's own container (no labels, a gpuprov-like name) and a VM of another test run's
  # scope (all of gpuprov's labels but that scope).
  docker create --name "gpuprov-gck$$-users" "$image" /bin/true >/dev/null
  docker create --name "gpuprov-gck$$-other" --label io.gpuprov.managed=1 \
    --label "io.gpuprov.name=gck$$-other" --label "io.gpuprov.scope=gcbats-other-$$" \
    "$image" /bin/true >/dev/null
  [ "$(count_vm_containers "$keep")" -eq 1 ]
  [ "$(count_vm_containers "$lost")" -eq 1 ]

  run gc_lines --cloud docker
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "docker vm gpuprov-$lost $lost" ]
  run "$GPUPROV" gc --cloud docker --delete --yes
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(count_vm_containers "$lost")" -eq 0 ]
  [ "$(count_vm_containers "$keep")" -eq 1 ]
  docker inspect "gpuprov-gck$$-users" "gpuprov-gck$$-other" >/dev/null
  run gc_lines --cloud docker
  [ "$output" = "" ]
  run "$GPUPROV" down "$keep"
  [ "$status" -eq 0 ]
  [ "$(count_vm_containers "$keep")" -eq 0 ]
  docker rm -f "gpuprov-gck$$-users" "gpuprov-gck$$-other" >/dev/null
}
