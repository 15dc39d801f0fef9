#include "cli.h"

#include <csignal>
#include <iostream>

#include "app_context.h"
#include "check_command.h"
#include "cli_args.h"
#include "cluster_bringup.h"
#include "console.h"
#include "drivers_command.h"
#include "error.h"
#include "gc_command.h"
#include "gpu_request.h"
#include "kubeconfig_command.h"
#include "provision.h"
#include "provision_options.h"
#include "tunnel_command.h"
#include "vm_commands.h"

#ifndef GPUPROV_VERSION
#define GPUPROV_VERSION "0.0.0"
#endif

namespace gpuprov {
namespace {

struct Command {
  const char* name;
  const char* synopsis;
  const char* summary;
  std::vector<OptionSpec> options;
  int (*run)(const AppContext& app, const ParsedArgs& args);
};

const std::vector<OptionSpec> kGlobalOptions = {
    {"verbose", 'v', nullptr, "debug logs on stderr (secrets redacted)"},
    {"driver-path", 0, "DIRS", "search these folders for drivers first (colon separated)"},
    {"output", 'o', "FORMAT", "text (default) or json"},
    {"help", 'h', nullptr, "show help"},
};

int RunProvisionArgs(const AppContext& app, const ParsedArgs& args);
int RunSshArgs(const AppContext& app, const ParsedArgs& args);
int RunSshConfigArgs(const AppContext& app, const ParsedArgs& args);
int RunListArgs(const AppContext& app, const ParsedArgs& args);
int RunDownArgs(const AppContext& app, const ParsedArgs& args);
int RunTunnelArgs(const AppContext& app, const ParsedArgs& args);
int RunGcArgs(const AppContext& app, const ParsedArgs& args);
int RunDriversArgs(const AppContext& app, const ParsedArgs& args);
int RunKubeconfigArgs(const AppContext& app, const ParsedArgs& args);
int RunCheckArgs(const AppContext& app, const ParsedArgs& args);
int RunVersionArgs(const AppContext& app, const ParsedArgs& args);

const std::vector<Command>& Commands() {
  static const std::vector<Command> kCommands = {
      {"provision", "provision [--name NAME] [--cloud CLOUD] [--gpus TYPE:COUNT] [-f SPEC]",
       "create a GPU VM (or reuse the one of that name), wait for SSH, and by default make it a "
       "k3s node",
       {{"name", 'n', "NAME", "the VM's name: [a-z][a-z0-9-]*, at most 39 characters"},
        {"cloud", 'c', "CLOUD", "which cloud's driver to use (default: [defaults] cloud, else "
                                "the only cloud `gpuprov check` finds usable)"},
        {"region", 'r', "REGION", "the cloud's region or zone"},
        {"gpus", 'g', "TYPE:COUNT", "GPU type and count, e.g. L4:1, A100:8, H100-80GB:8"},
        {"file", 'f', "SPEC", "a YAML spec file; flags override its fields"},
        {"k8s", 0, nullptr, "make the VM a single-node k3s cluster (the default where the "
                            "cloud can host it)"},
        {"no-k8s", 0, nullptr, "a plain VM: no Kubernetes, only SSH opened"},
        {"image", 0, "IMAGE", "the VM image (default: the cloud's GPU image)"},
        {"instance-type", 0, "TYPE", "the cloud's instance type (default: chosen from --gpus)"},
        {"ssh-key", 0, "PATH", "private key to use (default: a generated ed25519 key)"},
        {"disk-gb", 0, "N", "boot disk size in GB, 10 to 10000 (default: the cloud's)"},
        {"tag", 0, "KEY=VALUE", "a tag on the VM and what the driver makes for it (repeatable)"},
        {"k3s-version", 0, "TAG", "k3s release to install (default: the pinned one; another "
                                  "needs --k3s-sha256)"},
        {"k3s-sha256", 0, "HEX", "sha256 of that release's k3s binary for the VM's architecture"},
        {"k3s-download-url", 0, "URL", "a mirror of https://github.com/k3s-io/k3s/releases/download"},
        {"allow-from", 0, "CIDR", "open 6443, 80 and 443 (direct access) only to these sources, "
                                  "e.g. 203.0.113.0/24 (repeatable; kept for the VM)"},
        {"allow-from-ssh", 0, nullptr, "narrow SSH (22) to the --allow-from sources too (gpuprov "
                                       "itself must then be inside them)"},
        {"merge-kubeconfig", 0, nullptr, "merge the VM's context into $KUBECONFIG's first file or "
                                         "~/.kube/config at the end (config: merge_kubeconfig)"}},
       &RunProvisionArgs},
      {"ssh", "ssh NAME [-L [BIND:]PORT:HOST:HOSTPORT]... [-N] [-- COMMAND...]",
       "open a shell on the VM, or run one command and exit with its status; the words after "
       "`--` are joined with spaces for the remote shell, as OpenSSH does",
       {{"local-forward", 'L', "[BIND:]PORT:HOST:HOSTPORT",
         "forward a local port to HOST:HOSTPORT as the VM sees it, as ssh -L (repeatable)"},
        {"no-command", 'N', nullptr, "with -L: forward only, run no shell or command"}},
       &RunSshArgs},
      {"ssh-config", "ssh-config NAME",
       "print an OpenSSH `Host gpuprov-NAME` block (address, port, user, key, gpuprov's pinned "
       "known_hosts) for ~/.ssh/config, VS Code or `ssh -F`",
       {}, &RunSshConfigArgs},
      {"list", "list", "show every VM gpuprov knows: name, cloud, region, state, address, k8s, age",
       {{"no-refresh", 0, nullptr, "show recorded state only; do not ask the clouds"}},
       &RunListArgs},
      {"down", "down NAME", "delete the VM, what its driver created for it, and its local files",
       {{"cloud", 'c', "CLOUD", "look the VM up in this cloud when no local record exists"}},
       &RunDownArgs},
      {"gc", "gc [--cloud CLOUD] [--delete [--yes]]",
       "list what carries gpuprov's tags on a cloud but belongs to no VM record here (a killed "
       "run's, a lost home folder's, another machine's), with age and $/h; --delete removes it",
       {{"cloud", 'c', "CLOUD", "sweep this cloud only (default: every cloud with credentials)"},
        {"delete", 0, nullptr, "delete what is listed (asks first on a terminal)"},
        {"yes", 'y', nullptr, "do not ask: needed with --delete when stdin is not a terminal"}},
       &RunGcArgs},
      {"tunnel", "tunnel NAME [--local-port N]",
       "forward the VM's own local port (the one its kubeconfig names, from 16443 up) to its "
       "Kubernetes API over SSH until Ctrl-C, reconnecting when SSH drops",
       {{"local-port", 0, "N", "listen on 127.0.0.1:N instead of the VM's port"}},
       &RunTunnelArgs},
      {"kubeconfig", "kubeconfig NAME [--merge [--switch]]",
       "print the VM's kubeconfig; --merge adds (or refreshes) its cluster, user and context "
       "gpuprov-NAME in $KUBECONFIG's first file or ~/.kube/config (backup kept, other entries "
       "untouched; `down` removes them)",
       {{"merge", 0, nullptr, "merge into the user's kubeconfig instead of printing"},
        {"switch", 0, nullptr, "merge and make gpuprov-NAME the current context"}},
       &RunKubeconfigArgs},
      {"check", "check [--cloud CLOUD]",
       "for each cloud driver: credentials found and where from (never the secret), one "
       "read-only API call's result, the account, and the fix when it fails",
       {{"cloud", 'c', "CLOUD", "check this cloud only"}},
       &RunCheckArgs},
      {"drivers", "drivers [NAME]",
       "list the cloud drivers found, with capabilities and problems; with NAME, one driver "
       "and the keys its [clouds.NAME] table of config.toml accepts",
       {}, &RunDriversArgs},
      {"version", "version", "print the gpuprov and driver ABI versions", {}, &RunVersionArgs},
  };
  return kCommands;
}

std::string MainHelp() {
  std::string out =
      "gpuprov " GPUPROV_VERSION ": a GPU Kubernetes box on any cloud, with one command.\n\n"
      "usage: gpuprov [GLOBAL OPTIONS] COMMAND [ARGS]\n\ncommands:\n";
  for (const auto& c : Commands()) {
    std::string name = std::string("  ") + c.name;
    name.resize(14, ' ');
    out += name + c.summary + "\n";
  }
  out += "\nglobal options:\n" + OptionsHelp(kGlobalOptions);
  out += "\nRun `gpuprov COMMAND --help` for a command's options.\n"
         "Files live in ~/.gpu-provisioner (GPUPROV_HOME overrides).\n";
  return out;
}

std::string CommandHelp(const Command& c) {
  std::string out = std::string("usage: gpuprov ") + c.synopsis + "\n\n" + c.summary + "\n";
  if (!c.options.empty()) out += "\noptions:\n" + OptionsHelp(c.options);
  out += "\nglobal options:\n" + OptionsHelp(kGlobalOptions);
  return out;
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
  if (args.has("k8s")) flags.kubernetes = true;
  if (args.has("no-k8s")) flags.kubernetes = false;
  for (const std::string& cidr : args.values_of("allow-from")) {
    flags.allow_from.push_back(CanonicalCidr(cidr, "--allow-from"));
  }
  if (args.has("allow-from-ssh")) flags.allow_from_ssh = true;
  if (args.has("merge-kubeconfig")) flags.merge_kubeconfig = true;
  return RunProvision(app, flags, args.value("file"));
}

int RunSshArgs(const AppContext& app, const ParsedArgs& args) {
  std::string name = OneName(args, "ssh");
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
  return RunSsh(app, name, options);
}

int RunSshConfigArgs(const AppContext& app, const ParsedArgs& args) {
  return RunSshConfig(app, OneName(args, "ssh-config"));
}

int RunListArgs(const AppContext& app, const ParsedArgs& args) {
  if (!args.positional.empty()) throw UsageError("`gpuprov list` takes no arguments");
  return RunList(app, !args.has("no-refresh"));
}

int RunDownArgs(const AppContext& app, const ParsedArgs& args) {
  return RunDown(app, OneName(args, "down"), args.value("cloud"));
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

int RunTunnelArgs(const AppContext& app, const ParsedArgs& args) {
  const std::string name = OneName(args, "tunnel");
  const std::optional<std::string> port = args.value("local-port");
  return RunTunnel(app, name, port ? std::optional<int>(ParseLocalPort(*port)) : std::nullopt);
}

int RunKubeconfigArgs(const AppContext& app, const ParsedArgs& args) {
  KubeconfigCommandOptions options;
  options.merge = args.has("merge");
  options.switch_context = args.has("switch");
  return RunKubeconfigCommand(app, OneName(args, "kubeconfig"), options);
}

int RunCheckArgs(const AppContext& app, const ParsedArgs& args) {
  if (!args.positional.empty()) {
    throw UsageError("`gpuprov check` takes no arguments", "name one cloud with --cloud CLOUD");
  }
  return RunCheckCommand(app, args.value("cloud"));
}

int RunDriversArgs(const AppContext& app, const ParsedArgs& args) {
  if (args.positional.size() > 1) {
    throw UsageError("`gpuprov drivers` takes at most one driver name",
                     "e.g. gpuprov drivers aws");
  }
  if (args.positional.size() == 1) return RunDriverDetailCommand(app, args.positional[0]);
  return RunDriversCommand(app);
}

int RunVersionArgs(const AppContext&, const ParsedArgs&) {
  Console::Get().Result("gpuprov " GPUPROV_VERSION " (driver ABI " +
                        std::to_string(GPUPROV_ABI_VERSION_MAJOR) + "." +
                        std::to_string(GPUPROV_ABI_VERSION_MINOR) + ")\n");
  return 0;
}

}  // namespace

int RunCli(const std::vector<std::string>& raw_args) {
  Console& console = Console::Get();
  try {
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
    if (i >= raw_args.size()) {
      if (globals.has("help")) {
        console.Result(MainHelp());
        return 0;
      }
      std::cerr << MainHelp();
      return kExitUsage;
    }
    const std::string command_name = raw_args[i];
    if (command_name == "help") {
      console.Result(MainHelp());
      return 0;
    }
    const Command* command = nullptr;
    for (const auto& c : Commands()) {
      if (command_name == c.name) command = &c;
    }
    if (command == nullptr) {
      throw UsageError("unknown command '" + command_name + "'",
                       "run `gpuprov --help` to see the commands");
    }
    std::vector<OptionSpec> options = command->options;
    options.insert(options.end(), kGlobalOptions.begin(), kGlobalOptions.end());
    std::vector<std::string> rest(raw_args.begin() + i + 1, raw_args.end());
    ParsedArgs args = ParseArgs(rest, options, command_name);
    for (const auto& [k, v] : globals.values) args.values.emplace(k, v);
    for (const auto& s : globals.switches) args.switches.push_back(s);
    if (args.has("help")) {
      console.Result(CommandHelp(*command));
      return 0;
    }
    console.set_verbose(args.has("verbose"));
    std::string output = args.value("output").value_or("text");
    if (output != "text" && output != "json") {
      throw UsageError("--output must be text or json, not '" + output + "'");
    }
    AppContext app{Paths(ProcessEnv()), args.value("driver-path").value_or(""),
                   output == "json"};
    return command->run(app, args);
  } catch (const Error& e) {
    console.ErrorLine(e.what(), e.hint());
    return e.exit_code();
  } catch (const std::exception& e) {
    console.ErrorLine(std::string("unexpected: ") + e.what(),
                      "this is a bug; please report it with the output of `gpuprov -v ...`");
    return kExitFailure;
  }
}

}  // namespace gpuprov
