#!/usr/bin/env bats
# The command-line surface (issue 16, items 4 to 7) on the real gpuprov: --version and
# `version -o json`, `help CMD`, "did you mean", -o json|yaml|ndjson in every spelling, list's
# columns, completion through bash-completion's machinery (and zsh and fish parsing the
# scripts), the man page through man(1), the in-place status line and the questions on a
# pseudo-terminal (pty_run.py), on the Docker test cloud and the Lambda emulator.

load helpers
bats_require_minimum_version 1.5.0

PTY="$REPO_ROOT/tests/e2e/pty_run.py"

setup_file() {
  export GPUPROV_HOME="$BATS_FILE_TMPDIR/home"
  export CLI_VM="cli-$$"
  export LAMBDA_API_KEY="secret_e2e_$$_lambda_api_key"
  export HOME="$BATS_FILE_TMPDIR/userhome" # no ~/.lambda_cloud of the machine's user
  mkdir -p "$HOME" "$GPUPROV_HOME"
  remove_vm_containers "$CLI_VM"
  start_emulator memory --clouds lambda --backend memory --boot-seconds 1
}

teardown_file() {
  remove_vm_containers "$CLI_VM"
  stop_emulators
}

# yaml_equals_json JSON_FILE YAML_FILE: both files hold the same data.
yaml_equals_json() {
  /usr/bin/python3 -c '
import json, sys, yaml
j = json.load(open(sys.argv[1]))
y = yaml.safe_load(open(sys.argv[2]))
assert j == y, (j, y)
' "$1" "$2"
}

@test "--version and version -o json say the version, the ABI, the build and the drivers dirs" {
  run "$GPUPROV" --version
  [ "$status" -eq 0 ]
  [[ "$output" =~ ^gpuprov\ [0-9]+\.[0-9]+\.[0-9]+$ ]]
  version=${output#gpuprov }
  for spelling in "-o json" "-ojson" "--output=json" "--output json"; do
    # shellcheck disable=SC2086 # the spelling is two words on purpose
    run "$GPUPROV" version $spelling
    [ "$status" -eq 0 ]
    echo "$output" | /usr/bin/python3 -c '
import json, sys
v = json.load(sys.stdin)
assert v["version"] == sys.argv[1], v
assert v["abi"] == "%d.%d" % (v["abi_major"], v["abi_minor"]), v
assert v["build"]["compiler"].startswith("compiler "), v
assert any(d["path"].endswith("/drivers") for d in v["drivers_dirs"]), v
' "$version"
  done
  run "$GPUPROV" -ojson version # a global option before the command
  [ "$status" -eq 0 ]
  [[ "$output" == "{"* ]]
  run "$GPUPROV" version
  [[ "$output" == "gpuprov $version (driver ABI "* ]]
  [[ "$output" == *"drivers: searched in"* ]]
}

@test "without its remote module gpuprov runs the local commands and names the file ssh needs" {
  # A copy of the executable in a prefix of its own: <prefix>/lib/gpuprov holds no module.
  prefix="$BATS_TEST_TMPDIR/prefix"
  mkdir -p "$prefix/bin" "$prefix/lib/gpuprov"
  cp "$GPUPROV" "$prefix/bin/gpuprov"
  # The configured install folder is searched last; an installed gpuprov there would be found.
  install_dir=$("$GPUPROV" version -o json | /usr/bin/python3 -c '
import json, os, sys
print(next(os.path.dirname(d["path"]) for d in json.load(sys.stdin)["drivers_dirs"]
           if d["origin"] == "install prefix"))')
  [ -n "$install_dir" ]
  run "$prefix/bin/gpuprov" --help
  [ "$status" -eq 0 ]
  run "$prefix/bin/gpuprov" list --no-refresh
  [ "$status" -eq 0 ]
  if [ ! -e "$install_dir/libgpuprov-remote.so" ]; then
    run "$prefix/bin/gpuprov" ssh "$CLI_VM" -- true
    [ "$status" -eq 1 ]
    [[ "$output" == *"cannot find libgpuprov-remote.so"* ]]
    [[ "$output" == *"$prefix/lib/gpuprov/libgpuprov-remote.so"* ]]
    [[ "$output" == *"hint: reinstall gpuprov"* ]]
  fi
  # A file there that is no shared object: the loader's words, and the same hint.
  echo "not a library" >"$prefix/lib/gpuprov/libgpuprov-remote.so"
  run "$prefix/bin/gpuprov" tunnel "$CLI_VM"
  [ "$status" -eq 1 ]
  [[ "$output" == *"cannot load the remote module: $prefix/lib/gpuprov/libgpuprov-remote.so"* ]]
  [[ "$output" == *"hint: reinstall gpuprov"* ]]
}

@test "help CMD and CMD --help print that command's help; plain help the commands" {
  run "$GPUPROV" help provision
  [ "$status" -eq 0 ]
  [[ "$output" == "usage: gpuprov provision"* ]]
  [[ "$output" == *"--max-price USD"* ]]
  help_provision=$output
  run "$GPUPROV" provision --help
  [ "$output" = "$help_provision" ]
  run "$GPUPROV" help
  [ "$status" -eq 0 ]
  [[ "$output" == *"  completion "* ]]
  [[ "$output" != *"__complete"* ]]
}

@test "a typo in a command, a flag or a format gets the closest one and exit 2" {
  run "$GPUPROV" provison --name x
  [ "$status" -eq 2 ]
  [[ "$output" == *"unknown command 'provison' (did you mean provision?)"* ]]
  run "$GPUPROV" help lsit
  [ "$status" -eq 2 ]
  [[ "$output" == *"(did you mean list?)"* ]]
  run "$GPUPROV" list --no-refesh
  [ "$status" -eq 2 ]
  [[ "$output" == *"unknown option --no-refesh for \`gpuprov list\` (did you mean --no-refresh?)"* ]]
  run "$GPUPROV" list -o jsno
  [ "$status" -eq 2 ]
  [[ "$output" == *"(did you mean json?)"* ]]
  run "$GPUPROV" list -o ndjson
  [ "$status" -eq 2 ]
  [[ "$output" == *"streams the events of provision and down"* ]]
  run "$GPUPROV" frobnicate
  [ "$status" -eq 2 ]
  [[ "$output" != *"did you mean"* ]]
}

@test "drivers and version print the same data as JSON and as YAML" {
  for cmd in drivers version; do
    "$GPUPROV" "$cmd" -o json >"$BATS_TEST_TMPDIR/$cmd.json"
    "$GPUPROV" "$cmd" --output=yaml >"$BATS_TEST_TMPDIR/$cmd.yaml"
    yaml_equals_json "$BATS_TEST_TMPDIR/$cmd.json" "$BATS_TEST_TMPDIR/$cmd.yaml"
  done
  grep -q '"name": "docker"' "$BATS_TEST_TMPDIR/drivers.json"
}

@test "provision on a terminal redraws one status line and prints each finished phase once" {
  run env -u NO_COLOR TERM=xterm "$PTY" -- "$GPUPROV" provision --name "$CLI_VM" --cloud docker
  printf '%s\n' "$output" | cat -v
  [ "$status" -eq 0 ]
  # The status line is redrawn in place (carriage return, erase line) ...
  [[ "$output" == *$'\r\e[K'*"creating VM $CLI_VM on docker"* ]]
  # ... and each finished phase is printed once, with its time.
  [ "$(grep -c "==> .*checking docker credentials ([0-9.]*s)" <<<"$output")" -eq 1 ]
  [ "$(grep -c "==> .*creating VM $CLI_VM on docker ([0-9.]*s)" <<<"$output")" -eq 1 ]
  [ "$(grep -c "==> .*waiting for SSH on \[*127\.77\.[0-9.]*\]*:[0-9]* ([0-9.]*s)" <<<"$output")" -eq 1 ]
  # The wait's seconds are redrawn on the status line, not printed as lines.
  [ "$(grep -c "waiting for SSH on .* \.\.\. [0-9]*s" <<<"$output")" -eq 0 ]
  [[ "$output" == *"VM $CLI_VM is ready on docker"* ]]
  [ "$(count_vm_containers "$CLI_VM")" -eq 1 ]
}

@test "provision -o ndjson streams phase events and ends with the VM as list -o json shows it" {
  run --separate-stderr "$GPUPROV" provision --name "$CLI_VM" --cloud docker -ondjson
  echo "$output"
  [ "$status" -eq 0 ]
  "$GPUPROV" list -o json >"$BATS_TEST_TMPDIR/list.json"
  printf '%s\n' "$output" | /usr/bin/python3 -c '
import json, sys
lines = [json.loads(l) for l in sys.stdin.read().splitlines()]
events, final = lines[:-1], lines[-1]
assert events and all(set(e) == {"event", "phase", "elapsed", "message"} for e in events), events
phases = [e["phase"] for e in events if e["event"] == "phase"]
assert phases[:3] == ["check", "create", "ssh"], phases
assert all(b["elapsed"] >= a["elapsed"] for a, b in zip(events, events[1:])), events
listed = [v for v in json.load(open(sys.argv[2])) if v["name"] == sys.argv[1]][0]
for vm in (final, listed):
    vm.pop("age_seconds")
assert final == listed, (final, listed)
' "$CLI_VM" "$BATS_TEST_TMPDIR/list.json"
}

@test "list sizes its columns to their contents, with GPUS, \$/H and COST, and -o yaml matches -o json" {
  run "$GPUPROV" list --no-refresh
  echo "$output"
  [ "$status" -eq 0 ]
  header=$(head -1 <<<"$output")
  [[ "$header" =~ ^NAME\ +CLOUD\ +REGION\ +STATE\ +ADDRESS\ +GPUS\ +\$/H\ +COST\ +K8S\ +AGE\ +TTL$ ]]
  row=$(grep "^$CLI_VM " <<<"$output")
  # NAME is as wide as the longest name plus two blanks.
  [ "${header%%CLOUD*}" = "$(printf '%-*s' $((${#CLI_VM} + 2)) NAME)" ]
  [[ "$row" =~ ^$CLI_VM\ +docker\ +local\ +ready\ +127\.77\.[0-9.:]+\ +-\ +-\ +-\ +off\ +[0-9]+[smhd]\ +-$ ]]
  "$GPUPROV" list -o json >"$BATS_TEST_TMPDIR/list.json"
  "$GPUPROV" list -oyaml >"$BATS_TEST_TMPDIR/list.yaml"
  /usr/bin/python3 -c '
import json, sys, yaml
j = json.load(open(sys.argv[1])); y = yaml.safe_load(open(sys.argv[2]))
for vm in j + y: vm.pop("age_seconds")
assert j == y, (j, y)' "$BATS_TEST_TMPDIR/list.json" "$BATS_TEST_TMPDIR/list.yaml"
}

@test "down on a terminal asks; no keeps the VM; without a terminal it does not ask" {
  run env TERM=dumb "$PTY" --answer "[y/N]=n" -- "$GPUPROV" down "$CLI_VM"
  printf '%s\n' "$output" | cat -v
  [ "$status" -eq 1 ]
  [[ "$output" == *"delete VM $CLI_VM on docker ("*"127.77."*") and its local files? [y/N]"* ]]
  [[ "$output" == *"nothing deleted: VM $CLI_VM is kept"* ]]
  [ "$(count_vm_containers "$CLI_VM")" -eq 1 ]
  [ -e "$GPUPROV_HOME/state/$CLI_VM.json" ]
  # Without a terminal: no question, and -o ndjson streams the phases and the deleted VM.
  run --separate-stderr "$GPUPROV" down "$CLI_VM" --output ndjson </dev/null
  echo "$output"
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" | /usr/bin/python3 -c '
import json, sys
lines = [json.loads(l) for l in sys.stdin.read().splitlines()]
assert lines[0]["event"] == "phase" and lines[0]["phase"] == "delete", lines
final = lines[-1]
assert final["name"] == sys.argv[1] and final["state"] == "deleted", final
assert final["result"] == "removed", final
' "$CLI_VM"
  [ "$(count_vm_containers "$CLI_VM")" -eq 0 ]
}

@test "a failing provision -o ndjson ends its stream with an error event" {
  run --separate-stderr "$GPUPROV" provision --name cli-none --cloud nosuchcloud -o ndjson
  [ "$status" -eq 2 ]
  printf '%s\n' "$output" | tail -1 | /usr/bin/python3 -c '
import json, sys
e = json.loads(sys.stdin.read())
assert e["event"] == "error" and "nosuchcloud" in e["message"], e'
  # shellcheck disable=SC2154 # bats sets stderr (run --separate-stderr)
  [[ "$stderr" == *"error: "*"nosuchcloud"* ]]
}

@test "provision shows type and \$/h, --max-price refuses above, a dear offer is asked on a terminal" {
  use_emulator memory
  printf '[defaults]\nconfirm_above_per_hour = 0.01\n[defaults.timeouts]\nssh_wait_seconds = 3\n' \
    >"$GPUPROV_HOME/config.toml"
  run "$GPUPROV" provision --name cli-lam --cloud lambda --gpus A10:1 --no-k8s --max-price 0.05
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == *"offer: "*" at \$"*"/h"* ]]
  [[ "$output" == *"above --max-price \$0.05/h"* ]]
  [ ! -e "$GPUPROV_HOME/state/cli-lam.json" ]
  run env TERM=dumb "$PTY" --answer "[y/N]=no" -- \
    "$GPUPROV" provision --name cli-lam --cloud lambda --gpus A10:1 --no-k8s
  printf '%s\n' "$output" | cat -v
  [ "$status" -eq 1 ]
  [[ "$output" == *"create "*" at \$"*"/h? [y/N]"* ]]
  [[ "$output" == *"not confirmed: nothing was created"* ]]
  [ ! -e "$GPUPROV_HOME/state/cli-lam.json" ]
  expect_nothing_left lambda
  # Answered yes, the VM is made (SSH never answers on the memory backend: the VM is kept),
  # list shows its GPUs and price, and down on a terminal names both before asking.
  run env TERM=dumb "$PTY" --answer "[y/N]=y" -- \
    "$GPUPROV" provision --name cli-lam --cloud lambda --gpus A10:1 --no-k8s
  [ "$(count lambda instances)" -eq 1 ]
  run "$GPUPROV" list --no-refresh
  echo "$output"
  [[ "$(grep '^cli-lam ' <<<"$output")" =~ \ A10:1\ +\$[0-9]+\.[0-9]{2}\  ]]
  run env TERM=dumb "$PTY" --answer "[y/N]=y" -- "$GPUPROV" down cli-lam
  printf '%s\n' "$output" | cat -v
  [ "$status" -eq 0 ]
  [[ "$output" == *"delete VM cli-lam on lambda ("*", \$"*"/h"*"? [y/N]"* ]]
  expect_nothing_left lambda
  rm -f "$GPUPROV_HOME/config.toml"
}

# complete_words WORDS...: what bash completion offers after `gpuprov WORDS` (the last word is
# the one being completed), through bash-completion's own word splitting.
complete_words() {
  cat >"$BATS_TEST_TMPDIR/complete.bash" <<'EOF'
source /usr/share/bash-completion/bash_completion
source <("$1" completion bash)
COMP_WORDBREAKS=$' \t\n"\'><=;|&(:' # readline's default
COMP_LINE=$2
COMP_POINT=${#COMP_LINE}
# Split as readline does, with "=" a word of its own.
read -ra COMP_WORDS <<<"${COMP_LINE//=/ = }"
[[ $COMP_LINE == *" " ]] && COMP_WORDS+=("")
COMP_WORDS[0]=$1
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
_gpuprov gpuprov "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
printf "%s\n" "${COMPREPLY[@]}"
EOF
  bash "$BATS_TEST_TMPDIR/complete.bash" "$GPUPROV" "gpuprov $*"
}

@test "bash completion offers commands, flags, formats, clouds and VM names" {
  mkdir -p "$GPUPROV_HOME/state"
  printf '{"version":1,"name":"comp-vm","cloud":"docker","phase":"ready"}' \
    >"$GPUPROV_HOME/state/comp-vm.json"
  [ "$(complete_words "pro")" = "provision" ]
  [ "$(complete_words "com")" = "completion" ]
  run complete_words "provision --cl"
  [ "$output" = "--cloud" ]
  run complete_words "provision --cloud "
  [[ "$output" == *docker* && "$output" == *lambda* ]]
  run complete_words "list --output="
  [ "$output" = "$(printf 'text\njson\nyaml')" ]
  run complete_words "down -o "
  [[ "$output" == *ndjson* ]]
  run complete_words "ssh comp"
  [ "$output" = "comp-vm" ]
  run complete_words "completion "
  [ "$output" = "$(printf 'bash\nzsh\nfish')" ]
  run complete_words "ssh comp-vm -- "
  [ "$output" = "" ]
  # GPU types come from the offers an earlier provision was shown (the lambda test above), never
  # from a cloud call on Tab.
  run complete_words "provision --cloud lambda --gpus A10"
  [[ "$output" == *"A10:1"* ]]
  run complete_words "provision --cloud docker --gpus A10"
  [ "$output" = "" ]
  rm -f "$GPUPROV_HOME/state/comp-vm.json"
}

@test "the zsh and fish completion scripts parse and ask gpuprov for the words" {
  "$GPUPROV" completion zsh >"$BATS_TEST_TMPDIR/_gpuprov"
  zsh -n "$BATS_TEST_TMPDIR/_gpuprov"
  "$GPUPROV" completion fish >"$BATS_TEST_TMPDIR/gpuprov.fish"
  fish --no-execute "$BATS_TEST_TMPDIR/gpuprov.fish"
  # fish runs the function as a Tab would.
  run fish -c "source $BATS_TEST_TMPDIR/gpuprov.fish; complete -C'$GPUPROV prov'"
  echo "$output"
  [[ "$output" == provision* ]]
  # The files written at build time are the same scripts.
  cmp "$BATS_TEST_TMPDIR/_gpuprov" "$BUILD_DIR/share/zsh/vendor-completions/_gpuprov"
  "$GPUPROV" completion bash | cmp - "$BUILD_DIR/share/bash-completion/completions/gpuprov"
}

@test "the man page is made at build time from the command table and man renders it cleanly" {
  page="$BUILD_DIR/share/man/man1/gpuprov.1"
  [ -s "$page" ]
  run bash -c "MANWIDTH=100 man --warnings -l '$page' 2>&1 >/dev/null"
  [ "$output" = "" ]
  text=$(MANWIDTH=200 man -l "$page" 2>/dev/null)
  # Every command of --help is in it, with its synopsis, and every provision flag.
  for cmd in $("$GPUPROV" --help | sed -n '/^commands:/,/^$/p' | awk 'NR > 1 && NF {print $1}'); do
    grep -q "gpuprov $cmd" <<<"$text" || { echo "missing: $cmd"; return 1; }
  done
  for flag in $("$GPUPROV" help provision | grep -o -- '--[a-z0-9-]*' | sort -u); do
    grep -q -- "$flag" <<<"$text" || { echo "missing: $flag"; return 1; }
  done
}

@test "cmake --install puts the man page and the completion scripts where man and the shells look" {
  cmake --install "$BUILD_DIR" --prefix "$BATS_TEST_TMPDIR/prefix" --component core >/dev/null
  p="$BATS_TEST_TMPDIR/prefix"
  cmp "$p/share/man/man1/gpuprov.1" "$BUILD_DIR/share/man/man1/gpuprov.1"
  [ -s "$p/share/bash-completion/completions/gpuprov" ]
  [ -s "$p/share/zsh/vendor-completions/_gpuprov" ]
  [ -s "$p/share/fish/vendor_completions.d/gpuprov.fish" ]
  MANPATH="$p/share/man" man -w gpuprov | grep -q "^$p/share/man/man1/gpuprov.1"
}
