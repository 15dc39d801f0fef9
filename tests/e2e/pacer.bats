#!/usr/bin/env bats
# Pacing per API key across processes (issue 30): Lambda counts its documented rate (about 1
# request/s) per key, not per process, so a second gpuprov started right after the first met
# the limit on its first request. The drivers now pace in a shared folder of the gpuprov home
# (~/.gpu-provisioner/pacer, one file per cloud and key hash; plugins/common/pacer.h). Against
# the Lambda emulator with its rate limit enforced (the default): its request log and its
# /counts rate_limited show that no 429 reached any of the commands.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
  export LAMBDA_API_KEY="secret_pacer_$$_lambda_api_key"
  own_homes
  start_emulator memory --clouds lambda --backend memory --boot-seconds 1
}

teardown_file() {
  stop_emulators
}

setup() {
  use_emulator memory
  # The emulator forgets its counts and paces; the request log starts empty.
  curl -fsS -X POST "$CONTROL/reset" -d '{}' >/dev/null
  curl -fsS -X DELETE "$CONTROL/requests?cloud=lambda" >/dev/null
}

# statuses: the HTTP statuses of the Lambda requests in the emulator's log, one line each.
statuses() {
  curl -fsS "$CONTROL/requests?cloud=lambda" |
    /usr/bin/python3 -c 'import json,sys; [print(r["status"]) for r in json.load(sys.stdin)["requests"]]'
}

@test "two gpuprov commands back to back with one Lambda key: the second waits its turn, no 429" {
  local start took
  start=$(date +%s%N)
  run "$GPUPROV" check --cloud lambda
  echo "$output"
  [ "$status" -eq 0 ]
  run "$GPUPROV" check --cloud lambda
  echo "$output"
  [ "$status" -eq 0 ]
  took=$((($(date +%s%N) - start) / 1000000))
  echo "two checks took ${took} ms; statuses: $(statuses | tr '\n' ' ')"
  [ "$(statuses | wc -l)" -eq 2 ] # one request each, no retry
  [ "$(statuses | grep -c '^429$')" -eq 0 ]
  [ "$(count lambda rate_limited)" -eq 0 ]
  [ "$took" -ge 900 ] # the second request went out about a second after the first

  # The shared folder: private, one file per key hash, the key itself nowhere in it.
  [ "$(file_mode "$GPUPROV_HOME/pacer")" = 700 ]
  local files
  files=("$GPUPROV_HOME"/pacer/*)
  [ "${#files[@]}" -eq 1 ]
  [ "$(file_mode "${files[0]}")" = 600 ]
  [[ "$(basename "${files[0]}")" =~ ^[0-9a-f]{64}$ ]]
  [ -z "$(grep -rl "$LAMBDA_API_KEY" "$GPUPROV_HOME/pacer")" ]
}

@test "three gpuprov commands at once with one Lambda key take successive slots, no 429" {
  local start took pids=() p
  start=$(date +%s%N)
  for p in 1 2 3; do
    "$GPUPROV" check --cloud lambda >"$BATS_TEST_TMPDIR/check.$p" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  took=$((($(date +%s%N) - start) / 1000000))
  echo "three checks took ${took} ms; statuses: $(statuses | tr '\n' ' ')"
  [ "$(statuses | wc -l)" -eq 3 ]
  [ "$(statuses | grep -c '^429$')" -eq 0 ]
  [ "$(count lambda rate_limited)" -eq 0 ]
  [ "$took" -ge 1800 ]
}
