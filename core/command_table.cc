#include "command_table.h"

#include <sstream>

namespace gpuprov {
namespace {

/// Text safe in man(7) markup: backslashes doubled as \e, '-' as \-, and a line never starting
/// with a control character ('.' or ''').
std::string Roff(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
  }
  if (!out.empty() && (out[0] == '.' || out[0] == '\'')) out = "\\&" + out;
  return out;
}

std::string RoffOption(const OptionSpec& o) {
  std::string out = ".TP\n";
  if (o.short_name != 0) out += "\\fB\\-" + std::string(1, o.short_name) + "\\fR, ";
  out += "\\fB\\-\\-" + Roff(o.long_name) + "\\fR";
  if (o.value_name != nullptr) out += " \\fI" + Roff(o.value_name) + "\\fR";
  out += "\n" + Roff(o.help) + "\n";
  return out;
}

}  // namespace

const Command* FindCommand(const std::vector<Command>& commands, const std::string& name) {
  for (const auto& c : commands) {
    if (!c.hidden && name == c.name) return &c;
  }
  return nullptr;
}

std::vector<std::string> CommandNames(const std::vector<Command>& commands) {
  std::vector<std::string> names;
  for (const auto& c : commands) {
    if (!c.hidden) names.push_back(c.name);
  }
  return names;
}

std::string MainHelp(const std::vector<Command>& commands, const std::vector<OptionSpec>& globals,
                     const std::string& version) {
  std::string out = "gpuprov " + version +
                    ": a GPU Kubernetes box on any cloud, with one command.\n\n"
                    "usage: gpuprov [GLOBAL OPTIONS] COMMAND [ARGS]\n\ncommands:\n";
  size_t width = 0;
  for (const auto& c : commands) {
    if (!c.hidden) width = std::max(width, std::string(c.name).size());
  }
  for (const auto& c : commands) {
    if (c.hidden) continue;
    std::string name = std::string("  ") + c.name;
    name.resize(std::max<size_t>(14, width + 4), ' ');
    out += name + c.summary + "\n";
  }
  out += "\nglobal options:\n" + OptionsHelp(globals);
  out +=
      "\nRun `gpuprov help COMMAND` (or `gpuprov COMMAND --help`) for a command's options.\n"
      "Files live in ~/.gpu-provisioner (GPUPROV_HOME overrides).\n";
  return out;
}

std::string CommandHelp(const Command& c, const std::vector<OptionSpec>& globals) {
  std::string out = std::string("usage: gpuprov ") + c.synopsis + "\n\n" + c.summary + "\n";
  if (!c.options.empty()) out += "\noptions:\n" + OptionsHelp(c.options);
  out += "\nglobal options:\n" + OptionsHelp(globals);
  if (c.streams) {
    out +=
        "\n--output ndjson streams one JSON event per phase and wait line, then the VM as "
        "`gpuprov list -o json` shows it.\n";
  }
  return out;
}

std::string ManPage(const std::vector<Command>& commands, const std::vector<OptionSpec>& globals,
                    const std::string& version) {
  std::ostringstream out;
  out << ".\\\" Generated at build time from gpuprov's command table; do not edit.\n"
      << ".TH GPUPROV 1 \"\" \"gpuprov " << Roff(version) << "\" \"User Commands\"\n"
      << ".SH NAME\n"
      << "gpuprov \\- a GPU Kubernetes box on any cloud, with one command\n"
      << ".SH SYNOPSIS\n"
      << ".B gpuprov\n"
      << "[\\fIGLOBAL OPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]\n"
      << ".SH DESCRIPTION\n"
      << "gpuprov makes a GPU VM on a cloud through a per\\-cloud driver and, by default, turns it "
         "into a single\\-node k3s cluster.\n"
      << "Results go to standard output (as text, or with \\fB\\-o json\\fR or \\fB\\-o yaml\\fR "
         "as "
         "data); progress, notes and errors go to standard error.\n"
      << ".SH COMMANDS\n";
  for (const auto& c : commands) {
    if (c.hidden) continue;
    out << ".SS \"" << Roff(std::string("gpuprov ") + c.synopsis) << "\"\n"
        << Roff(c.summary) << ".\n";
    if (c.streams) {
      out << ".PP\n\\fB\\-\\-output ndjson\\fR streams one JSON event per phase and wait line, "
             "then the VM as \\fBgpuprov list \\-o json\\fR shows it.\n";
    }
    if (!c.options.empty()) {
      out << ".RS\n";
      for (const auto& o : c.options) out << RoffOption(o);
      out << ".RE\n";
    }
  }
  out << ".SH GLOBAL OPTIONS\n"
      << "Accepted before or after the command.\n";
  for (const auto& o : globals) out << RoffOption(o);
  out << ".SH FILES\n"
      << ".TP\n\\fI~/.gpu\\-provisioner/\\fR\n"
         "The gpuprov folder (mode 0700): config.toml, state/ (one record per VM), keys/, "
         "known_hosts, kube/ (kubeconfigs).\n"
      << ".SH ENVIRONMENT\n"
      << ".TP\n\\fBGPUPROV_HOME\\fR\nThe gpuprov folder instead of ~/.gpu\\-provisioner.\n"
      << ".TP\n\\fBGPUPROV_DRIVER_PATH\\fR\nFolders searched for drivers first (colon "
         "separated).\n"
      << ".TP\n\\fBNO_COLOR\\fR\nNo colour and no status line redrawn in place; progress is "
         "printed as lines.\n"
      << ".SH EXIT STATUS\n"
      << ".TP\n0\nSuccess.\n"
      << ".TP\n1\nThe command failed; the message says what is kept and how to retry.\n"
      << ".TP\n2\nBad input or usage; nothing was created.\n"
      << ".TP\n130\nInterrupted (Ctrl\\-C); a re\\-run continues.\n"
      << ".SH SEE ALSO\n"
      << "\\fBssh\\fR(1), \\fBkubectl\\fR(1)\n";
  return out.str();
}

}  // namespace gpuprov
