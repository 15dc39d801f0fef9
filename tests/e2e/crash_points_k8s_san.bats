#!/usr/bin/env bats
# Crash points of a Kubernetes run (issue 15), on real test VMs (the emulator's docker backend),
# here the boot route with direct access on DigitalOcean, AWS and GCP, with the metadata service
# missing so that the installer is re-run for the certificate's SAN: the host key pinned, that
# re-run, the kubeconfig written; and DigitalOcean after a failed boot install, when the installer
# is pushed over SSH (crash_points_k8s.bats and crash_points_k8s_tunnel.bats have the other
# routes). gpuprov is
# killed (GPUPROV_TEST_CRASH_AT, a GPUPROV_TEST_HOOKS build) right after the step; the same
# command again must end as an uninterrupted run does (exit 0, phase ready, one VM, the real
# kubectl reaching the node, nothing installed twice), and `down` must bring the emulator's
# census back to what it was. Each test that passes adds its rows to $GPUPROV_CRASH_TABLE_K8S_SAN
# (default <build dir>/crash-table-k8s-san.md).

load helpers
load crash_points

setup_file() {
  export K8S_TABLE=${GPUPROV_CRASH_TABLE_K8S_SAN:-$BUILD_DIR/crash-table-k8s-san.md}
  export DIGITALOCEAN_TOKEN="dop_v1_crashk8s_$$_secret_token"
  export AWS_ACCESS_KEY_ID="AKIASAN$$TESTKEY0001" AWS_SECRET_ACCESS_KEY="san/$$/secret+access+key"
  unset AWS_SESSION_TOKEN AWS_PROFILE AWS_DEFAULT_REGION
  export AWS_REGION=us-east-1
  # No ~/.aws or gcloud configuration of the machine's user; the emulator writes the GCP key.
  export HOME="$BATS_FILE_TMPDIR/userhome"
  mkdir -p "$HOME"
  export GOOGLE_APPLICATION_CREDENTIALS="$BATS_FILE_TMPDIR/gcp-key.json"
  k8s_file_setup digitalocean,aws,gcp
}

teardown_file() {
  stop_emulators
}

setup() {
  k8s_setup
}

teardown() {
  k8s_teardown
}

@test "digitalocean (boot route, direct): crash after the host key, the SAN re-run, the kubeconfig" {
  # The SAN re-run: without the metadata service the boot install cannot learn the public
  # address, the certificate does not cover it and gpuprov re-runs the installer with
  # --public-ip. The VM is made by runs killed after the host key is pinned, after that re-run
  # and after the kubeconfig is written; the run below is their re-run.
  fault '{"cloud":"digitalocean","fault":"no_metadata"}'
  cluster_crash_chain digitalocean ck-san "host-key-pinned san-rerun kubeconfig-written"
  [[ "$CHAIN_OUTPUT" == *"the API certificate does not cover"* ]]
  run "$GPUPROV" -v provision --name ck-san --cloud digitalocean
  echo "$output"
  [ "$status" -eq 0 ]
  # The crashed run's re-run with --public-ip stands: no second one, nothing pushed.
  cluster_crash_converged digitalocean ck-san "$output"
  expect_cluster_ready ck-san
  run "$GPUPROV" down ck-san
  [ "$status" -eq 0 ]
  [ ! -s "$GPUPROV_HOME/known_hosts" ]
  cluster_crash_passed digitalocean "boot, direct"
}

# san_chain CLOUD NAME ARGS...: the SAN re-run's chain on CLOUD (its boot install finds no
# metadata service, so no public address), the re-run that converges, down, the census.
san_chain() {
  local cloud=$1 name=$2
  shift 2
  fault "{\"cloud\":\"$cloud\",\"fault\":\"no_metadata\"}"
  cluster_crash_chain "$cloud" "$name" "host-key-pinned san-rerun kubeconfig-written" "$@"
  [[ "$CHAIN_OUTPUT" == *"the API certificate does not cover"* ]]
  run "$GPUPROV" -v provision --name "$name" --cloud "$cloud" "$@"
  echo "$output"
  [ "$status" -eq 0 ]
  cluster_crash_converged "$cloud" "$name" "$output"
  expect_cluster_ready "$name"
  run "$GPUPROV" down "$name"
  [ "$status" -eq 0 ]
  cluster_crash_passed "$cloud" "boot, direct"
}

@test "aws (boot route, direct, no metadata service): crash after the host key, the SAN re-run, the kubeconfig" {
  san_chain aws ck-san-aws --gpus L4:1
}

@test "gcp (boot route, direct, no metadata service): crash after the host key, the SAN re-run, the kubeconfig" {
  san_chain gcp ck-san-gcp --gpus L4:1
}

@test "digitalocean (boot install failed, then pushed over SSH): crash after the host key, the push, the kubeconfig" {
  # The boot script fails (cloud-init status: error): gpuprov turns to the SSH route and pushes
  # the installer. The VM is made by runs killed after the host key, after that push and after
  # the kubeconfig; the run below is their re-run.
  fault '{"cloud":"digitalocean","fault":"boot_script_fails"}'
  cluster_crash_chain digitalocean ck-push "host-key-pinned installer-pushed kubeconfig-written"
  run "$GPUPROV" -v provision --name ck-push --cloud digitalocean
  echo "$output"
  [ "$status" -eq 0 ]
  cluster_crash_converged digitalocean ck-push "$output"
  expect_cluster_ready ck-push
  run "$GPUPROV" down ck-push
  [ "$status" -eq 0 ]
  cluster_crash_passed digitalocean "boot failed, ssh push, direct"
}
