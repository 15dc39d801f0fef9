#include "kubeconfig_merge.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "error.h"
#include "file_util.h"

namespace gpuprov {
namespace {

namespace fs = std::filesystem;

const char* const kSections[] = {"clusters", "users", "contexts"};
constexpr const char* kCurrent = "current-context";

/// A file kubectl cannot read either (not YAML, not a mapping, a list that is not a list).
Error Refuse(const std::string& display, const std::string& what) {
  return Error(
      "cannot edit the kubeconfig " + display + ": " + what,
      "fix the file (kubectl config view shows what kubectl reads), or skip the merge "
      "and use gpuprov's own file: export KUBECONFIG=<file>:${KUBECONFIG:-~/.kube/config}");
}

/// A kubeconfig whose layout the line edit does not handle (a flow-style list or mapping, a
/// quoted key): it is merged by re-emitting the whole file instead.
struct NotLineEditable {
  std::string why;
};

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

size_t Indent(const std::string& line) {
  size_t i = 0;
  while (i < line.size() && line[i] == ' ') ++i;
  return i;
}

bool BlankOrComment(const std::string& line) {
  const size_t i = Indent(line);
  return i == line.size() || line[i] == '#';
}

/// The name of a list entry, "" when it has none.
std::string EntryName(const YAML::Node& item) {
  if (!item.IsMap() || !item["name"] || !item["name"].IsScalar()) return "";
  return item["name"].Scalar();
}

/// Writes \a node in block style, each scalar as the file had it: one written in quotes
/// (tag "!") stays quoted, so a string such as "123" or "yes" is not read back as a number or
/// a boolean (yaml-cpp's own emitter drops the quotes). Aliases come out expanded.
void EmitBlock(YAML::Emitter& out, const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      out << YAML::BeginMap;
      for (auto it = node.begin(); it != node.end(); ++it) {
        out << YAML::Key;
        EmitBlock(out, it->first);
        out << YAML::Value;
        EmitBlock(out, it->second);
      }
      out << YAML::EndMap;
      return;
    case YAML::NodeType::Sequence:
      out << YAML::BeginSeq;
      for (const auto& item : node) EmitBlock(out, item);
      out << YAML::EndSeq;
      return;
    case YAML::NodeType::Scalar:
      if (node.Tag() == "!" || node.Tag() == "tag:yaml.org,2002:str") {
        out << YAML::DoubleQuoted << node.Scalar();
      } else if (node.Tag() == "?" || node.Tag().empty()) {
        out << node.Scalar();
      } else {
        out << node;  // another explicit tag: yaml-cpp writes it with the value
      }
      return;
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      out << YAML::Null;
      return;
  }
}

/// \a node as block YAML (EmitBlock): also the form in which two nodes are compared, whatever
/// style each was written in.
std::string BlockText(const YAML::Node& node) {
  YAML::Emitter out;
  EmitBlock(out, node);
  return out.c_str();
}

/// \a item as one block-list entry ("- name: ...") indented by \a indent spaces.
std::vector<std::string> EntryLines(const YAML::Node& item, size_t indent) {
  YAML::Emitter out;
  out << YAML::BeginSeq;
  EmitBlock(out, item);
  out << YAML::EndSeq;
  std::vector<std::string> lines = SplitLines(out.c_str());
  for (auto& line : lines) line.insert(0, indent, ' ');
  return lines;
}

/// Lines [begin, end) replaced by \a text (an insertion when begin == end).
struct LineEdit {
  size_t begin = 0;
  size_t end = 0;
  std::vector<std::string> text;
};

/// One entry of a block list: its lines [begin, end), the column of its dash, its name.
struct EntrySpan {
  size_t begin = 0;
  size_t end = 0;
  size_t dash_column = 0;
  std::string name;
};

struct TopKey {
  YAML::Mark key_mark;
  YAML::Node value;
};

/// Refuses what kubectl refuses too: a top level other than a mapping (or nothing), a key
/// other than a name, a list other than a list, a current-context other than a name.
void CheckKubeconfig(const YAML::Node& root, const std::string& display) {
  if (root.IsNull()) return;
  if (!root.IsMap()) throw Refuse(display, "not a kubeconfig (its top level is not a mapping)");
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (!it->first.IsScalar()) throw Refuse(display, "a top-level key is not a plain name");
    const std::string key = it->first.Scalar();
    const bool list =
        std::find(std::begin(kSections), std::end(kSections), key) != std::end(kSections);
    if (list && !it->second.IsNull() && !it->second.IsSequence()) {
      throw Refuse(display, key + " is not a list");
    }
    if (key == kCurrent && !it->second.IsNull() && !it->second.IsScalar()) {
      throw Refuse(display, "current-context is not a name");
    }
  }
}

/// \a text parsed and checked (CheckKubeconfig).
YAML::Node LoadKubeconfig(const std::string& text, const std::string& display) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw Refuse(display, std::string("not YAML: ") + e.what());
  }
  CheckKubeconfig(root, display);
  return root;
}

/// The parsed file with what the edits need: its lines and each top-level key's position.
class KubeconfigText {
 public:
  KubeconfigText(const std::string& text, const std::string& display)
      : display_(display), lines_(SplitLines(text)) {
    final_newline_ = text.empty() || text.back() == '\n';
    root_ = LoadKubeconfig(text, display);
    if (root_.IsNull()) return;
    if (root_.Style() == YAML::EmitterStyle::Flow) {
      throw NotLineEditable{"its top level is a flow mapping ({...})"};
    }
    bool first = true;
    for (auto it = root_.begin(); it != root_.end(); ++it) {
      if (it->first.Mark().line < 0) throw NotLineEditable{"a top-level key has no position"};
      if (first) root_indent_ = static_cast<size_t>(it->first.Mark().column);
      first = false;
      keys_[it->first.Scalar()] = TopKey{it->first.Mark(), it->second};
    }
  }

  const YAML::Node& root() const { return root_; }
  const std::map<std::string, TopKey>& keys() const { return keys_; }

  /// The entries of block list \a key (empty for a missing, null or empty list).
  std::vector<EntrySpan> Entries(const std::string& key) const {
    auto found = keys_.find(key);
    if (found == keys_.end() || found->second.value.IsNull()) return {};
    const YAML::Node& list = found->second.value;
    if (list.size() == 0) return {};
    if (list.Style() == YAML::EmitterStyle::Flow) {
      throw NotLineEditable{key + " is a flow-style list ([...])"};
    }
    const long key_line = found->second.key_mark.line;
    std::vector<EntrySpan> spans;
    for (const auto& item : list) {
      const YAML::Mark m = item.Mark();
      if (m.line < 0) throw NotLineEditable{"an entry of " + key + " has no position"};
      EntrySpan span;
      bool found_dash = false;
      for (long l = m.line; l > key_line; --l) {
        const std::string& t = lines_[static_cast<size_t>(l)];
        const size_t ind = Indent(t);
        if (ind < t.size() && t[ind] == '-' && (l < m.line || static_cast<long>(ind) < m.column)) {
          span.begin = static_cast<size_t>(l);
          span.dash_column = ind;
          found_dash = true;
          break;
        }
      }
      if (!found_dash) throw NotLineEditable{"an entry of " + key + " has no '-' line"};
      span.name = EntryName(item);
      spans.push_back(span);
    }
    for (size_t i = 0; i + 1 < spans.size(); ++i) spans[i].end = spans[i + 1].begin;
    // The last entry ends at its last line indented deeper than its dash; blank and comment
    // lines after it stay outside.
    EntrySpan& last = spans.back();
    size_t last_content = static_cast<size_t>(list[list.size() - 1].Mark().line);
    for (size_t l = last_content + 1; l < lines_.size(); ++l) {
      if (BlankOrComment(lines_[l])) continue;
      if (Indent(lines_[l]) <= last.dash_column) break;
      last_content = l;
    }
    last.end = last_content + 1;
    return spans;
  }

  /// The line of top-level \a key, checked to hold the key and at most a scalar value (or
  /// an empty value) on it.
  size_t KeyLine(const std::string& key) const {
    const TopKey& k = keys_.at(key);
    const std::string& t = lines_[static_cast<size_t>(k.key_mark.line)];
    if (t.compare(static_cast<size_t>(k.key_mark.column), key.size() + 1, key + ":") != 0) {
      throw NotLineEditable{"the line of '" + key + "' is not '" + key + ": ...'"};
    }
    return static_cast<size_t>(k.key_mark.line);
  }

  /// True when list \a key has an empty value written on its own line (`clusters:`,
  /// `clusters: null`, `clusters: []`, `clusters: [ ]`), which a block list can replace.
  bool EmptyValueOnKeyLine(const std::string& key) const {
    const TopKey& k = keys_.at(key);
    const std::string& t = lines_[KeyLine(key)];
    std::string rest = t.substr(static_cast<size_t>(k.key_mark.column) + key.size() + 1);
    const size_t hash = rest.find(" #");
    if (hash != std::string::npos) rest = rest.substr(0, hash);
    rest.erase(0, rest.find_first_not_of(' '));
    rest.erase(rest.find_last_not_of(' ') + 1);
    const bool empty_flow = rest.size() >= 2 && rest.front() == '[' && rest.back() == ']' &&
                            rest.find_first_not_of(' ', 1) == rest.size() - 1;  // [] or [ ]
    if (rest != "" && rest != "null" && rest != "~" && !empty_flow) return false;
    // Nothing of the value on later lines.
    if (rest.empty()) {
      for (size_t l = KeyLine(key) + 1; l < lines_.size(); ++l) {
        if (BlankOrComment(lines_[l])) continue;
        return Indent(lines_[l]) <= root_indent_ && lines_[l][Indent(lines_[l])] != '-';
      }
    }
    return true;
  }

  std::string Apply(std::vector<LineEdit> edits, const std::vector<std::string>& appended) const {
    // Bottom up, so earlier line numbers stay valid; at one line a replacement before an
    // insertion there (an entry added after a list's last entry, then `current-context` on the
    // next line replaced), so the insertion lands before the replaced line.
    std::sort(edits.begin(), edits.end(), [](const LineEdit& a, const LineEdit& b) {
      return a.begin != b.begin ? a.begin > b.begin : a.end > b.end;
    });
    std::vector<std::string> lines = lines_;
    for (const auto& e : edits) {
      lines.erase(lines.begin() + static_cast<long>(e.begin),
                  lines.begin() + static_cast<long>(e.end));
      lines.insert(lines.begin() + static_cast<long>(e.begin), e.text.begin(), e.text.end());
    }
    for (const auto& a : appended) lines.push_back(std::string(root_indent_, ' ') + a);
    std::string out;
    for (size_t i = 0; i < lines.size(); ++i) {
      out += lines[i];
      if (i + 1 < lines.size() || final_newline_ || !appended.empty()) out += '\n';
    }
    return out;
  }

  size_t root_indent() const { return root_indent_; }
  const std::string& display() const { return display_; }

 private:
  std::string display_;
  std::vector<std::string> lines_;
  bool final_newline_ = true;
  YAML::Node root_;
  size_t root_indent_ = 0;
  std::map<std::string, TopKey> keys_;
};

/// The one entry of list \a key in gpuprov's own kubeconfig.
YAML::Node OurEntry(const YAML::Node& ours, const std::string& key, const std::string& name) {
  const YAML::Node list = ours[key];
  if (!list || !list.IsSequence() || list.size() != 1 || EntryName(list[0]) != name) {
    throw Error(
        "gpuprov's kubeconfig for " + name + " has no single " + key + " entry named " + name,
        "re-run `gpuprov provision` to write it again");
  }
  return list[0];
}

std::vector<std::string> OtherEntries(const YAML::Node& root, const std::string& key,
                                      const std::string& name) {
  std::vector<std::string> out;
  if (!root.IsMap() || !root[key] || !root[key].IsSequence()) return out;
  for (const auto& item : root[key]) {
    if (EntryName(item) != name) out.push_back(BlockText(item));
  }
  return out;
}

std::string CurrentContext(const YAML::Node& root) {
  if (!root.IsMap() || !root[kCurrent] || !root[kCurrent].IsScalar()) return "";
  return root[kCurrent].Scalar();
}

/// The proof that an edit touched nothing else: every other entry, every other top-level key
/// and the current context compare equal (as BlockText, whatever their style) between \a before
/// and the parsed \a after; ours is there once and equal to \a ours_entries (or gone when they
/// are empty). Throws Error when not.
void VerifyEdit(const YAML::Node& before, const std::string& after_text, const std::string& name,
                const std::map<std::string, YAML::Node>& ours_entries,
                const std::string& want_current, const std::string& display) {
  YAML::Node after;
  try {
    after = YAML::Load(after_text);
  } catch (const YAML::Exception& e) {
    throw Error(
        "gpuprov's edit of " + display + " does not parse (" + e.what() + "); nothing was written",
        "this is a bug; please report it");
  }
  auto fail = [&](const std::string& what) {
    return Error("gpuprov's edit of " + display + " would change " + what + "; nothing was written",
                 "this is a bug; please report it with the file's layout (not its secrets)");
  };
  if (before.IsMap()) {
    for (auto it = before.begin(); it != before.end(); ++it) {
      const std::string key = it->first.Scalar();
      if (key == kCurrent ||
          std::find(std::begin(kSections), std::end(kSections), key) != std::end(kSections)) {
        continue;
      }
      if (!after[key] || BlockText(after[key]) != BlockText(it->second)) {
        throw fail("the top-level key '" + key + "'");
      }
    }
  }
  for (const char* key : kSections) {
    if (OtherEntries(before, key, name) != OtherEntries(after, key, name)) {
      throw fail("another entry of " + std::string(key));
    }
    size_t count = 0;
    std::string written;
    if (after.IsMap() && after[key] && after[key].IsSequence()) {
      for (const auto& item : after[key]) {
        if (EntryName(item) == name) ++count, written = BlockText(item);
      }
    }
    auto ours = ours_entries.find(key);
    if (ours == ours_entries.end()) {
      if (count != 0) throw fail(std::string(key) + " (gpuprov's entry is still there)");
    } else if (count != 1 || written != BlockText(ours->second)) {
      throw fail(std::string(key) + " (gpuprov's entry is not as written)");
    }
  }
  if (CurrentContext(after) != want_current) throw fail("current-context");
}

/// The merge as line edits of the file's text (KubeconfigText); throws NotLineEditable for a
/// layout it does not handle.
std::string MergeByLines(const KubeconfigText& doc,
                         const std::map<std::string, YAML::Node>& ours_entries,
                         const std::string& name, bool switch_context) {
  std::vector<LineEdit> edits;
  std::vector<std::string> appended;
  if (doc.root().IsNull()) {
    // A new (or empty) file: the header kubectl writes, then the lists.
    appended.push_back("apiVersion: v1");
    appended.push_back("kind: Config");
  }
  for (const char* key : kSections) {
    const YAML::Node& entry = ours_entries.at(key);
    const std::vector<EntrySpan> spans = doc.Entries(key);
    if (spans.empty()) {
      std::vector<std::string> text = EntryLines(entry, doc.root_indent());
      if (doc.keys().count(key) == 0) {
        appended.push_back(std::string(key) + ":");
        for (auto& line : text) appended.push_back(line.substr(doc.root_indent()));
        continue;
      }
      if (!doc.EmptyValueOnKeyLine(key)) {
        throw NotLineEditable{std::string(key) + " is neither a block list nor empty"};
      }
      const size_t line = doc.KeyLine(key);
      text.insert(text.begin(), std::string(doc.root_indent(), ' ') + key + ":");
      edits.push_back({line, line + 1, text});
      continue;
    }
    bool replaced = false;
    for (const EntrySpan& span : spans) {
      if (span.name != name) continue;
      edits.push_back(
          {span.begin, span.end,
           replaced ? std::vector<std::string>{} : EntryLines(entry, span.dash_column)});
      replaced = true;
    }
    if (!replaced) {
      edits.push_back(
          {spans.back().end, spans.back().end, EntryLines(entry, spans.back().dash_column)});
    }
  }
  if (switch_context) {
    const std::string line_text = std::string(doc.root_indent(), ' ') + kCurrent + ": " + name;
    if (doc.keys().count(kCurrent) != 0) {
      const TopKey& k = doc.keys().at(kCurrent);
      const size_t line = doc.KeyLine(kCurrent);
      if (k.value.IsScalar() && k.value.Mark().line >= 0 &&
          static_cast<size_t>(k.value.Mark().line) != line) {
        throw NotLineEditable{"current-context's value is not on its own line"};
      }
      edits.push_back({line, line + 1, {line_text}});
    } else {
      appended.push_back(std::string(kCurrent) + ": " + name);
    }
  }
  return doc.Apply(edits, appended);
}

/// The whole file re-emitted in block style (EmitBlock), as kubectl rewrites a kubeconfig: each
/// list with the entries named \a name replaced by \a ours_entries' one (appended when it had
/// none) or, with no \a ours_entries, taken out; every other key in its place. Comments are
/// not kept. \a current: the current-context to set, or nullopt to leave it.
std::string Reemit(const YAML::Node& root, const std::map<std::string, YAML::Node>& ours_entries,
                   const std::string& name, const std::optional<std::string>& current) {
  YAML::Node out = YAML::Clone(root);
  for (const char* key : kSections) {
    auto ours = ours_entries.find(key);
    const YAML::Node old = std::as_const(root)[key];  // const: no key added by the look-up
    const bool had = old && !old.IsNull();
    if (!had && ours == ours_entries.end()) continue;
    YAML::Node list(YAML::NodeType::Sequence);
    bool placed = false;
    if (had) {
      for (const auto& item : old) {
        if (EntryName(item) != name) {
          list.push_back(item);
        } else if (!placed && ours != ours_entries.end()) {
          list.push_back(ours->second);
          placed = true;
        }
      }
    }
    if (!placed && ours != ours_entries.end()) list.push_back(ours->second);
    out[key] = list;
  }
  if (current) out[kCurrent] = *current;
  return BlockText(out) + "\n";
}

}  // namespace

std::string MergeKubeconfigText(const std::string& existing, const std::string& ours_text,
                                const std::string& name, bool switch_context,
                                const std::string& display, bool* reemitted) {
  YAML::Node ours;
  try {
    ours = YAML::Load(ours_text);
  } catch (const YAML::Exception& e) {
    throw Error("gpuprov's kubeconfig for " + name + " is not YAML: " + e.what(),
                "re-run `gpuprov provision` to write it again");
  }
  std::map<std::string, YAML::Node> ours_entries;
  for (const char* key : kSections) ours_entries[key] = OurEntry(ours, key, name);
  const YAML::Node root = LoadKubeconfig(existing, display);
  const std::string want_current = switch_context ? name : CurrentContext(root);
  std::string result;
  bool by_lines = true;
  try {
    result = MergeByLines(KubeconfigText(existing, display), ours_entries, name, switch_context);
  } catch (const NotLineEditable&) {
    by_lines = false;
    result = Reemit(root, ours_entries, name,
                    switch_context ? std::optional<std::string>(name) : std::nullopt);
  }
  if (reemitted != nullptr) *reemitted = !by_lines;
  VerifyEdit(root, result, name, ours_entries, want_current, display);
  return result;
}

std::string RemoveKubeconfigEntries(const std::string& existing, const std::string& name,
                                    const std::string& display, bool* reemitted) {
  if (reemitted != nullptr) *reemitted = false;
  const YAML::Node root = LoadKubeconfig(existing, display);
  if (root.IsNull()) return existing;
  bool present = CurrentContext(root) == name;
  for (const char* key : kSections) {
    const YAML::Node list = std::as_const(root)[key];
    if (list && list.IsSequence()) {
      for (const auto& item : list) present = present || EntryName(item) == name;
    }
  }
  if (!present) return existing;
  const std::string want_current = CurrentContext(root) == name ? "" : CurrentContext(root);
  std::string result;
  try {
    const KubeconfigText doc(existing, display);
    std::vector<LineEdit> edits;
    for (const char* key : kSections) {
      for (const EntrySpan& span : doc.Entries(key)) {
        if (span.name == name) edits.push_back({span.begin, span.end, {}});
      }
    }
    if (CurrentContext(root) == name) {
      const size_t line = doc.KeyLine(kCurrent);
      edits.push_back(
          {line, line + 1, {std::string(doc.root_indent(), ' ') + kCurrent + ": \"\""}});
    }
    result = doc.Apply(edits, {});
  } catch (const NotLineEditable&) {
    if (reemitted != nullptr) *reemitted = true;
    result = Reemit(root, {}, name,
                    CurrentContext(root) == name ? std::optional<std::string>("") : std::nullopt);
  }
  VerifyEdit(root, result, name, {}, want_current, display);
  return result;
}

fs::path UserKubeconfigFile(const EnvLookup& env) {
  if (std::optional<std::string> list = env("KUBECONFIG")) {
    size_t start = 0;
    while (start <= list->size()) {
      size_t colon = list->find(':', start);
      if (colon == std::string::npos) colon = list->size();
      const std::string first = list->substr(start, colon - start);
      if (!first.empty()) return fs::absolute(first);
      start = colon + 1;
    }
  }
  std::optional<std::string> home = env("HOME");
  if (!home || home->empty()) {
    throw UsageError("neither KUBECONFIG nor HOME is set: no kubeconfig file to merge into",
                     "set KUBECONFIG to the file kubectl should use");
  }
  return fs::path(*home) / ".kube" / "config";
}

namespace {

/// kubectl's own lock on a kubeconfig (client-go: `<file>.lock`, made with O_CREAT|O_EXCL and
/// removed when done), held while gpuprov reads and writes the file, so a kubectl writing the
/// same file at the same moment cannot lose gpuprov's change or have its own lost.
class KubectlLock {
 public:
  explicit KubectlLock(const fs::path& file) : path_(file.string() + ".lock") {
    for (int attempt = 0;; ++attempt) {
      const int fd = open(path_.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
      if (fd >= 0) {
        close(fd);
        return;
      }
      if (errno != EEXIST) {
        throw Error("cannot create kubectl's lock file " + path_.string() + ": " +
                    std::strerror(errno));
      }
      if (attempt >= 50) {
        throw Error(
            "kubectl's lock file " + path_.string() +
                " has existed for 5 s: another "
                "kubectl (or a tool like it) is writing " +
                file.string(),
            "retry when it is done; if nothing is writing the file, remove " + path_.string());
      }
      usleep(100 * 1000);
    }
  }
  ~KubectlLock() {
    std::error_code ec;
    fs::remove(path_, ec);
  }
  KubectlLock(const KubectlLock&) = delete;
  KubectlLock& operator=(const KubectlLock&) = delete;

 private:
  fs::path path_;
};

KubeconfigEdit EditFile(
    const fs::path& file, const fs::path& lock, bool create,
    const std::function<std::string(const std::string&, const std::string&, bool*)>& edit) {
  KubeconfigEdit result;
  std::error_code ec;
  // A symlinked kubeconfig: edit its target, keep the link.
  result.file = fs::is_symlink(file, ec) ? fs::weakly_canonical(file, ec) : file;
  if (ec) result.file = file;
  EnsureDir(lock.parent_path());
  FileLock held(lock, "the kubeconfig " + result.file.string(), 60 * 1000);
  const fs::path dir = result.file.parent_path();
  if (!fs::exists(dir)) {
    if (!create) return result;
    fs::create_directories(dir, ec);
    if (!ec) fs::permissions(dir, fs::perms::owner_all, ec);
    if (ec) throw Error("cannot create " + dir.string() + ": " + ec.message());
  }
  const KubectlLock kubectl_lock(result.file);
  const std::optional<std::string> old = ReadFileIfExists(result.file, kKubeconfigKind);
  if (!old && !create) return result;
  bool reemitted = false;
  const std::string text = edit(old.value_or(""), result.file.string(), &reemitted);
  if (old && text == *old) return result;
  result.reemitted = reemitted;
  mode_t mode = 0600;
  if (old) {
    struct stat st {};
    if (stat(result.file.c_str(), &st) == 0) mode = st.st_mode & 0700;
    result.backup = result.file.string() + ".gpuprov-backup";
    WriteFileAtomic(result.backup, *old, 0600);
  }
  WriteFileAtomic(result.file, text, mode == 0 ? 0600 : mode);
  result.changed = true;
  return result;
}

}  // namespace

KubeconfigEdit MergeKubeconfigFile(const fs::path& file, const std::string& ours,
                                   const std::string& name, bool switch_context,
                                   const fs::path& lock) {
  return EditFile(file, lock, true,
                  [&](const std::string& old, const std::string& display, bool* reemitted) {
                    return MergeKubeconfigText(old, ours, name, switch_context, display,
                                               reemitted);
                  });
}

KubeconfigEdit RemoveFromKubeconfigFile(const fs::path& file, const std::string& name,
                                        const fs::path& lock) {
  return EditFile(file, lock, false,
                  [&](const std::string& old, const std::string& display, bool* reemitted) {
                    return RemoveKubeconfigEntries(old, name, display, reemitted);
                  });
}

}  // namespace gpuprov
