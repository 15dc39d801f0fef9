#!/usr/bin/env bats
# gpuprov on Google Compute Engine with the credentials of issue 17, through the emulator
# (tests/emulators/gce_api.cc), which is also the token endpoint, the Security Token Service,
# IAM Credentials and the subject-token URL (values it accepts: tests/emulators/README.md):
# - docker backend: a workload identity federation file (external_account: a URL-sourced
#   subject token exchanged at STS, then a service account impersonated) provisions a real
#   test VM, SSH works, down leaves nothing; no token reaches gpuprov's output or files.
# - memory backend: gcloud's own files (authorized_user ADC file, the configuration named by
#   CLOUDSDK_ACTIVE_CONFIG_NAME) with a revoked refresh token: refused before anything is made.
# Kubernetes is off (--no-k8s).

load helpers

# The workload identity pool the emulator accepts.
AUDIENCE=//iam.googleapis.com/projects/470000000001/locations/global/workloadIdentityPools/gpuprov-pool/providers/gpuprov-provider
SA_EMAIL=gpuprov-emulator@gpuprov-emulator.iam.gserviceaccount.com

setup_file() {
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  printf '[defaults.timeouts]\nssh_wait_seconds = 180\n' >"$GPUPROV_HOME/config.toml"
  # The emulator writes a service-account key of its own (its account is the one impersonated);
  # gpuprov is never pointed at that key here.
  GOOGLE_APPLICATION_CREDENTIALS="$BATS_FILE_TMPDIR/docker-key.json" \
    start_emulator docker --backend docker --clouds gcp --boot-seconds 1
  GOOGLE_APPLICATION_CREDENTIALS="$BATS_FILE_TMPDIR/memory-key.json" \
    start_emulator memory --backend memory --clouds gcp --boot-seconds 1
}

teardown_file() {
  stop_emulators
}

setup() {
  # Only what each test names: no key file, no gcloud folder of the machine, no metadata server.
  unset GOOGLE_APPLICATION_CREDENTIALS GOOGLE_CLOUD_PROJECT CLOUDSDK_CORE_PROJECT
  export CLOUDSDK_CONFIG="$BATS_TEST_TMPDIR/gcloud"
  mkdir -p "$CLOUDSDK_CONFIG"
  export GCE_METADATA_HOST=127.0.0.1:9
}

teardown() {
  reset_emulators
  rm -f "$GPUPROV_HOME"/state/*.json
}

@test "gcp: a workload identity federation file (URL subject token, STS, impersonation) provisions; down leaves nothing" {
  use_emulator docker
  local api=$GPUPROV_GCP_ENDPOINT
  export GOOGLE_APPLICATION_CREDENTIALS="$BATS_TEST_TMPDIR/wif.json"
  export GOOGLE_CLOUD_PROJECT=gpuprov-emulator
  /usr/bin/python3 - "$api" "$AUDIENCE" "$SA_EMAIL" >"$GOOGLE_APPLICATION_CREDENTIALS" <<'EOF'
import json, sys
api, audience, email = sys.argv[1:]
print(json.dumps({
    "type": "external_account",
    "audience": audience,
    "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
    "token_url": api + "/v1/token",
    "service_account_impersonation_url":
        api + "/v1/projects/-/serviceAccounts/" + email + ":generateAccessToken",
    "credential_source": {
        "url": api + "/metadata/identity/oauth2/token",
        "headers": {"Metadata": "true"},
        "format": {"type": "json", "subject_token_field_name": "access_token"},
    },
}))
EOF
  run "$GPUPROV" -v provision --name gce-wif --cloud gcp --gpus L4:1 --no-k8s
  echo "$output"
  [ "$status" -eq 0 ]
  # (The core's console redacts the value of GOOGLE_APPLICATION_CREDENTIALS, a *CREDENTIALS* name.)
  [[ "$output" == *"Google credentials from "*" (external_account)"* ]]
  [[ "$output" == *"gpuprov-emulator / $SA_EMAIL"* ]]
  [ "$(count gcp instances)" -eq 1 ]
  # The path each token took: the subject token URL, STS, generateAccessToken, then Compute.
  requests=$(curl -fsS "$CONTROL/requests?cloud=gcp" | /usr/bin/python3 -c '
import json, sys
for r in json.load(sys.stdin)["requests"]:
    print(r["method"], r["path"], "->", r["status"])')
  [[ "$requests" == *"GET /metadata/identity/oauth2/token -> 200"* ]]
  [[ "$requests" == *"POST /v1/token -> 200"* ]]
  [[ "$requests" == *":generateAccessToken -> 200"* ]]
  [[ "$requests" != *"POST /token"* ]]
  run "$GPUPROV" ssh gce-wif -- whoami
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"ubuntu"* ]]
  # No access token, STS token or subject token in gpuprov's output or files.
  run "$GPUPROV" -v list
  [[ "$output" != *"ya29."* && "$output" != *"emulator-subject-token"* ]]
  if grep -rqE 'ya29\.|emulator-subject-token' "$GPUPROV_HOME"; then false; fi
  run "$GPUPROV" down gce-wif
  echo "$output"
  [ "$status" -eq 0 ]
  expect_nothing_left gcp
}

@test "gcp: gcloud's ADC file with a revoked refresh token is refused by name before anything is made" {
  use_emulator memory
  mkdir -p "$CLOUDSDK_CONFIG/configurations"
  printf '[core]\nproject = gpuprov-emulator\n' >"$CLOUDSDK_CONFIG/configurations/config_work"
  export CLOUDSDK_ACTIVE_CONFIG_NAME=work
  /usr/bin/python3 - "$GPUPROV_GCP_ENDPOINT" >"$CLOUDSDK_CONFIG/application_default_credentials.json" <<'EOF'
import json, sys
print(json.dumps({
    "type": "authorized_user",
    "client_id": "emulator-client.apps.googleusercontent.com",
    "client_secret": "emulator-client-secret",
    "refresh_token": "1//a-revoked-refresh-token",
    "quota_project_id": "some-quota-project",
    "token_uri": sys.argv[1] + "/token",
}))
EOF
  run "$GPUPROV" provision --name gce-adc --cloud gcp --gpus L4:1 --no-k8s
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" == *"invalid_grant"* ]]
  [[ "$output" == *"application_default_credentials.json (authorized_user)"* ]]
  [[ "$output" != *"a-revoked-refresh-token"* && "$output" != *"emulator-client-secret"* ]]
  [ ! -e "$GPUPROV_HOME/state/gce-adc.json" ]
  expect_nothing_left gcp
}
