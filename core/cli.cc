#include "cli.h"

#include <csignal>
#include <iostream>

#include "app_context.h"
#include "candidates.h"
#include "check_command.h"
#include "cli_args.h"
#include "cluster_nodes.h"
#include "command_table.h"
#include "completion_command.h"
#include "console.h"
#include "down_command.h"
#include "drivers_command.h"
#include "error.h"
#include "gc_command.h"
#include "gpu_request.h"
#include "interrupt.h"
#include "kubeconfig_command.h"
#include "list_command.h"
#include "offers_command.h"
#include "output.h"
#include "prompt.h"
#include "provision_options.h"
#include "remote.h"
#include "ssh_config_command.h"
#include "status_display.h"
#include "ttl.h"
#include "version_command.h"

#ifndef GPUPROV_VERSION
#define GPUPROV_VERSION "0.0.0"
#endif

namespace gpuprov {
namespace {

const std::vector<OptionSpec> kGlobalOptions = {
    {"verbose", 'v', nullptr, "debug logs on stderr (secrets redacted)"},
    {"driver-path", 0, "DIRS", "search these folders for drivers first (colon separated)"},
    {"output", 'o', "FORMAT", "text (default), json or yaml; ndjson streams provision and "
                              "down (-o json, -ojson and --output=json all work)",
     Completion::kOutputFormat},
    {"help", 'h', nullptr, "show help"},
    {"version", 0, nullptr, "print gpuprov's version and exit"},
};

int RunProvisionArgs(const AppContext& app, const ParsedArgs& args);
int RunSshArgs(const AppContext& app, const ParsedArgs& args);
int RunSshConfigArgs(const AppContext& app, const ParsedArgs& args);
int RunListArgs(const AppContext& app, const ParsedArgs& args);
int RunOffersArgs(const AppContext& app, const ParsedArgs& args);
int RunDownArgs(const AppContext& app, const ParsedArgs& args);
int RunTunnelArgs(const AppContext& app, const ParsedArgs& args);
int RunWatchArgs(const AppContext& app, const ParsedArgs& args);
int RunTtlArgs(const AppContext& app, const ParsedArgs& args);
int RunScaleArgs(const AppContext& app, const ParsedArgs& args);
int RunGcArgs(const AppContext& app, const ParsedArgs& args);
int RunDriversArgs(const AppContext& app, const ParsedArgs& args);
int RunKubeconfigArgs(const AppContext& app, const ParsedArgs& args);
int RunCheckArgs(const AppContext& app, const ParsedArgs& args);
int RunVersionArgs(const AppContext& app, const ParsedArgs& args);
int RunHelpArgs(const AppContext& app, const ParsedArgs& args);
int RunCompletionArgs(const AppContext& app, const ParsedArgs& args);
int RunCompleteArgs(const AppContext& app, const ParsedArgs& args);
int RunManArgs(const AppContext& app, const ParsedArgs& args);

const std::vector<Command>& Commands() {
  static const std::vector<Command> kCommands = {
      {"provision", "provision [--name NAME] [--cloud CLOUD] [--gpus TYPE:COUNT] [-f SPEC]",
       "create a GPU VM (or reuse the one of that name), wait for SSH, and by default make it a "
       "k3s node",
       {{"name", 'n', "NAME", "the VM's name: [a-z][a-z0-9-]*, at most 39 characters"},
        {"cloud", 'c', "CLOUD", "which cloud's driver to use (default: [defaults] cloud, else "
                                "the only cloud `gpuprov check` finds usable); a list "
                                "(aws,gcp,lambda) or `any` (every cloud whose credentials work) "
                                "makes candidates, tried cheapest first, the next on no "
                                "capacity or quota",
         Completion::kCloud},
        {"region", 'r', "REGION", "the cloud's region or zone; a list (us-central1,us-east1) "
                                  "makes a candidate of each region a cloud serves"},
        {"gpus", 'g', "TYPE:COUNT", "GPU type and count, e.g. L4:1, A100:8, H100-80GB:8",
         Completion::kGpus},
        {"file", 'f', "SPEC", "a YAML spec file; flags override its fields", Completion::kFile},
        {"k8s", 0, nullptr, "make the VM a single-node k3s cluster (the default where the "
                            "cloud can host it)"},
        {"no-k8s", 0, nullptr, "a plain VM: no Kubernetes, only SSH opened"},
        {"image", 0, "IMAGE", "the VM image (default: the cloud's GPU image)"},
        {"instance-type", 0, "TYPE", "the cloud's instance type (default: chosen from --gpus)"},
        {"ssh-key", 0, "PATH", "private key to use (default: a generated ed25519 key)",
         Completion::kFile},
        {"disk-gb", 0, "N", "boot disk size in GB, 10 to 10000 (default: the cloud's)"},
        {"tag", 0, "KEY=VALUE", "a tag on the VM and what the driver makes for it (repeatable)"},
        {"k3s-version", 0, "TAG", "k3s release to install (default: the pinned one; another "
                                  "needs --k3s-sha256)"},
        {"k3s-sha256", 0, "HEX", "sha256 of that release's k3s binary for the VM's architecture"},
        {"k3s-download-url", 0, "URL", "a mirror of https://github.com/k3s-io/k3s/releases/download"},
        {"nvidia-driver", 0, "MODE", "a GPU without a working driver: image (the default: fail, "
                                     "naming a GPU image) or install (add the distribution's "
                                     "server driver, reboot once)"},
        {"nvidia-repo-url", 0, "URL", "a mirror of NVIDIA's container toolkit apt repository, "
                                      "https://nvidia.github.io/libnvidia-container"},
        {"nvidia-key-fingerprint", 0, "HEX", "the fingerprint of the key that signs that "
                                             "repository (default: NVIDIA's, pinned)"},
        {"install-route", 0, "ROUTE", "how k3s gets onto the node: auto (the default: in the "
                                      "boot script where the cloud runs one, else over SSH), "
                                      "boot or ssh"},
        {"allow-from", 0, "CIDR", "open 6443, 80 and 443 (direct access) only to these sources, "
                                  "e.g. 203.0.113.0/24 (repeatable; kept for the VM)"},
        {"allow-from-ssh", 0, nullptr, "narrow SSH (22) to the --allow-from sources too (gpuprov "
                                       "itself must then be inside them)"},
        {"no-smoke-test", 0, nullptr, "skip the CUDA check: a pod requesting the GPUs runs a "
                                      "CUDA program after the node validates (config: "
                                      "smoke_test = false)"},
        {"merge-kubeconfig", 0, nullptr, "merge the VM's context into $KUBECONFIG's first file or "
                                         "~/.kube/config at the end (config: merge_kubeconfig)"},
        {"max-price", 0, "USD", "refuse an offer costing more than USD dollars per hour, or "
                                "whose price is unknown; nothing is created (with candidates: "
                                "skip those)"},
        {"yes", 'y', nullptr, "do not ask before making a VM above confirm_above_per_hour "
                              "(asked only on a terminal)"},
        {"spot", 0, nullptr, "a spot (preemptible) VM at the spot price, on clouds whose driver "
                             "sells them (config: spot); a preempted one comes back with a "
                             "re-run or `gpuprov watch`"},
        {"ttl", 0, "DURATION", "the node powers itself off DURATION from now, e.g. 8h, 90m, "
                               "1h30m (a systemd timer on the VM; config: ttl; off: none)"},
        {"idle-ttl", 0, "DURATION", "the node powers itself off once idle that long: no SSH "
                                    "session, no GPU pod, GPUs under 5% (config: idle_ttl)"},
        {"nodes", 0, "N", "VMs in the k3s cluster, each with --gpus: a server and N-1 agents "
                          "NAME-agent-K, one kubeconfig (default 1; clouds with the cluster "
                          "capability, `gpuprov drivers`)"}},
       &RunProvisionArgs, Completion::kNone, /*streams=*/true},
      {"ssh", "ssh NAME [-L [BIND:]PORT:HOST:HOSTPORT]... [-N] [-- COMMAND...]",
       "open a shell on the VM, or run one command and exit with its status; the words after "
       "`--` are joined with spaces for the remote shell, as OpenSSH does",
       {{"local-forward", 'L', "[BIND:]PORT:HOST:HOSTPORT",
         "forward a local port to HOST:HOSTPORT as the VM sees it, as ssh -L (repeatable)"},
        {"no-command", 'N', nullptr, "with -L: forward only, run no shell or command"},
        {"node", 0, "K", "node K of a multi-node cluster NAME: 0 the server, K the agent "
                         "NAME-agent-K"}},
       &RunSshArgs, Completion::kVm},
      {"ssh-config", "ssh-config NAME",
       "print an OpenSSH `Host gpuprov-NAME` block (address, port, user, key, gpuprov's pinned "
       "known_hosts) for ~/.ssh/config, VS Code or `ssh -F`",
       {}, &RunSshConfigArgs, Completion::kVm},
      {"list", "list",
       "show every VM gpuprov knows: name, cloud, region, state, address, GPUs, $/h, cost so "
       "far, k8s, age",
       {{"no-refresh", 0, nullptr, "show recorded state only; do not ask the clouds"}},
       &RunListArgs},
      {"offers", "offers [--gpus TYPE[:COUNT]] [--cloud LIST|any] [--region LIST] [--spot]",
       "show what every cloud whose credentials work offers, cheapest first: GPUs, GPU memory, "
       "cloud, region, instance type, $/h on demand and spot, in stock, where the price comes "
       "from; each row a candidate as `provision --cloud any` would try it",
       {{"gpus", 'g', "TYPE[:COUNT]", "GPU type and count, e.g. L4, A100:8 (default count 1; "
                                      "none: what provision makes without --gpus)",
         Completion::kGpus},
        {"cloud", 'c', "LIST", "the clouds to ask: a list (aws,gcp,lambda) or `any` (the "
                               "default: every cloud whose credentials work)",
         Completion::kCloud},
        {"region", 'r', "LIST", "the regions to ask each cloud for (default: the driver's "
                                "choice)"},
        {"spot", 0, nullptr, "spot (preemptible) offers only, ordered by their spot price"},
        {"max-price", 0, "USD", "leave out offers costing more than USD dollars per hour, or "
                                "whose price is unknown"},
        {"refresh", 0, nullptr, "ask the clouds now instead of using answers kept for a few "
                                "minutes"}},
       &RunOffersArgs},
      {"down", "down NAME [--yes] | down --expired [--yes]",
       "delete the VM, what its driver created for it, and its local files (asks first on a "
       "terminal); --expired: every VM whose TTL has passed",
       {{"cloud", 'c', "CLOUD", "look the VM up in this cloud when no local record exists",
         Completion::kCloud},
        {"expired", 0, nullptr, "delete every VM whose TTL deadline has passed (`list` marks "
                                "them EXPIRED); needs --yes when stdin is not a terminal"},
        {"yes", 'y', nullptr, "do not ask (asked only on a terminal)"}},
       &RunDownArgs, Completion::kVm, /*streams=*/true},
      {"gc", "gc [--cloud CLOUD] [--delete [--yes]]",
       "list what carries gpuprov's tags on a cloud but belongs to no VM record here (a killed "
       "run's, a lost home folder's, another machine's), with age and $/h, and the recorded VMs "
       "whose TTL has passed; --delete removes them",
       {{"cloud", 'c', "CLOUD", "sweep this cloud only (default: every cloud with credentials)",
         Completion::kCloud},
        {"delete", 0, nullptr, "delete what is listed (asks first on a terminal)"},
        {"yes", 'y', nullptr, "do not ask: needed with --delete when stdin is not a terminal"}},
       &RunGcArgs},
      {"ttl", "ttl NAME [DURATION] [--idle-ttl DURATION] [--off]",
       "show the VM's TTL, or set it: the node powers itself off DURATION from now (e.g. 2h), "
       "or once idle that long; --off removes the timer (over SSH; the record keeps the "
       "deadline for `list`)",
       {{"idle-ttl", 0, "DURATION", "power off once idle that long (no SSH session, no GPU "
                                    "pod, GPUs under 5%); off: no idle TTL"},
        {"off", 0, nullptr, "remove the timer and both TTLs from the node"}},
       &RunTtlArgs, Completion::kVm},
      {"scale", "scale NAME --nodes M [--yes]",
       "grow a multi-node cluster to M nodes (the agents it lacks, made and joined as by "
       "provision) or shrink it (the newest agents cordoned, drained, deleted from Kubernetes, "
       "then their VMs)",
       {{"nodes", 0, "M", "the cluster's node count after scaling (1: the server alone)"},
        {"yes", 'y', nullptr, "do not ask before making VMs above confirm_above_per_hour"}},
       &RunScaleArgs, Completion::kVm},
      {"tunnel", "tunnel NAME [--local-port N]",
       "forward the VM's own local port (the one its kubeconfig names, from 16443 up) to its "
       "Kubernetes API over SSH until Ctrl-C, reconnecting when SSH drops (to the new VM when "
       "a preempted one was replaced meanwhile)",
       {{"local-port", 0, "N", "listen on 127.0.0.1:N instead of the VM's port"}},
       &RunTunnelArgs, Completion::kVm},
      {"watch", "watch NAME [--interval SECONDS] [--max-attempts N] [--fallback MODE]",
       "stay in the foreground (Ctrl-C stops it) and bring the VM back when its cloud preempts "
       "it: a new VM of the same name and spec, the same kubeconfig file and context",
       {{"interval", 0, "SECONDS", "ask the cloud this often (default 30)"},
        {"max-attempts", 0, "N", "attempts per preemption before giving up (default 3)"},
        {"fallback", 0, "MODE", "after a failed attempt: none (the default), on-demand (an "
                                "on-demand VM instead of spot) or candidates (the --cloud and "
                                "--region lists)"},
        {"cloud", 'c', "LIST", "the candidate clouds of --fallback candidates (default any)",
         Completion::kCloud},
        {"region", 'r', "LIST", "the candidate regions of --fallback candidates"}},
       &RunWatchArgs, Completion::kVm, /*streams=*/true},
      {"kubeconfig", "kubeconfig NAME [--merge [--switch]]",
       "print the VM's kubeconfig; --merge adds (or refreshes) its cluster, user and context "
       "gpuprov-NAME in $KUBECONFIG's first file or ~/.kube/config (backup kept, other entries "
       "untouched; `down` removes them)",
       {{"merge", 0, nullptr, "merge into the user's kubeconfig instead of printing"},
        {"switch", 0, nullptr, "merge and make gpuprov-NAME the current context"}},
       &RunKubeconfigArgs, Completion::kVm},
      {"check", "check [--cloud CLOUD]",
       "for each cloud driver: credentials found and where from (never the secret), one "
       "read-only API call's result, the account, and the fix when it fails",
       {{"cloud", 'c', "CLOUD", "check this cloud only", Completion::kCloud}},
       &RunCheckArgs},
      {"drivers", "drivers [NAME]",
       "list the cloud drivers found, with capabilities and problems; with NAME, one driver "
       "and the keys its [clouds.NAME] table of config.toml accepts",
       {}, &RunDriversArgs, Completion::kCloud},
      {"version", "version",
       "print the gpuprov and driver ABI versions, the build and where drivers are searched",
       {}, &RunVersionArgs},
      {"help", "help [COMMAND]", "show the commands, or one command's options", {}, &RunHelpArgs,
       Completion::kCommand},
      {"completion", "completion bash|zsh|fish",
       "print the shell completion script, e.g. `source <(gpuprov completion bash)`", {},
       &RunCompletionArgs, Completion::kShell},
      // Hidden: what the completion scripts run on Tab, and the man page generator (build).
      {"__complete", "__complete -- WORDS...", "complete the last word", {}, &RunCompleteArgs,
       Completion::kNone, false, /*hidden=*/true},
      {"__man", "__man", "print gpuprov(1)", {}, &RunManArgs, Completion::kNone, false,
       /*hidden=*/true},
  };
  return kCommands;
}

/// The visible command \a name; a UsageError with the closest command otherwise.
const Command& FindOrSuggest(const std::string& name) {
  if (const Command* c = FindCommand(Commands(), name)) return *c;
  throw UsageError("unknown command '" + name + "'" + DidYouMean(name, CommandNames(Commands())),
                   "run `gpuprov --help` to see the commands");
}

/// Parses the command line and runs the command; errors are left to RunCli.
int RunCommand(const std::vector<std::string>& raw_args) {
  Console& console = Console::Get();
  // Global options come before the command; the command's own after it. Global options are
  // also accepted after the command, for convenience.
  size_t i = 0;
  std::vector<std::string> global_args;
  while (i < raw_args.size() && !raw_args[i].empty() && raw_args[i][0] == '-') {
    global_args.push_back(raw_args[i]);
    const std::string& a = raw_args[i];
    if ((a == "--driver-path" || a == "--output" || a == "-o") && i + 1 < raw_args.size()) {
      global_args.push_back(raw_args[++i]);
    }
    ++i;
  }
  ParsedArgs globals = ParseArgs(global_args, kGlobalOptions, "");
  if (globals.has("version")) {
    console.Result("gpuprov " GPUPROV_VERSION "\n");
    return 0;
  }
  if (i >= raw_args.size()) {
    if (globals.has("help")) {
      console.Result(MainHelp(Commands(), kGlobalOptions, GPUPROV_VERSION));
      return 0;
    }
    std::cerr << MainHelp(Commands(), kGlobalOptions, GPUPROV_VERSION);
    return kExitUsage;
  }
  const std::string command_name = raw_args[i];
  const Command* command = nullptr;
  for (const auto& c : Commands()) {
    if (command_name == c.name) command = &c;  // hidden ones too: scripts run them
  }
  if (command == nullptr) command = &FindOrSuggest(command_name);
  std::vector<std::string> rest(raw_args.begin() + i + 1, raw_args.end());
  std::vector<OptionSpec> options = command->options;
  options.insert(options.end(), kGlobalOptions.begin(), kGlobalOptions.end());
  ParsedArgs args = ParseArgs(rest, options, command_name);
  for (const auto& [k, v] : globals.values) args.values.emplace(k, v);
  for (const auto& s : globals.switches) args.switches.push_back(s);
  if (args.has("help")) {
    console.Result(CommandHelp(*command, kGlobalOptions));
    return 0;
  }
  if (args.has("version")) {
    console.Result("gpuprov " GPUPROV_VERSION "\n");
    return 0;
  }
  console.set_verbose(args.has("verbose"));
  const OutputFormat output =
      ParseOutputFormat(args.value("output").value_or("text"), command->streams, command_name);
  console.set_display(MakeStatusDisplay(output == OutputFormat::kNdjson, console.color()));
  AppContext app{Paths(ProcessEnv()), args.value("driver-path").value_or(""),
                 output != OutputFormat::kText, output,
                 std::shared_ptr<Prompter>(MakeTerminalPrompter())};
  return command->run(app, args);
}

std::string OneName(const ParsedArgs& args, const char* command) {
  if (args.positional.size() != 1) {
    throw UsageError(std::string("`gpuprov ") + command + "` takes one VM name",
                     std::string("e.g. gpuprov ") + command + " demo; `gpuprov list` shows names");
  }
  return args.positional[0];
}

int RunProvisionArgs(const AppContext& app, const ParsedArgs& args) {
  if (!args.positional.empty()) {
    throw UsageError("unexpected argument '" + args.positional[0] + "' for `gpuprov provision`",
                     "name the VM with --name NAME");
  }
  if (args.has("k8s") && args.has("no-k8s")) {
    throw UsageError("--k8s and --no-k8s contradict each other", "pass one of them");
  }
  ProvisionFlags flags;
  flags.name = args.value("name");
  flags.cloud = args.value("cloud");
  flags.region = args.value("region");
  if (auto gpus = args.value("gpus")) flags.gpus = ParseGpuRequest(*gpus, "--gpus");
  flags.image = args.value("image");
  flags.instance_type = args.value("instance-type");
  flags.ssh_key = args.value("ssh-key");
  if (auto disk = args.value("disk-gb")) flags.disk_gb = ParseDiskGbFlag(*disk);
  for (const std::string& tag : args.values_of("tag")) AddTagFlag(tag, flags.tags);
  flags.k3s_version = args.value("k3s-version");
  flags.k3s_sha256 = args.value("k3s-sha256");
  flags.k3s_download_url = args.value("k3s-download-url");
  flags.nvidia_driver = args.value("nvidia-driver");
  flags.nvidia_repo_url = args.value("nvidia-repo-url");
  flags.nvidia_key_fingerprint = args.value("nvidia-key-fingerprint");
  if (args.has("k8s")) flags.kubernetes = true;
  if (args.has("no-k8s")) flags.kubernetes = false;
  if (auto route = args.value("install-route")) {
    flags.install_route = ParseInstallRoute(*route);
    if (args.has("no-k8s") && flags.install_route != InstallRoute::kAuto) {
      throw UsageError("--install-route " + *route + " with --no-k8s: a plain VM installs nothing",
                       "drop one of them");
    }
  }
  for (const std::string& cidr : args.values_of("allow-from")) {
    flags.allow_from.push_back(CanonicalCidr(cidr, "--allow-from"));
  }
  if (args.has("allow-from-ssh")) flags.allow_from_ssh = true;
  if (args.has("merge-kubeconfig")) flags.merge_kubeconfig = true;
  if (args.has("no-smoke-test")) flags.smoke_test = false;
  if (auto price = args.value("max-price")) {
    flags.max_price_per_hour = ParsePricePerHour(*price, "--max-price");
  }
  flags.yes = args.has("yes");
  if (args.has("spot")) flags.spot = true;
  if (auto ttl = args.value("ttl")) flags.ttl_seconds = ParseDurationSeconds(*ttl, "--ttl");
  if (auto idle = args.value("idle-ttl")) {
    flags.idle_ttl_seconds = ParseDurationSeconds(*idle, "--idle-ttl");
  }
  if (auto nodes = args.value("nodes")) flags.nodes = ParseNodeCount(*nodes, "--nodes");
  return Remote().provision(app, flags, args.value("file"));
}

int RunSshArgs(const AppContext& app, const ParsedArgs& args) {
  std::string name = OneName(args, "ssh");
  if (auto node = args.value("node")) name = ClusterNodeName(name, ParseNodeCount(*node, "--node"));
  if (args.has_dashdash && args.after_dashdash.empty()) {
    throw UsageError("nothing after `--`", "e.g. gpuprov ssh " + name + " -- uname -a");
  }
  SshCommandOptions options;
  options.command = args.after_dashdash;
  for (const std::string& spec : args.values_of("local-forward")) {
    options.forwards.push_back(ParseLocalForward(spec));
  }
  options.no_command = args.has("no-command");
  if (options.no_command && options.forwards.empty()) {
    throw UsageError("-N forwards only, and no -L forward is given",
                     "e.g. gpuprov ssh " + name + " -N -L 8888:localhost:8888");
  }
  if (options.no_command && !options.command.empty()) {
    throw UsageError("-N runs no command, but a command follows `--`",
                     "drop -N to run the command while forwarding, or drop the command");
  }
  return Remote().ssh(app, name, options);
}

int RunSshConfigArgs(const AppContext& app, const ParsedArgs& args) {
  return RunSshConfig(app, OneName(args, "ssh-config"));
}

int RunListArgs(const AppContext& app, const ParsedArgs& args) {
  if (!args.positional.empty()) throw UsageError("`gpuprov list` takes no arguments");
  return RunList(app, !args.has("no-refresh"));
}

int RunOffersArgs(const AppContext& app, const ParsedArgs& args) {
  if (!args.positional.empty()) {
    throw UsageError("`gpuprov offers` takes no arguments",
                     "e.g. gpuprov offers --gpus H100:1 --cloud any");
  }
  OffersOptions options;
  if (auto gpus = args.value("gpus")) {
    // TYPE alone means one GPU of that type.
    const std::string text = gpus->find(':') == std::string::npos ? *gpus + ":1" : *gpus;
    options.gpus = ParseGpuRequest(text, "--gpus");
  }
  if (auto cloud = args.value("cloud")) options.clouds = ParseCloudList(*cloud, "--cloud");
  if (auto region = args.value("region")) options.regions = ParseRegionList(*region, "--region");
  options.spot = args.has("spot");
  if (auto price = args.value("max-price")) {
    options.max_price = ParsePricePerHour(*price, "--max-price");
  }
  options.refresh = args.has("refresh");
  return RunOffers(app, options);
}

int RunDownArgs(const AppContext& app, const ParsedArgs& args) {
  if (args.has("expired")) {
    if (!args.positional.empty() || args.value("cloud")) {
      throw UsageError("`gpuprov down --expired` takes no VM name and no --cloud",
                       "run `gpuprov down NAME` for one VM");
    }
  }
  DownOptions options;
  options.expired = args.has("expired");
  if (!options.expired) options.name = OneName(args, "down");
  options.cloud = args.value("cloud");
  options.yes = args.has("yes");
  return RunDown(app, options);
}

int RunGcArgs(const AppContext& app, const ParsedArgs& args) {
  if (!args.positional.empty()) {
    throw UsageError("`gpuprov gc` takes no arguments", "pick a cloud with --cloud CLOUD");
  }
  GcOptions options;
  options.cloud = args.value("cloud");
  options.remove = args.has("delete");
  options.yes = args.has("yes");
  return RunGc(app, options);
}

int RunScaleArgs(const AppContext& app, const ParsedArgs& args) {
  const std::string name = OneName(args, "scale");
  const std::optional<std::string> nodes = args.value("nodes");
  if (!nodes) {
    throw UsageError("`gpuprov scale " + name + "` needs --nodes M",
                     "e.g. gpuprov scale " + name + " --nodes 4");
  }
  InstallInterruptHandler();
  return Remote().scale(app, name, ParseNodeCount(*nodes, "--nodes"), args.has("yes"));
}

int RunTtlArgs(const AppContext& app, const ParsedArgs& args) {
  if (args.positional.empty() || args.positional.size() > 2) {
    throw UsageError("`gpuprov ttl` takes a VM name and at most one duration",
                     "e.g. gpuprov ttl demo 2h, gpuprov ttl demo --off, gpuprov ttl demo");
  }
  TtlCommandOptions options;
  if (args.positional.size() == 2) {
    options.ttl_seconds = ParseDurationSeconds(args.positional[1], "gpuprov ttl NAME DURATION");
  }
  if (auto idle = args.value("idle-ttl")) {
    options.idle_ttl_seconds = ParseDurationSeconds(*idle, "--idle-ttl");
  }
  options.off = args.has("off");
  if (options.off && (options.ttl_seconds || options.idle_ttl_seconds)) {
    throw UsageError("--off removes the TTL; it takes no duration",
                     "drop --off to set a TTL, or the duration to remove it");
  }
  return Remote().ttl(app, args.positional[0], options);
}

int RunTunnelArgs(const AppContext& app, const ParsedArgs& args) {
  const std::string name = OneName(args, "tunnel");
  const std::optional<std::string> port = args.value("local-port");
  return Remote().tunnel(app, name,
                         port ? std::optional<int>(ParseLocalPort(*port)) : std::nullopt);
}

int RunWatchArgs(const AppContext& app, const ParsedArgs& args) {
  const std::string name = OneName(args, "watch");
  WatchOptions options;
  if (auto interval = args.value("interval")) {
    options.interval = std::chrono::seconds(ParseWatchNumber(*interval, "--interval", 1, 86400));
  }
  if (auto attempts = args.value("max-attempts")) {
    options.max_attempts = static_cast<int>(ParseWatchNumber(*attempts, "--max-attempts", 1, 100));
  }
  if (auto fallback = args.value("fallback")) options.fallback = ParseWatchFallback(*fallback);
  options.cloud = args.value("cloud");
  options.region = args.value("region");
  if ((options.cloud || options.region) && options.fallback != WatchFallback::kCandidates) {
    throw UsageError("watch --cloud and --region name the candidates of --fallback candidates",
                     "add --fallback candidates, or drop them");
  }
  return Remote().watch(app, name, options);
}

int RunKubeconfigArgs(const AppContext& app, const ParsedArgs& args) {
  KubeconfigCommandOptions options;
  options.merge = args.has("merge");
  options.switch_context = args.has("switch");
  return RunKubeconfig(app, OneName(args, "kubeconfig"), options);
}

int RunCheckArgs(const AppContext& app, const ParsedArgs& args) {
  if (!args.positional.empty()) {
    throw UsageError("`gpuprov check` takes no arguments", "name one cloud with --cloud CLOUD");
  }
  return RunCheck(app, args.value("cloud"));
}

int RunDriversArgs(const AppContext& app, const ParsedArgs& args) {
  if (args.positional.size() > 1) {
    throw UsageError("`gpuprov drivers` takes at most one driver name",
                     "e.g. gpuprov drivers aws");
  }
  if (args.positional.empty()) return RunDrivers(app, std::nullopt);
  return RunDrivers(app, args.positional[0]);
}

int RunVersionArgs(const AppContext& app, const ParsedArgs& args) {
  if (!args.positional.empty()) throw UsageError("`gpuprov version` takes no arguments");
  return RunVersion(app);
}

int RunCompletionArgs(const AppContext&, const ParsedArgs& args) {
  if (args.positional.size() != 1) {
    throw UsageError("`gpuprov completion` takes one shell: bash, zsh or fish",
                     "e.g. source <(gpuprov completion bash)");
  }
  return RunCompletion(args.positional[0]);
}

int RunCompleteArgs(const AppContext& app, const ParsedArgs& args) {
  // The scripts pass the words after `--`, so options among them are not parsed here.
  return RunComplete(app, Commands(), kGlobalOptions,
                     args.has_dashdash ? args.after_dashdash : args.positional);
}

int RunHelpArgs(const AppContext&, const ParsedArgs& args) {
  if (args.positional.size() > 1) {
    throw UsageError("`gpuprov help` takes at most one command", "e.g. gpuprov help provision");
  }
  if (args.positional.empty()) {
    Console::Get().Result(MainHelp(Commands(), kGlobalOptions, GPUPROV_VERSION));
    return 0;
  }
  Console::Get().Result(CommandHelp(FindOrSuggest(args.positional[0]), kGlobalOptions));
  return 0;
}

int RunManArgs(const AppContext&, const ParsedArgs&) {
  Console::Get().Result(ManPage(Commands(), kGlobalOptions, GPUPROV_VERSION));
  return 0;
}

}  // namespace

int RunCli(const std::vector<std::string>& raw_args) {
  Console& console = Console::Get();
  int code = kExitOk;
  try {
    code = RunCommand(raw_args);
  } catch (const Error& e) {
    console.FailStatus(e.what());
    console.ErrorLine(e.what(), e.hint());
    code = e.exit_code();
  } catch (const std::exception& e) {
    console.FailStatus(std::string("unexpected: ") + e.what());
    console.ErrorLine(std::string("unexpected: ") + e.what(),
                      "this is a bug; please report it with the output of `gpuprov -v ...`");
    code = kExitFailure;
  }
  console.FinishStatus(code == kExitOk);
  return code;
}

}  // namespace gpuprov
