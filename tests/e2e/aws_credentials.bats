#!/usr/bin/env bats
# gpuprov on AWS with credentials where users keep them (issue 17), through the EC2 emulator,
# which also serves STS and the SSO portal: a role profile (role_arn + source_profile, STS
# AssumeRole signed by gpuprov) provisions a real test VM (docker backend) and the credentials
# check (shown with -v) names the source; an SSO profile without a login says `aws sso login`;
# no region anywhere is a clear exit-2 error; an HTTP proxy on loopback carries the STS and EC2
# calls (memory backend, a capacity fault ends the run after the first calls).

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
  # The emulator's own keys (the base identity that may assume roles); gpuprov reads them only
  # from the profile files below.
  export EMU_KEY="AKIACRED$$E2EBASE01"
  export EMU_SECRET="cred/$$/base+secret+key"
  unset AWS_SESSION_TOKEN AWS_PROFILE AWS_REGION AWS_DEFAULT_REGION AWS_ENDPOINT_URL \
    AWS_WEB_IDENTITY_TOKEN_FILE AWS_ROLE_ARN AWS_CONTAINER_CREDENTIALS_FULL_URI \
    AWS_CONTAINER_CREDENTIALS_RELATIVE_URI HTTP_PROXY HTTPS_PROXY http_proxy https_proxy \
    NO_PROXY no_proxy
  export AWS_EC2_METADATA_DISABLED=true
  export HOME="$BATS_FILE_TMPDIR/userhome" # no ~/.aws of the machine's user
  mkdir -p "$HOME/.aws"
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  printf '[defaults.timeouts]\nssh_wait_seconds = 180\n' >"$GPUPROV_HOME/config.toml"
  AWS_ACCESS_KEY_ID=$EMU_KEY AWS_SECRET_ACCESS_KEY=$EMU_SECRET \
    start_emulator docker --clouds aws --backend docker
  AWS_ACCESS_KEY_ID=$EMU_KEY AWS_SECRET_ACCESS_KEY=$EMU_SECRET \
    start_emulator memory --clouds aws --backend memory --boot-seconds 1
  printf '[base]\naws_access_key_id = %s\naws_secret_access_key = %s\n' "$EMU_KEY" "$EMU_SECRET" \
    >"$HOME/.aws/credentials"
  cat >"$HOME/.aws/config" <<'EOF'
[profile dev]
role_arn = arn:aws:iam::123456789012:role/gpuprov-dev
source_profile = base
region = eu-west-1

[profile work]
sso_session = corp
sso_account_id = 111122223333
sso_role_name = Dev
region = eu-west-1

[sso-session corp]
sso_start_url = https://corp.awsapps.com/start
sso_region = us-east-1

[profile noregion]
role_arn = arn:aws:iam::123456789012:role/gpuprov-dev
source_profile = base
EOF
  chmod 600 "$HOME/.aws/credentials" "$HOME/.aws/config"
}

teardown_file() {
  stop_emulators
}

# use docker|memory: points gpuprov (EC2 and STS) at that emulator.
use() {
  use_emulator "$1"
  export AWS_ENDPOINT_URL_STS="$GPUPROV_AWS_ENDPOINT" AWS_ENDPOINT_URL_SSO="$GPUPROV_AWS_ENDPOINT"
}

teardown() {
  reset_emulators
  rm -f "$GPUPROV_HOME"/state/*.json
}

@test "aws credentials: a role profile (role_arn + source_profile) provisions; the check names the source" {
  use docker
  export AWS_PROFILE=dev
  run "$GPUPROV" -v provision --name aws-role --cloud aws --gpus L4:1 --no-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *'region eu-west-1'*'credentials from profile dev (role_arn via source_profile base)'* ]]
  [ "$(count aws credentials_issued)" -eq 1 ] # one AssumeRole, cached for the whole run
  [ "$(count aws instances)" -eq 1 ]
  run "$GPUPROV" ssh aws-role -- whoami
  [ "$status" -eq 0 ]
  [[ "$output" == *"ubuntu"* ]]
  run "$GPUPROV" list --output json
  echo "$output" | /usr/bin/python3 -c '
import json, sys
vm = [v for v in json.load(sys.stdin) if v["name"] == "aws-role"][0]
assert vm["region"] == "eu-west-1", vm'
  # Neither the base secret nor the temporary keys reach output or gpuprov's files.
  run "$GPUPROV" -v list
  [[ "$output" != *"$EMU_SECRET"* ]]
  run ! grep -rqF "$EMU_SECRET" "$GPUPROV_HOME"
  run ! grep -rqE 'ASIA[0-9A-F]{16}' "$GPUPROV_HOME"
  run "$GPUPROV" down aws-role
  echo "$output"
  [ "$status" -eq 0 ]
  expect_nothing_left aws ssh_keys
}

@test "aws credentials: an SSO profile without a cached login says aws sso login; no region is exit 2" {
  use memory
  AWS_PROFILE=work run "$GPUPROV" provision --name aws-sso --cloud aws --no-k8s
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" == *'aws sso login --profile work'* ]]
  AWS_PROFILE=noregion run "$GPUPROV" provision --name aws-noregion --cloud aws --no-k8s
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *'no AWS region'* ]]
  [[ "$output" == *'AWS_REGION'* ]]
  [ "$(count aws instances)" -eq 0 ]
  [ ! -e "$GPUPROV_HOME/state/aws-noregion.json" ]
}

@test "aws credentials: HTTP_PROXY on loopback carries the STS and EC2 calls; NO_PROXY bypasses it" {
  use memory
  coproc PROXY { exec /usr/bin/python3 "$BATS_TEST_DIRNAME/../fixtures/proxy/connect_proxy.py" \
    "$BATS_TEST_TMPDIR/proxy.log"; }
  read -r _ proxy_url <&"${PROXY[0]}"
  fault '{"cloud":"aws","fault":"capacity","times":1}'
  AWS_PROFILE=dev HTTP_PROXY=$proxy_url run "$GPUPROV" provision --name aws-proxy --cloud aws --no-k8s
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"InsufficientInstanceCapacity"* ]]
  cat "$BATS_TEST_TMPDIR/proxy.log"
  # AssumeRole, then the EC2 calls up to RunInstances: all through the proxy.
  [ "$(grep -c "^POST $GPUPROV_AWS_ENDPOINT/" "$BATS_TEST_TMPDIR/proxy.log")" -ge 3 ]
  [ "$(count aws credentials_issued)" -eq 1 ]
  : >"$BATS_TEST_TMPDIR/proxy.log"
  fault '{"cloud":"aws","fault":"capacity","times":1}'
  AWS_PROFILE=dev HTTP_PROXY=$proxy_url NO_PROXY=127.0.0.1 run "$GPUPROV" provision --name aws-proxy --cloud aws --no-k8s
  [ "$status" -eq 1 ]
  [[ "$output" == *"InsufficientInstanceCapacity"* ]]
  [ ! -s "$BATS_TEST_TMPDIR/proxy.log" ]
  expect_nothing_left aws ssh_keys
  kill "$PROXY_PID"
  wait "$PROXY_PID" || true
}
