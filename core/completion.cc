#include "completion.h"

#include "error.h"

namespace gpuprov {
namespace {

const OptionSpec* FindOption(const std::vector<OptionSpec>& options, const std::string& word) {
  for (const auto& o : options) {
    if (word == std::string("--") + o.long_name) return &o;
    if (o.short_name != 0 && word == std::string("-") + o.short_name) return &o;
  }
  return nullptr;
}

std::vector<std::string> ValuesOf(Completion kind, const Command* command,
                                  const std::vector<Command>& commands, CompletionSources& sources,
                                  const std::string& cloud, bool* files) {
  switch (kind) {
    case Completion::kCloud:
      return sources.Clouds();
    case Completion::kVm:
      return sources.Vms();
    case Completion::kGpus:
      return sources.GpuTypes(cloud);
    case Completion::kOutputFormat: {
      std::vector<std::string> formats = {"text", "json", "yaml"};
      if (command != nullptr && command->streams) formats.push_back("ndjson");
      return formats;
    }
    case Completion::kShell:
      return {"bash", "zsh", "fish"};
    case Completion::kCommand:
      return CommandNames(commands);
    case Completion::kFile:
      *files = true;
      return {};
    case Completion::kNone:
      break;
  }
  return {};
}

}  // namespace

CompletionResult Complete(const std::vector<Command>& commands,
                          const std::vector<OptionSpec>& globals,
                          const std::vector<std::string>& words, CompletionSources& sources) {
  CompletionResult result;
  if (words.empty()) return result;
  const std::string& cur = words.back();
  const Command* command = nullptr;
  std::vector<OptionSpec> options = globals;
  size_t positionals = 0;
  const OptionSpec* pending = nullptr;  // an option whose value is the next word
  std::string cloud;                    // --cloud's value on the line (GPU types of that cloud)
  for (size_t i = 0; i + 1 < words.size(); ++i) {
    const std::string& w = words[i];
    if (pending != nullptr) {
      if (pending->completes == Completion::kCloud) cloud = w;
      pending = nullptr;
      continue;
    }
    if (w.rfind("--cloud=", 0) == 0) cloud = w.substr(8);
    if (w == "--") return result;  // a remote command follows: nothing to offer
    if (w.size() > 1 && w[0] == '-') {
      const OptionSpec* o = FindOption(options, w);
      if (o != nullptr && o->value_name != nullptr) pending = o;
      continue;
    }
    if (command == nullptr) {
      command = FindCommand(commands, w);
      if (command == nullptr) return result;  // an unknown command: nothing sensible
      options = command->options;
      options.insert(options.end(), globals.begin(), globals.end());
      continue;
    }
    ++positionals;
  }
  std::vector<std::string> candidates;
  std::string prefix;  // put before each candidate (for --option=VALUE)
  if (pending != nullptr) {
    candidates = ValuesOf(pending->completes, command, commands, sources, cloud, &result.files);
  } else if (cur.rfind("--", 0) == 0 && cur.find('=') != std::string::npos) {
    const std::string name = cur.substr(0, cur.find('='));
    const OptionSpec* o = FindOption(options, name);
    if (o == nullptr || o->value_name == nullptr) return result;
    prefix = name + "=";
    candidates = ValuesOf(o->completes, command, commands, sources, cloud, &result.files);
  } else if (!cur.empty() && cur[0] == '-') {
    for (const auto& o : options) candidates.push_back(std::string("--") + o.long_name);
  } else if (command == nullptr) {
    candidates = CommandNames(commands);
  } else if (positionals == 0) {
    candidates = ValuesOf(command->arguments, command, commands, sources, cloud, &result.files);
  }
  for (const auto& c : candidates) {
    const std::string word = prefix + c;
    if (word.rfind(cur, 0) == 0) result.words.push_back(word);
  }
  return result;
}

std::string CompletionReply(const CompletionResult& result) {
  std::string out;
  for (const auto& w : result.words) out += w + "\n";
  out += result.files ? ":files\n" : ":done\n";
  return out;
}

std::string CompletionScript(const std::string& shell) {
  if (shell == "bash") {
    return R"(# bash completion for gpuprov (from `gpuprov completion bash`). The candidates come from
# `gpuprov __complete`, which answers from gpuprov's command table, drivers and VM records.
_gpuprov() {
  local cur words cword
  if declare -F _get_comp_words_by_ref >/dev/null 2>&1; then
    _get_comp_words_by_ref -n =: cur words cword
  else
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD
    cur=${COMP_WORDS[COMP_CWORD]}
  fi
  local IFS=$'\n'
  local -a reply
  reply=($("${words[0]}" __complete -- "${words[@]:1:cword}" 2>/dev/null)) || return 0
  ((${#reply[@]} > 0)) || return 0
  local directive=${reply[${#reply[@]}-1]}
  unset 'reply[${#reply[@]}-1]'
  if [[ $directive == :files ]]; then
    compopt -o filenames 2>/dev/null
    COMPREPLY=($(compgen -f -- "${cur#*=}"))
    return 0
  fi
  # Bash replaces only the part after a word break ('=' or ':'): drop what comes before it.
  local word before=""
  if [[ $cur == *[=:]* && $COMP_WORDBREAKS == *[=:]* ]]; then
    before=${cur%"${cur##*[=:]}"}
  fi
  COMPREPLY=()
  for word in "${reply[@]}"; do COMPREPLY+=("${word#"$before"}"); done
}
complete -F _gpuprov gpuprov
)";
  }
  if (shell == "zsh") {
    return R"(#compdef gpuprov
# zsh completion for gpuprov (from `gpuprov completion zsh`). The candidates come from
# `gpuprov __complete`, which answers from gpuprov's command table, drivers and VM records.
_gpuprov() {
  local -a reply
  reply=("${(@f)$(${words[1]} __complete -- "${(@)words[2,CURRENT]}" 2>/dev/null)}")
  local directive=${reply[-1]}
  reply=("${(@)reply[1,-2]}")
  if [[ $directive == :files ]]; then
    _files
    return
  fi
  compadd -Q -- "${reply[@]}"
}
if [[ $funcstack[1] == _gpuprov ]]; then
  _gpuprov "$@"
else
  compdef _gpuprov gpuprov
fi
)";
  }
  if (shell == "fish") {
    return R"(# fish completion for gpuprov (from `gpuprov completion fish`). The candidates come from
# `gpuprov __complete`, which answers from gpuprov's command table, drivers and VM records.
function __gpuprov_complete
    set -l tokens (commandline -opc)
    set -l reply ($tokens[1] __complete -- $tokens[2..-1] (commandline -ct) 2>/dev/null)
    set -l directive $reply[-1]
    set -e reply[-1]
    if test "$directive" = ":files"
        __fish_complete_path (string replace -r '^--[^=]*=' '' -- (commandline -ct))
        return
    end
    printf '%s\n' $reply
end
complete -c gpuprov -f -a '(__gpuprov_complete)'
)";
  }
  throw UsageError("no completion for shell '" + shell + "'",
                   "gpuprov completion bash, zsh or fish");
}

}  // namespace gpuprov
