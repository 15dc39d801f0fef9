# shellcheck shell=bash
# shellcheck disable=SC2154  # work and BUILD_DIR: set by the caller
# The DigitalOcean emulator (docker backend) for bench/cluster.sh and bench/multi_node.sh, each
# instance's endpoints in "$work/NAME.out"; the caller sets BUILD_DIR and work, and traps
# cleanup on EXIT (it stops every emulator started here and removes $work).

pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}

# start_emulator NAME ARGS...: one emulator; its endpoints in $work/NAME.out.
start_emulator() {
  local name=$1 _
  shift
  "$BUILD_DIR/bin/gpuprov-emulator" --backend docker --clouds digitalocean "$@" \
    >"$work/$name.out" 2>"$work/$name.err" &
  pids+=($!)
  for _ in $(seq 1 100); do grep -q '^control ' "$work/$name.out" && return 0; sleep 0.2; done
  echo "emulator $name did not start: $(cat "$work/$name.err")" >&2
  exit 1
}

# endpoint NAME KEY: emulator NAME's URL for KEY (a cloud, or control).
endpoint() { awk -v k="$2" '$1==k{print $2}' "$work/$1.out"; }

# slow_k3s_start NAME INSTALL API: on every VM emulator NAME makes from now on, the k3s
# simulator's first start spends INSTALL s installing and its API listens API s after that
# (fault k3s_faults).
slow_k3s_start() {
  curl -fsS -X POST "$(endpoint "$1" control)/faults" -d "{\"cloud\":\"digitalocean\",\"fault\":\"k3s_faults\",\"times\":-1,\"value\":\"install-seconds $2\\napi-start-seconds $3\"}" >/dev/null
}
