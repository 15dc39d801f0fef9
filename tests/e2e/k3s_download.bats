#!/usr/bin/env bats
# The k3s download path end to end: test VMs of the image variant WITHOUT k3s pre-staged
# (tests/fixtures/testvm, build-image.sh --variant no-k3s), whose only k3s is the simulator in a
# release mirror served on the VM's own 127.0.0.1:8089. gpuprov passes --k3s-download-url and
# --k3s-sha256 (the simulator's hash, pinned for the test) to the installer on both routes: the
# boot script on DigitalOcean and the SSH push on Prime Intellect. Each reaches a validated
# cluster that the real kubectl uses. Also: a wrong hash fails naming the mismatch with no k3s
# installed, and an unpinned --k3s-version without --k3s-sha256 is refused before anything exists.

load helpers

MIRROR="http://127.0.0.1:8089" # inside each VM: its own loopback (see the variant's README)

setup_file() {
  VARIANT="$(bash "$REPO_ROOT/tests/fixtures/testvm/build-image.sh" --variant no-k3s)"
  SIM_SHA="$(sha256sum "$REPO_ROOT/tests/fixtures/k3s-simulator/k3s" | cut -d' ' -f1)"
  PINNED="$(sed -n 's/^readonly K3S_PINNED_VERSION="\(.*\)"$/\1/p' "$REPO_ROOT/installer/gpuprov-install.sh")"
  export VARIANT SIM_SHA PINNED
  start_docker_clouds download digitalocean,primeintellect --image "$VARIANT"
  timeouts 180 120
}

teardown_file() {
  stop_emulators
}

setup() {
  use_emulator emu
}

teardown() {
  end_docker_test
}

# on VM CMD...: runs CMD on the VM over gpuprov ssh.
# expect_downloaded VM: the VM started without k3s, and the installer fetched it from the mirror
# in the VM and installed it after checking the simulator's hash.
expect_downloaded() {
  local log
  on "$1" test -d /srv/gpuprov-k3s-release || { echo "not the no-k3s variant" >&2; return 1; }
  log=$(on "$1" cat /var/log/gpuprov-install.log) || return 1
  echo "$log"
  [[ "$log" == *"downloading $MIRROR/${PINNED//+/%2B}/k3s (attempt 1 of "* ]] || return 1
  [[ "$log" == *"installed k3s $PINNED at /usr/local/bin/k3s (sha256 $SIM_SHA)"* ]] || return 1
  on "$1" journalctl -u gpuprov-testvm-k3s-release --no-pager | grep -q "GET /${PINNED//+/%2B}/k3s HTTP"
}

@test "boot route (DigitalOcean): a VM without k3s downloads it from the mirror at boot; validated cluster, kubectl works" {
  run "$GPUPROV" -v provision --name dl-boot --cloud digitalocean --gpus H100:1 \
    --k3s-download-url "$MIRROR" --k3s-sha256 "$SIM_SHA"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"k3s_download_url=$MIRROR (--k3s-download-url from the command line)"* ]]
  expect_k8s_by_boot_route "$output"
  [[ "$output" == *"nvidia.com/gpu: 1"* ]]
  expect_cluster_ready dl-boot
  run env KUBECONFIG="$GPUPROV_HOME/kube/dl-boot.yaml" kubectl get nodes -o jsonpath='{.items[0].status.nodeInfo.kubeletVersion}'
  [ "$output" = "$PINNED" ]
  expect_downloaded dl-boot
  # The boot script ran it (cloud-init), not an SSH push.
  run on dl-boot "grep -c 'installed k3s $PINNED' /var/log/cloud-init-output.log"
  [ "$output" -ge 1 ]
  run "$GPUPROV" down dl-boot
  [ "$status" -eq 0 ]
  expect_nothing_left digitalocean
}

@test "SSH route (Prime Intellect): the pushed installer downloads k3s from the mirror; kubectl works through the tunnel" {
  run "$GPUPROV" -v provision --name dl-ssh --cloud primeintellect --gpus H100:1 \
    --k3s-download-url "$MIRROR" --k3s-sha256 "$SIM_SHA"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"probe: push-installer: not installed yet"* ]]
  [[ "$output" == *"node round trip "*": push installer"* ]]
  [[ "$output" == *"(ssh route: the cloud runs no boot script; tunnel access;"* ]]
  expect_downloaded dl-ssh
  run nodes_through_tunnel dl-ssh
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *" Ready "*"$PINNED"* ]]
  run "$GPUPROV" down dl-ssh
  [ "$status" -eq 0 ]
  expect_nothing_left primeintellect
}

@test "a wrong --k3s-sha256 fails the cluster step naming the mismatch; no k3s is installed; the VM is kept" {
  local wrong
  wrong=$(printf '0%.0s' {1..64})
  run "$GPUPROV" provision --name dl-bad --cloud primeintellect --gpus H100:1 \
    --k3s-download-url "$MIRROR" --k3s-sha256 "$wrong"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"the k3s installer failed on dl-bad"*"sha256 mismatch for $MIRROR/${PINNED//+/%2B}/k3s: got $SIM_SHA, want $wrong (binary discarded)"* ]]
  run on dl-bad test -e /usr/local/bin/k3s
  [ "$status" -eq 1 ]
  run on dl-bad cat /var/lib/gpuprov/install-status.json
  echo "$output"
  [[ "$output" == *'"failed_step": "k3s-binary"'* ]]
  [[ "$output" == *'"message": "sha256 mismatch for '* ]]
  run "$GPUPROV" down dl-bad
  [ "$status" -eq 0 ]
  expect_nothing_left primeintellect
}

@test "--k3s-version other than the pinned one without --k3s-sha256 is refused before anything is created" {
  run "$GPUPROV" provision --name dl-unpinned --cloud digitalocean --gpus H100:1 --k3s-version v1.30.2+k3s1
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"--k3s-version v1.30.2+k3s1 (--k3s-version from the command line) has no known sha256"* ]]
  [[ "$output" == *"--k3s-sha256"* ]]
  [ "$(count digitalocean instances)" -eq 0 ]
  [ "$(count digitalocean firewalls)" -eq 0 ]
  [ ! -e "$GPUPROV_HOME/state/dl-unpinned.json" ]
  # With a hash it is accepted and reaches the node, whose mirror has no such release (HTTP 404).
  run "$GPUPROV" provision --name dl-unpinned --cloud primeintellect --gpus H100:1 \
    --k3s-version v1.30.2+k3s1 --k3s-sha256 "$SIM_SHA" --k3s-download-url "$MIRROR"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"download of $MIRROR/v1.30.2%2Bk3s1/k3s failed: HTTP 404"* ]]
  run "$GPUPROV" down dl-unpinned
  [ "$status" -eq 0 ]
  expect_nothing_left primeintellect
}
