#!/usr/bin/env bats
# Driver settings in config.toml end to end (issue 31, part 1): the types of ABI 1.3 (a list of
# strings, the kit's retry table) reach the real drivers, a former key name is read with a
# warning naming the current one, a mistake inside a table is refused with its file:line, and a
# capability bit this gpuprov does not know is listed and ignored. Against the cloud emulator's
# memory backend; no cloud credential of the machine is seen.

load helpers

setup_file() {
  local var
  for var in $SECRET_ENV_VARS; do unset "$var"; done
  export_emulated_cloud_credentials settings
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  start_emulator emu --clouds aws,lambda --backend memory
}

teardown_file() {
  stop_emulators
}

setup() {
  use_emulator emu
  rm -f "$GPUPROV_HOME/config.toml"
}

teardown() {
  reset_emulators
}

# throttled: how many 503 answers the aws emulator gave since the last clear.
throttled() {
  curl -fsS "$CONTROL/requests?cloud=aws" |
    /usr/bin/python3 -c 'import json,sys; print(sum(r["status"] == 503 for r in json.load(sys.stdin)["requests"]))'
}

@test "settings: the AWS README's example (regions list, retry table) is accepted and the driver uses its retry" {
  # plugins/aws/README.md, Settings: the example, with a retry policy small enough to see.
  cat >"$GPUPROV_HOME/config.toml" <<'TOML'
[clouds.aws]
regions = ["us-east-1", "us-west-2"]
retry = {max_attempts = 2, base_delay_ms = 1, max_delay_ms = 5, total_budget_ms = 10000}
TOML
  fault '{"cloud":"aws","fault":"throttle","times":4}'
  curl -fsS -X DELETE "$CONTROL/requests?cloud=aws" >/dev/null
  run "$GPUPROV" check --cloud aws
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" != *"must be a string, an integer or a boolean"* ]]
  # Two attempts, as retry.max_attempts says (the default is six, which outlasts four faults).
  [ "$(throttled)" -eq 2 ]

  # The same table as a [clouds.aws.retry] section, with the default attempts: four faults are
  # retried through.
  printf '[clouds.aws]\nregions = ["us-east-1"]\n\n[clouds.aws.retry]\nbase_delay_ms = 1\nmax_delay_ms = 5\n' \
    >"$GPUPROV_HOME/config.toml"
  use_emulator emu # clears what is left of the first fault
  fault '{"cloud":"aws","fault":"throttle","times":4}'
  curl -fsS -X DELETE "$CONTROL/requests?cloud=aws" >/dev/null
  run "$GPUPROV" check --cloud aws
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(throttled)" -eq 4 ]
}

# provision_refused: a provision that the config check stops before anything is made (exit 2).
provision_refused() {
  run "$GPUPROV" provision --name settings-vm --cloud "$1" --no-k8s
  echo "$output"
  [ "$status" -eq 2 ]
  [ ! -e "$GPUPROV_HOME/state/settings-vm.json" ]
}

@test "settings: a mistake inside the retry table or a list is refused with file:line (exit 2)" {
  printf '[clouds.aws.retry]\nmax_attempts = 2\nmax_atempts = 3\n' >"$GPUPROV_HOME/config.toml"
  provision_refused aws
  [[ "$output" == *"config.toml:3: unknown key 'max_atempts' in clouds.aws.retry; the aws driver's retry accepts: attempt_timeout_ms, base_delay_ms, max_attempts,"* ]]
  printf '[clouds.aws]\nretry = {max_attempts = "2"}\n' >"$GPUPROV_HOME/config.toml"
  provision_refused aws
  [[ "$output" == *"config.toml:2: key 'clouds.aws.retry.max_attempts' must be an integer for the aws driver, not a string"* ]]
  printf '[clouds.aws]\nregions = "us-west-2"\n' >"$GPUPROV_HOME/config.toml"
  provision_refused aws
  [[ "$output" == *"config.toml:2: key 'clouds.aws.regions' must be a string list for the aws driver, not a string"* ]]
  [[ "$output" == *'regions = ["a", "b"]'* ]]
  printf '[clouds.aws]\nregions = ["us-west-2", 3]\n' >"$GPUPROV_HOME/config.toml"
  provision_refused aws
  [[ "$output" == *"config.toml:2: key 'clouds.aws.regions' must hold only strings, not an integer"* ]]
}

@test "settings: a former key name is read with a warning naming the current one" {
  export MY_LAMBDA_KEY="$LAMBDA_API_KEY"
  unset LAMBDA_API_KEY
  printf '[clouds.lambda]\napi_key_env = "MY_LAMBDA_KEY"\n' >"$GPUPROV_HOME/config.toml"
  run "$GPUPROV" check --cloud lambda
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"config.toml:2: key 'clouds.lambda.api_key_env' is a former name: write 'token_env'"* ]]
  [[ "$output" == *'credentials: found (from $MY_LAMBDA_KEY)'* ]]
  # The current name: no warning.
  printf '[clouds.lambda]\ntoken_env = "MY_LAMBDA_KEY"\n' >"$GPUPROV_HOME/config.toml"
  run "$GPUPROV" check --cloud lambda
  [ "$status" -eq 0 ]
  [[ "$output" != *"former name"* ]]
  # Both: refused, naming the line to remove.
  printf '[clouds.lambda]\ntoken_env = "MY_LAMBDA_KEY"\napi_key_env = "X"\n' >"$GPUPROV_HOME/config.toml"
  provision_refused lambda
  [[ "$output" == *"config.toml:3: key 'clouds.lambda.api_key_env' is the former name of 'token_env', which is set too"* ]]
}

@test "settings: gpuprov drivers NAME shows list and table keys, the table's members and the former names" {
  run "$GPUPROV" drivers primeintellect
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"retry                     table"* ]]
  [[ "$output" == *"retry.max_attempts        integer"* ]]
  [[ "$output" == *"http_max_attempts -> retry.max_attempts"* ]]
  [[ "$output" == *"delete_timeout_s -> delete_wait_seconds"* ]]
  run "$GPUPROV" drivers aws
  [[ "$output" == *"regions"*"string list"* ]]
}

@test "settings: a driver with a capability bit this gpuprov does not know is listed and usable" {
  run "$GPUPROV" --driver-path "$BUILD_DIR/tests/fixture-drivers" drivers
  echo "$output"
  [[ "$output" == *"newcap  0.0.1  ABI 1.5  boot:none,no-open-ports,no-kubernetes,vm-lifecycle,unknown:0x10000000000"* ]]
  [[ "$output" != *"newcap  BROKEN"* ]]
}
