#!/usr/bin/env bats
# Smoke of the benchmark scripts (bench/): each runs in its BENCH_QUICK form (small settings,
# one run, tables to a temp dir) and must produce its tables. The numbers are not checked
# against targets here (benchmarks are not timed tests); what is checked are facts that hold at
# any speed: no provision failed, the VMs all landed in the shared home, and the SSH round
# trips gpuprov logs are the exec requests the VM's sshd saw.

load helpers

@test "bench/fleet.sh: three provisions at once in one home, none failed, API calls counted" {
  run env BENCH_QUICK=1 GPUPROV_BUILD_DIR="$BUILD_DIR" bash "$REPO_ROOT/bench/fleet.sh"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"| 3 at once / one | "*"x | <= 2x: "* ]]
  [[ "$output" == *"| failed provisions (timed runs + counted batch) | 0 | 0: met |"* ]]
  [[ "$output" == *"| VMs recorded in the shared home after the counted batch | 3 of 3, 3 distinct addresses | 3 |"* ]]
  [[ "$output" == *"| 3 | 1.0 | \`POST /v2/droplets\` |"* ]]
  [[ "$output" =~ \|\ API\ calls\ per\ VM\ \(counted\ batch\)\ \|\ [0-9]+\.[0-9]\ \| ]]
}

@test "bench/fleet.sh BENCH_BACKEND=memory: three control planes at once, each ended at the SSH wait with its VM running and recorded" {
  run env BENCH_QUICK=1 BENCH_BACKEND=memory GPUPROV_BUILD_DIR="$BUILD_DIR" bash "$REPO_ROOT/bench/fleet.sh"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" =~ \|\ 3\ at\ once\ /\ one,\ control\ plane\ \|\ [0-9]+\.[0-9]+x\ \|\ \<=\ 2x:\ (met|missed)\ \| ]]
  [[ "$output" == *"| failed provisions (timed runs + counted + unlimited batch) | 0 | 0: met |"* ]]
  [[ "$output" == *"| VMs recorded in the shared home after the counted batch | 3 of 3, 3 distinct addresses | 3 |"* ]]
  [[ "$output" == *"| 3 | 1.0 | 0 | \`POST /v2/droplets\` |"* ]]
  [[ "$output" =~ \|\ API\ calls\ per\ VM\ \(counted\ batch\)\ \|\ [0-9]+\.[0-9]\ \| ]]
}

@test "bench/cluster.sh: both routes on one cloud, overhead, sshd-counted connections and round trips, RSS" {
  run env BENCH_QUICK=1 GPUPROV_BUILD_DIR="$BUILD_DIR" bash "$REPO_ROOT/bench/cluster.sh"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"| realistic | boot route | "* ]]
  [[ "$output" == *"| realistic | SSH route | "* ]]
  [[ "$output" =~ \|\ realistic\ \|\ [0-9.]+x\ \|\ \<=\ 0\.6x ]]
  # One connection at least was seen by each VM's sshd, and every round trip gpuprov logged was
  # one exec request there (the counts agree).
  [[ "$output" =~ \|\ boot\ \|\ [1-9][0-9]*\ \|\ [0-9]+\ \|\ [0-9]+\ \|\ [0-9]+\ \|\ [0-9.]+\ \|\ connections\ \<=\ 3:\ [a-z]+\;\ probe\ =\ 1\ round\ trip:\ met ]]
  [[ "$output" =~ \|\ ssh\ \|\ [1-9][0-9]*\ \|\ [0-9]+\ \|\ [0-9]+\ \|\ [0-9]+\ \|\ [0-9.]+\ \|\ connections\ \<=\ 3:\ [a-z]+\;\ probe\ =\ 1\ round\ trip:\ met ]]
}

@test "bench/address.sh: certificate re-runs per cloud, none where the VM learns its address" {
  run env BENCH_QUICK=1 GPUPROV_BUILD_DIR="$BUILD_DIR" bash "$REPO_ROOT/bench/address.sh"
  echo "$output"
  [ "$status" -eq 0 ]
  # Hyperstack's VM reads the floating IP from OpenStack's EC2-compatible metadata; Lambda's has
  # neither a metadata service nor the address on its interface (section 6 of
  # plugins/hyperstack/REFERENCE.md and plugins/lambda/REFERENCE.md).
  [[ "$output" =~ \|\ hyperstack\ \|\ \`openstack\`\ \|\ boot\ \|\ 0\ \|\ \ \|\ [0-9.]+\ \| ]]
  [[ "$output" =~ \|\ lambda\ \|\ \`interface\`\ \|\ ssh\ \|\ 1\ \|\ the\ installer\ re-ran\ with\ --public-ip ]]
}
