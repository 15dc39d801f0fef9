#!/usr/bin/env bats
# The NVIDIA container toolkit's apt path through `gpuprov provision`: test VMs of the image's apt
# variant (tests/fixtures/testvm, build-image.sh --variant apt: no runtime pre-installed, a signed
# repo laid out as NVIDIA's on the VM's own 127.0.0.1:8090, a broken third-party apt source, apt
# timers on). gpuprov passes --nvidia-repo-url and --nvidia-key-fingerprint (the variant's key)
# to the installer on both routes: the boot script on DigitalOcean, where the emulator's apt_busy
# fault has another apt run hold apt's locks from before cloud-final, and the SSH push on Prime
# Intellect, with the settings from config.toml. Each ends in a validated cluster whose toolkit
# real apt installed from that repo; the lock wait shows in provision's progress.

load helpers

REPO_URL="http://127.0.0.1:8090" # inside each VM: its own loopback (see the variant's README)

setup_file() {
  VARIANT="$(bash "$REPO_ROOT/tests/fixtures/testvm/build-image.sh" --variant apt)"
  FPR="$(docker image inspect -f '{{index .Config.Labels "org.gpuprov.testvm.nvidia-key"}}' "$VARIANT")"
  export VARIANT FPR
  start_docker_clouds apt digitalocean,primeintellect --image "$VARIANT"
  timeouts 240 120
}

teardown_file() {
  stop_emulators
}

setup() {
  use_emulator emu
}

teardown() {
  end_docker_test
  timeouts 240 120
}

# expect_toolkit_from_the_repo VM: real apt installed NVIDIA's toolkit from the VM's signed repo
# (its requests in the repo server's journal), reading only NVIDIA's list: the broken source is
# there and did not matter.
expect_toolkit_from_the_repo() {
  local status_line requests
  # One word: the VM's shell reads it (dpkg-query's format stays quoted there).
  status_line=$(on "$1" "dpkg-query -W -f '\${Status}' nvidia-container-toolkit") || return 1
  echo "dpkg: $status_line"
  [ "$status_line" = "install ok installed" ] || return 1
  on "$1" test -x /usr/bin/nvidia-container-runtime || return 1
  on "$1" test -s /etc/apt/sources.list.d/gpuprov-testvm-broken.list || return 1
  requests=$(on "$1" journalctl -u gpuprov-testvm-nvidia-repo --no-pager) || return 1
  echo "$requests"
  [[ "$requests" == *'"GET /stable/deb/'*'InRelease HTTP'* ]] || return 1
  [[ "$requests" == *'"GET /stable/deb/'*'nvidia-container-toolkit_'*'.deb HTTP'* ]]
}

@test "boot route (DigitalOcean): apt's locks held at boot are waited for, said in progress; the toolkit comes from the repo setting; CUDA check passes" {
  fault '{"cloud":"digitalocean","fault":"apt_busy","seconds":45}'
  run "$GPUPROV" -v provision --name apt-boot --cloud digitalocean --gpus H100:1 \
    --nvidia-repo-url "$REPO_URL" --nvidia-key-fingerprint "$FPR"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"nvidia_repo_url=$REPO_URL (--nvidia-repo-url from the command line)"* ]]
  [[ "$output" == *"nvidia_key_fingerprint=$FPR (--nvidia-key-fingerprint from the command line)"* ]]
  # The wait as provision's progress said it, with the holder apt names.
  [[ "$output" == *"the boot install is waiting for apt's lock (at most 900s): Could not get lock /var/lib/"*"lock"*"It is held by process "*" (python3)"* ]]
  expect_k8s_by_boot_route "$output"
  assert_cuda_check
  expect_cluster_ready apt-boot
  run on apt-boot cat /var/log/gpuprov-install.log
  [[ "$output" == *"waiting for apt's lock ("* ]]
  [[ "$output" == *"fetching NVIDIA's apt key from $REPO_URL/gpgkey"* ]]
  expect_toolkit_from_the_repo apt-boot
  # The boot script ran the installer (cloud-init), not an SSH push.
  run on apt-boot "grep -c \"waiting for apt's lock\" /var/log/cloud-init-output.log"
  [ "$output" -ge 1 ]
  run "$GPUPROV" down apt-boot
  [ "$status" -eq 0 ]
  expect_nothing_left digitalocean
}

@test "SSH route (Prime Intellect): the repo and its key from config.toml reach the pushed installer" {
  # Written as a user might: a trailing '/', the fingerprint in lower case.
  {
    printf '[defaults]\nnvidia_repo_url = "%s/"\nnvidia_key_fingerprint = "%s"\n' "$REPO_URL" "${FPR,,}"
    cat "$GPUPROV_HOME/config.toml"
  } >"$BATS_TEST_TMPDIR/config.toml"
  mv "$BATS_TEST_TMPDIR/config.toml" "$GPUPROV_HOME/config.toml"
  run "$GPUPROV" -v provision --name apt-ssh --cloud primeintellect --gpus H100:1
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"nvidia_repo_url=$REPO_URL (from $GPUPROV_HOME/config.toml [defaults])"* ]]
  [[ "$output" == *"nvidia_key_fingerprint=$FPR (from $GPUPROV_HOME/config.toml [defaults])"* ]]
  [[ "$output" == *"node round trip "*": push installer"* ]]
  assert_cuda_check
  expect_toolkit_from_the_repo apt-ssh
  run "$GPUPROV" down apt-ssh
  [ "$status" -eq 0 ]
  expect_nothing_left primeintellect
}

@test "a plain-http repo that is not on loopback is refused naming the field, before anything is created" {
  run "$GPUPROV" provision --name apt-http --cloud digitalocean --gpus H100:1 \
    --nvidia-repo-url http://mirror.example/nvidia
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *'--nvidia-repo-url: "http://mirror.example/nvidia" (--nvidia-repo-url from the command line) is plain http'* ]]
  [ "$(count digitalocean instances)" -eq 0 ]
  [ ! -e "$GPUPROV_HOME/state/apt-http.json" ]
}
