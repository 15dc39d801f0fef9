#include "cli_args.h"

#include <algorithm>

#include "error.h"

namespace gpuprov {

bool ParsedArgs::has(const std::string& name) const {
  return values.count(name) > 0 ||
         std::find(switches.begin(), switches.end(), name) != switches.end();
}

std::optional<std::string> ParsedArgs::value(const std::string& name) const {
  auto it = values.find(name);
  if (it == values.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> ParsedArgs::values_of(const std::string& name) const {
  std::vector<std::string> out;
  for (const auto& [key, value] : all_values) {
    if (key == name) out.push_back(value);
  }
  return out;
}

ParsedArgs ParseArgs(const std::vector<std::string>& args, const std::vector<OptionSpec>& options,
                     const std::string& command) {
  ParsedArgs out;
  auto find_long = [&](const std::string& name) -> const OptionSpec* {
    for (const auto& o : options) {
      if (name == o.long_name) return &o;
    }
    return nullptr;
  };
  auto find_short = [&](char c) -> const OptionSpec* {
    for (const auto& o : options) {
      if (o.short_name != 0 && o.short_name == c) return &o;
    }
    return nullptr;
  };
  const std::string help_hint = "see `gpuprov " + command + " --help`";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      out.has_dashdash = true;
      out.after_dashdash.assign(args.begin() + i + 1, args.end());
      break;
    }
    const OptionSpec* spec = nullptr;
    std::optional<std::string> inline_value;
    std::string shown = arg;
    if (arg.rfind("--", 0) == 0) {
      std::string name = arg.substr(2);
      size_t eq = name.find('=');
      if (eq != std::string::npos) {
        inline_value = name.substr(eq + 1);
        name = name.substr(0, eq);
        shown = "--" + name;
      }
      spec = find_long(name);
      if (spec == nullptr) {
        throw UsageError("unknown option " + shown + " for `gpuprov " + command + "`", help_hint);
      }
    } else if (arg.size() == 2 && arg[0] == '-' && arg[1] != '-') {
      spec = find_short(arg[1]);
      if (spec == nullptr) {
        throw UsageError("unknown option " + arg + " for `gpuprov " + command + "`", help_hint);
      }
    } else {
      out.positional.push_back(arg);
      continue;
    }
    if (spec->value_name == nullptr) {
      if (inline_value) {
        throw UsageError("option --" + std::string(spec->long_name) + " takes no value",
                         help_hint);
      }
      out.switches.push_back(spec->long_name);
      continue;
    }
    if (!inline_value) {
      if (i + 1 >= args.size()) {
        throw UsageError("option " + shown + " needs a value (" + spec->value_name + ")",
                         help_hint);
      }
      inline_value = args[++i];
    }
    out.values[spec->long_name] = *inline_value;
    out.all_values.emplace_back(spec->long_name, *inline_value);
  }
  return out;
}

std::string OptionsHelp(const std::vector<OptionSpec>& options) {
  std::string out;
  for (const auto& o : options) {
    std::string left = "  ";
    left += o.short_name ? std::string("-") + o.short_name + ", " : "    ";
    left += std::string("--") + o.long_name;
    if (o.value_name) left += std::string(" ") + o.value_name;
    if (left.size() < 30) left.resize(30, ' ');
    out += left + " " + o.help + "\n";
  }
  return out;
}

}  // namespace gpuprov
