#!/usr/bin/env bats
# `gpuprov check` and the cloud a `provision` without --cloud uses (issue 16, item 2), against
# the cloud emulator (memory backend, every cloud, so every driver's API is on 127.0.0.1). No
# cloud credential of the machine is seen: HOME is a temporary folder and every credential
# variable is unset; each test sets only the ones it is about.

load helpers

setup_file() {
  local var
  for var in $SECRET_ENV_VARS AWS_ACCESS_KEY_ID AWS_PROFILE GOOGLE_APPLICATION_CREDENTIALS \
    VERDA_CLIENT_ID DATACRUNCH_CLIENT_ID NEBIUS_CREDENTIALS_FILE PRIME_TEAM_ID GPUPROV_CLOUD; do
    unset "$var"
  done
  export HOME="$BATS_FILE_TMPDIR/userhome"
  mkdir -p "$HOME"
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  export DO_TOKEN_OK="dop_v1_check_$$_secret_token"
  export LAMBDA_KEY_OK="secret_check_$$_lambda_key"
  # The emulator accepts the credentials in its own environment at start.
  DIGITALOCEAN_TOKEN="$DO_TOKEN_OK" LAMBDA_API_KEY="$LAMBDA_KEY_OK" start_emulator emu --backend memory
}

teardown_file() {
  stop_emulators
}

setup() {
  use_emulator emu
  unset DIGITALOCEAN_TOKEN LAMBDA_API_KEY
  rm -f "$GPUPROV_HOME/config.toml"
}

teardown() {
  reset_emulators
  rm -f "$GPUPROV_HOME"/state/*.json
}

@test "check: per driver, credentials found and where from, the account, and the fix for the others" {
  export DIGITALOCEAN_TOKEN="$DO_TOKEN_OK"
  run "$GPUPROV" check
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"digitalocean: usable"* ]]
  [[ "$output" == *"credentials: found (from \$DIGITALOCEAN_TOKEN)"* ]]
  [[ "$output" == *"check call:  ok"* ]]
  [[ "$output" == *"lambda: not usable"* ]]
  [[ "$output" == *"credentials: missing or rejected"* ]]
  [[ "$output" == *"LAMBDA_API_KEY"* ]]
  [[ "$output" == *"docker (local test cloud): "* ]]
  for cloud in aws gcp hyperstack massedcompute nebius primeintellect verda; do
    [[ "$output" == *"$cloud: not usable"* ]]
  done
  [[ "$output" != *"$DO_TOKEN_OK"* ]]
}

@test "check --cloud X -o json: one cloud as JSON, exit 0 when usable and 1 when not" {
  export DIGITALOCEAN_TOKEN="$DO_TOKEN_OK"
  run "$GPUPROV" check --cloud digitalocean -o json
  echo "$output"
  [ "$status" -eq 0 ]
  /usr/bin/python3 -c '
import json, sys
reports = json.loads(sys.argv[1])
assert len(reports) == 1, reports
r = reports[0]
assert r["cloud"] == "digitalocean" and r["usable"] is True, r
assert r["credentials"] == "found" and r["credentials_from"] == "$DIGITALOCEAN_TOKEN", r
assert r["account"] and r["result"] == "ok" and r["fix"] == "", r
' "$output"
  run "$GPUPROV" check --cloud lambda
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"lambda: not usable"* ]]
  [[ "$output" == *"fix:"* ]]
}

@test "check: a token the API rejects is reported as rejected with the fix, never echoed" {
  export DIGITALOCEAN_TOKEN="dop_v1_wrong_$$_token_value"
  run "$GPUPROV" check --cloud digitalocean
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"credentials: missing or rejected"* ]]
  [[ "$output" == *"fix:"* ]]
  [[ "$output" != *"$DIGITALOCEAN_TOKEN"* ]]
}

@test "check of a cloud without a driver, or not a cloud name, is a usage error" {
  run "$GPUPROV" check --cloud nosuchcloud
  [ "$status" -eq 2 ]
  [[ "$output" == *"no driver for cloud 'nosuchcloud'"* ]]
  run "$GPUPROV" check --cloud 'Bad Name'
  [ "$status" -eq 2 ]
  run "$GPUPROV" check extra
  [ "$status" -eq 2 ]
}

@test "provision without --cloud uses the only cloud whose credentials work (never docker)" {
  export DIGITALOCEAN_TOKEN="$DO_TOKEN_OK"
  run "$GPUPROV" provision --name pick --no-k8s --gpus NOPE:1
  echo "$output"
  # The offers of the chosen cloud refuse the GPU: nothing is made, exit 2.
  [ "$status" -eq 2 ]
  [[ "$output" == *"cloud: digitalocean, the only one whose credentials work"* ]]
  [[ "$output" == *"the digitalocean cloud does not offer NOPE:1"* ]]
  [ ! -e "$GPUPROV_HOME/state/pick.json" ]
  [ "$(count digitalocean instances)" -eq 0 ]
}

@test "provision without --cloud: none or two usable clouds is a usage error naming them" {
  run "$GPUPROV" provision --name pick --no-k8s
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"no cloud given, and no cloud's credentials work here"* ]]
  [[ "$output" == *"gpuprov check"* ]]
  export DIGITALOCEAN_TOKEN="$DO_TOKEN_OK" LAMBDA_API_KEY="$LAMBDA_KEY_OK"
  run "$GPUPROV" provision --name pick --no-k8s
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"2 clouds are usable: digitalocean, lambda"* ]]
  [ ! -e "$GPUPROV_HOME/state/pick.json" ]
  # [defaults] cloud decides without any check of the others.
  mkdir -p "$GPUPROV_HOME"
  printf '[defaults]\ncloud = "lambda"\n' >"$GPUPROV_HOME/config.toml"
  run "$GPUPROV" provision --name pick --no-k8s --gpus NOPE:1
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"the lambda cloud does not offer NOPE:1"* ]]
  [[ "$output" != *"credentials work"* ]]
}
