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

size_t EditDistance(std::string_view a, std::string_view b) {
  // Optimal string alignment over a full table; words here are short.
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1, 0));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::optional<std::string> ClosestMatch(std::string_view typed,
                                        const std::vector<std::string>& candidates) {
  if (typed.empty()) return std::nullopt;
  std::optional<std::string> best;
  size_t best_distance = 0;
  for (const std::string& c : candidates) {
    const size_t distance = EditDistance(typed, c);
    const size_t longer = std::max(typed.size(), c.size());
    const bool near = distance <= 2 && distance * 3 <= longer;
    const bool prefix = typed.size() >= 2 && c.rfind(typed, 0) == 0;
    if (!near && !prefix) continue;
    if (!best || distance < best_distance) {
      best = c;
      best_distance = distance;
    }
  }
  return best;
}

std::string DidYouMean(std::string_view typed, const std::vector<std::string>& candidates) {
  std::optional<std::string> match = ClosestMatch(typed, candidates);
  return match ? " (did you mean " + *match + "?)" : "";
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
  const std::string where = command.empty() ? "`gpuprov`" : "`gpuprov " + command + "`";
  const std::string help_hint =
      command.empty() ? "see `gpuprov --help`" : "see `gpuprov " + command + " --help`";
  auto unknown = [&](const std::string& shown) {
    std::vector<std::string> known;
    for (const auto& o : options) {
      known.push_back(std::string("--") + o.long_name);
      if (o.short_name != 0) known.push_back(std::string("-") + o.short_name);
    }
    // A one-letter typo of a short option suggests nothing useful; compare long forms only.
    std::vector<std::string> long_forms;
    for (const auto& k : known) {
      if (k.rfind("--", 0) == 0) long_forms.push_back(k);
    }
    return UsageError("unknown option " + shown + " for " + where +
                          (shown.rfind("--", 0) == 0 ? DidYouMean(shown, long_forms) : ""),
                      help_hint);
  };
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
      if (spec == nullptr) throw unknown(shown);
    } else if (arg.size() >= 2 && arg[0] == '-') {
      shown = arg.substr(0, 2);
      spec = find_short(arg[1]);
      if (spec == nullptr) throw unknown(shown);
      if (arg.size() > 2) {
        if (spec->value_name != nullptr) {
          inline_value = arg.substr(2);  // -ojson
        } else {
          // Bundled switches (-vy): every letter must be a switch.
          for (size_t k = 1; k < arg.size(); ++k) {
            const OptionSpec* s = find_short(arg[k]);
            if (s == nullptr) throw unknown(std::string("-") + arg[k]);
            if (s->value_name != nullptr) {
              throw UsageError("option -" + std::string(1, arg[k]) + " takes a value (" +
                                   s->value_name + ") and cannot be bundled in " + arg,
                               help_hint);
            }
            out.switches.push_back(s->long_name);
          }
          continue;
        }
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
