#!/usr/bin/env bats
# Spot VMs in tunnel access mode (issue 34 part 2, docs/driver-protocol.md "Spot VMs"; the direct
# access recovery is spot.bats'): on Verda a spot k3s node on a real test VM (docker backend)
# that the emulator preempts (POST /preempt: Verda discontinues the spot instance). list shows
# PREEMPTED with the reason, `gpuprov watch` brings it back (a new VM of the same name and
# spec, the same kubeconfig file and context), and a `gpuprov tunnel` started before the
# preemption follows the new VM (its record's address) and keeps serving: kubectl works through
# the rewritten kubeconfig over the same tunnel.

load helpers
load spot
bats_require_minimum_version 1.5.0

setup_file() {
  export VERDA_CLIENT_ID="gpuprov-e2e-$$"
  export VERDA_CLIENT_SECRET="secret_e2e_$$_verda_spot"
  export HOME="$BATS_FILE_TMPDIR/userhome" # no ~/.verda of the machine's user
  mkdir -p "$HOME"
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  mkdir -p "$GPUPROV_HOME"
  # The VM's tunnel port is one nothing else here holds, so its kubeconfig works as written.
  TUNNEL_FIRST_PORT=$(free_port)
  printf '[defaults]\ntunnel_first_port = %s\n\n[defaults.timeouts]\nssh_wait_seconds = 180\nboot_install_wait_seconds = 300\napi_wait_seconds = 120\n[clouds.verda]\npoll_interval_ms = 500\n' \
    "$TUNNEL_FIRST_PORT" >"$GPUPROV_HOME/config.toml"
  start_emulator docker --clouds verda --backend docker
}

teardown_file() {
  stop_emulators
}

teardown() {
  [ -z "${WATCH_PID:-}" ] || stop_child INT "$WATCH_PID" gpuprov || true
  end_docker_test
}

@test "spot: verda tunnel access: preempted, PREEMPTED in list, watch brings it back, the running tunnel follows the new VM and kubectl works through the rewritten kubeconfig" {
  use_emulator docker
  run "$GPUPROV" provision --name vd-spot --cloud verda --gpus H100:1 --spot --no-smoke-test
  echo "$output"
  [ "$status" -eq 0 ]
  # The emulator's spot_price for 1H100.80S.30V, with its on-demand price.
  [[ "$output" == *"offer: 1H100.80S.30V in "*" at \$0.99/h spot (on demand \$2.19/h)"* ]]
  [ "$(field vd-spot spot)" = True ]
  [ "$(field vd-spot access)" = tunnel ]
  local kc="$GPUPROV_HOME/kube/vd-spot.yaml" port
  port=$(KUBECONFIG="$kc" kubectl config view -o jsonpath='{.clusters[0].cluster.server}')
  port=${port##*:}
  start_tunnel vd-spot "$port"
  expect_cluster_ready vd-spot

  preempt_and_watch vd-spot verda vd-spot \
    "spot instance discontinued by Verda (status discontinued)"
  # The same kubeconfig file and context, the same local tunnel port.
  [ "$(KUBECONFIG="$kc" kubectl config current-context)" = gpuprov-vd-spot ]
  grep -q "server: https://127.0.0.1:$port" "$kc"
  # The tunnel started before the preemption still runs, followed the new VM and serves it.
  kill -0 "$TUNNEL_PID"
  local ok=
  for _ in $(seq 1 60); do
    if expect_cluster_ready vd-spot; then ok=1 && break; fi
    sleep 1
  done
  cat "$BATS_TEST_TMPDIR/tunnel.err"
  [ -n "$ok" ]
  grep -q "VM vd-spot was replaced (its record names SSH on root@\[$(field vd-spot address)\]:22 now): reconnecting the tunnel to the new VM" "$BATS_TEST_TMPDIR/tunnel.err"
  grep -q "reconnected: forwarding 127.0.0.1:$port" "$BATS_TEST_TMPDIR/tunnel.err"
  stop_child INT "$TUNNEL_PID"
  wait "$TUNNEL_PID" || true
  TUNNEL_PID=
  run "$GPUPROV" down vd-spot --yes
  [ "$status" -eq 0 ]
  expect_nothing_left verda ssh_keys scripts volumes_in_trash detached_volumes
}
