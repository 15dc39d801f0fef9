#include "kubeconfig_merge.h"

#include <Poco/Path.h>
#include <Poco/Pipe.h>
#include <Poco/PipeStream.h>
#include <Poco/Process.h>
#include <Poco/StreamCopier.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include "error.h"
#include "file_util.h"
#include "kubeconfig.h"
#include "test_support.h"

namespace gpuprov {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

KubeCredentials Creds(const std::string& tag) {
  KubeCredentials c;
  c.ca_pem = "-----BEGIN CERTIFICATE-----\nCA" + tag + "\n-----END CERTIFICATE-----\n";
  c.client_cert_pem = "-----BEGIN CERTIFICATE-----\nCERT" + tag + "\n-----END CERTIFICATE-----\n";
  c.client_key_pem =
      "-----BEGIN EC PRIVATE KEY-----\nKEY" + tag + "\n-----END EC PRIVATE KEY-----\n";
  return c;
}

std::string Ours(const std::string& vm, int port, const std::string& tag = "1") {
  return RenderKubeconfig(vm, "https://127.0.0.1:" + std::to_string(port), Creds(tag));
}

// What kubectl writes, with a comment and an entry of another cluster.
const char* const kUserFile =
    "apiVersion: v1\n"
    "# my clusters\n"
    "clusters:\n"
    "- cluster:\n"
    "    certificate-authority-data: QUJD\n"
    "    server: https://prod.example:6443   # production\n"
    "  name: prod\n"
    "contexts:\n"
    "- context:\n"
    "    cluster: prod\n"
    "    namespace: 'web'\n"
    "    user: admin\n"
    "  name: prod\n"
    "current-context: prod\n"
    "kind: Config\n"
    "preferences: {}\n"
    "users:\n"
    "- name: admin\n"
    "  user:\n"
    "    token: \"abc\"\n"
    "\n"
    "# trailing comment\n";

std::string Server(const YAML::Node& root, const std::string& cluster) {
  for (const auto& c : root["clusters"]) {
    if (c["name"].Scalar() == cluster) return c["cluster"]["server"].Scalar();
  }
  return "";
}

TEST(MergeKubeconfigText, AddsOurEntriesAndLeavesEveryOtherByteAsItWas) {
  const std::string merged =
      MergeKubeconfigText(kUserFile, Ours("demo", 16443), "gpuprov-demo", false, "config");
  // Each line of the user's file is still there, in order.
  EXPECT_EQ(RemoveKubeconfigEntries(merged, "gpuprov-demo", "config"), kUserFile);
  const YAML::Node root = YAML::Load(merged);
  EXPECT_EQ(root["clusters"].size(), 2u);
  EXPECT_EQ(root["users"].size(), 2u);
  EXPECT_EQ(root["contexts"].size(), 2u);
  EXPECT_EQ(Server(root, "gpuprov-demo"), "https://127.0.0.1:16443");
  EXPECT_EQ(root["current-context"].Scalar(), "prod");  // no --switch
  EXPECT_THAT(merged, HasSubstr("    server: https://prod.example:6443   # production\n"));
  EXPECT_THAT(merged, HasSubstr("# trailing comment\n"));
}

TEST(MergeKubeconfigText, RefreshesOurEntriesInPlaceAndSwitches) {
  const std::string once =
      MergeKubeconfigText(kUserFile, Ours("demo", 16443, "1"), "gpuprov-demo", false, "config");
  const std::string twice =
      MergeKubeconfigText(once, Ours("demo", 16444, "2"), "gpuprov-demo", true, "config");
  const YAML::Node root = YAML::Load(twice);
  EXPECT_EQ(root["clusters"].size(), 2u);
  EXPECT_EQ(Server(root, "gpuprov-demo"), "https://127.0.0.1:16444");
  EXPECT_EQ(root["current-context"].Scalar(), "gpuprov-demo");
  // The credentials kubectl reads are the new ones.
  EXPECT_EQ(ParseKubeconfig(twice).client_cert_pem, Creds("2").client_cert_pem);
  // Merging the same again changes nothing.
  EXPECT_EQ(MergeKubeconfigText(twice, Ours("demo", 16444, "2"), "gpuprov-demo", true, "config"),
            twice);
  // Removing gives back the user's file, with current-context emptied (it named ours).
  std::string back = RemoveKubeconfigEntries(twice, "gpuprov-demo", "config");
  std::string want = kUserFile;
  want.replace(want.find("current-context: prod"), 21, "current-context: \"\"");
  EXPECT_EQ(back, want);
}

TEST(MergeKubeconfigText, TwoVmsSideBySideAndIndentedLists) {
  const std::string indented =
      "apiVersion: v1\n"
      "clusters:\n"
      "  - name: other\n"
      "    cluster:\n"
      "      server: https://o:6443\n"
      "users:\n"
      "  - name: other\n"
      "    user: {}\n"
      "contexts:\n"
      "  - name: other\n"
      "    context: {cluster: other, user: other}\n"
      "kind: Config\n";
  std::string text = MergeKubeconfigText(indented, Ours("a", 16443), "gpuprov-a", false, "f");
  text = MergeKubeconfigText(text, Ours("b", 16444), "gpuprov-b", true, "f");
  const YAML::Node root = YAML::Load(text);
  EXPECT_EQ(root["clusters"].size(), 3u);
  EXPECT_EQ(Server(root, "gpuprov-a"), "https://127.0.0.1:16443");
  EXPECT_EQ(Server(root, "gpuprov-b"), "https://127.0.0.1:16444");
  EXPECT_THAT(text, HasSubstr("\n  - name: gpuprov-a\n    cluster:\n"));  // the file's indentation
  text = RemoveKubeconfigEntries(text, "gpuprov-b", "f");
  text = RemoveKubeconfigEntries(text, "gpuprov-a", "f");
  EXPECT_EQ(text, indented + std::string("current-context: \"\"\n"));
}

TEST(MergeKubeconfigText, ANewFileAndNullListsGetBlockLists) {
  const std::string fresh = MergeKubeconfigText("", Ours("demo", 16443), "gpuprov-demo", true, "f");
  EXPECT_EQ(ParseKubeconfig(fresh).server, "https://127.0.0.1:16443");
  EXPECT_EQ(YAML::Load(fresh)["kind"].Scalar(), "Config");
  const std::string nulls =
      "apiVersion: v1\nclusters: null\ncontexts: []\ncurrent-context: \"\"\nkind: Config\n"
      "preferences: {}\nusers: null\n";
  const std::string merged =
      MergeKubeconfigText(nulls, Ours("demo", 16443), "gpuprov-demo", true, "f");
  EXPECT_EQ(ParseKubeconfig(merged).server, "https://127.0.0.1:16443");
  EXPECT_THAT(merged, HasSubstr("preferences: {}\n"));
  // An entry added at a list's end, right above a line that is replaced (a null list, the
  // current context).
  const std::string packed =
      "clusters:\n- name: x\n  cluster: {server: s}\nusers: null\ncontexts:\n- name: c\n"
      "  context: {cluster: x, user: u}\ncurrent-context: c\n";
  const std::string both =
      MergeKubeconfigText(packed, Ours("demo", 16443), "gpuprov-demo", true, "f");
  const YAML::Node root = YAML::Load(both);
  EXPECT_EQ(root["clusters"].size(), 2u);
  EXPECT_EQ(root["users"].size(), 1u);
  EXPECT_EQ(root["contexts"].size(), 2u);
  EXPECT_EQ(ParseKubeconfig(both).server, "https://127.0.0.1:16443");
}

TEST(MergeKubeconfigText, RefusesWhatKubectlCannotReadEitherNamingTheFile) {
  try {
    MergeKubeconfigText("apiVersion: v1\nclusters: prod\n", Ours("demo", 16443), "gpuprov-demo",
                        false, "/home/u/.kube/config");
    FAIL() << "accepted a clusters that is not a list";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("/home/u/.kube/config"));
    EXPECT_THAT(e.what(), HasSubstr("clusters is not a list"));
  }
  EXPECT_THROW(MergeKubeconfigText("- a\n- b\n", Ours("d", 1), "gpuprov-d", false, "f"), Error);
  EXPECT_THROW(MergeKubeconfigText("a: [\n", Ours("d", 1), "gpuprov-d", false, "f"), Error);
  EXPECT_THROW(MergeKubeconfigText("current-context: [a]\n", Ours("d", 1), "gpuprov-d", false, "f"),
               Error);
  EXPECT_THROW(RemoveKubeconfigEntries("users: {a: b}\n", "gpuprov-d", "f"), Error);
}

// A user's file in flow style, with values only quoting keeps strings (a namespace "123", a
// token "true").
const char* const kFlowFile =
    "apiVersion: v1\n"
    "# flow style\n"
    "clusters: [{name: prod, cluster: {server: 'https://prod.example:6443'}}]\n"
    "contexts: [{name: prod, context: {cluster: prod, user: admin, namespace: \"123\"}}]\n"
    "current-context: prod\n"
    "kind: Config\n"
    "preferences: {}\n"
    "users: [{name: admin, user: {token: \"true\"}}]\n";

TEST(MergeKubeconfigText, AFlowStyleFileIsReemittedWithEveryEntryAndItsQuoting) {
  bool reemitted = false;
  const std::string merged = MergeKubeconfigText(kFlowFile, Ours("demo", 16443), "gpuprov-demo",
                                                 true, "config", &reemitted);
  EXPECT_TRUE(reemitted);
  const YAML::Node root = YAML::Load(merged);
  EXPECT_EQ(root["clusters"].size(), 2u) << merged;
  EXPECT_EQ(root["users"].size(), 2u);
  EXPECT_EQ(root["contexts"].size(), 2u);
  EXPECT_EQ(root["clusters"].Style(), YAML::EmitterStyle::Block);
  EXPECT_EQ(Server(root, "prod"), "https://prod.example:6443");
  EXPECT_EQ(Server(root, "gpuprov-demo"), "https://127.0.0.1:16443");
  EXPECT_EQ(root["current-context"].Scalar(), "gpuprov-demo");
  EXPECT_EQ(root["kind"].Scalar(), "Config");
  EXPECT_TRUE(root["preferences"].IsMap());
  // Strings stay strings: quoted as they were (kubectl would read a bare 123 as a number).
  EXPECT_THAT(merged, HasSubstr("namespace: \"123\""));
  EXPECT_THAT(merged, HasSubstr("token: \"true\""));
  EXPECT_EQ(ParseKubeconfig(merged).client_cert_pem, Creds("1").client_cert_pem);
  // The result is block style: the next merge and the removal edit it line by line.
  const std::string again = MergeKubeconfigText(merged, Ours("demo", 16443), "gpuprov-demo", true,
                                                "config", &reemitted);
  EXPECT_FALSE(reemitted);
  EXPECT_EQ(again, merged);
  const YAML::Node removed =
      YAML::Load(RemoveKubeconfigEntries(merged, "gpuprov-demo", "config", &reemitted));
  EXPECT_FALSE(reemitted);
  EXPECT_EQ(removed["clusters"].size(), 1u);
  EXPECT_EQ(removed["current-context"].Scalar(), "");
}

TEST(MergeKubeconfigText, MixedFlowAndBlockListsAndAJsonFileAreMerged) {
  const std::string mixed =
      "apiVersion: v1\n"
      "clusters:\n"
      "- name: prod\n"
      "  cluster:\n"
      "    server: https://prod.example:6443\n"
      "users: [{name: admin, user: {token: abc}}]\n"
      "contexts:\n"
      "- {name: prod, context: {cluster: prod, user: admin}}\n"
      "- name: gpuprov-demo\n"
      "  context: {cluster: old, user: old}\n"
      "current-context: prod\n";
  bool reemitted = false;
  std::string merged = MergeKubeconfigText(mixed, Ours("demo", 16443), "gpuprov-demo", false,
                                           "f", &reemitted);
  EXPECT_TRUE(reemitted);
  YAML::Node root = YAML::Load(merged);
  EXPECT_EQ(root["clusters"].size(), 2u) << merged;
  EXPECT_EQ(root["users"].size(), 2u);
  EXPECT_EQ(root["contexts"].size(), 2u);  // the stale gpuprov-demo replaced in its place
  EXPECT_EQ(root["contexts"][1]["context"]["cluster"].Scalar(), "gpuprov-demo");
  EXPECT_EQ(root["current-context"].Scalar(), "prod");
  EXPECT_EQ(root["users"][0]["user"]["token"].Scalar(), "abc");

  const std::string json =
      R"({"apiVersion": "v1", "kind": "Config", "clusters": [{"name": "prod", "cluster": )"
      R"({"server": "https://prod.example:6443"}}], "users": [], "contexts": [],)"
      R"( "current-context": ""})";
  merged = MergeKubeconfigText(json, Ours("demo", 16443), "gpuprov-demo", true, "f", &reemitted);
  EXPECT_TRUE(reemitted);
  root = YAML::Load(merged);
  EXPECT_EQ(root["clusters"].size(), 2u) << merged;
  EXPECT_EQ(root["users"].size(), 1u);
  EXPECT_EQ(root["current-context"].Scalar(), "gpuprov-demo");
  // Removing from a flow file re-emits it too, without our entries.
  root = YAML::Load(RemoveKubeconfigEntries(
      "{clusters: [{name: gpuprov-demo, cluster: {server: s}}], current-context: gpuprov-demo}",
      "gpuprov-demo", "f", &reemitted));
  EXPECT_TRUE(reemitted);
  EXPECT_EQ(root["clusters"].size(), 0u);
  EXPECT_EQ(root["current-context"].Scalar(), "");
}

TEST(MergeKubeconfigText, EmptyListsInEitherStyleAreFilledLineByLine) {
  const std::string empty =
      "apiVersion: v1\nclusters: []\ncontexts: [ ]\nusers:\ncurrent-context: \"\"\nkind: Config\n"
      "# kept\npreferences: {}\n";
  bool reemitted = true;
  const std::string merged =
      MergeKubeconfigText(empty, Ours("demo", 16443), "gpuprov-demo", false, "f", &reemitted);
  EXPECT_FALSE(reemitted) << merged;
  EXPECT_THAT(merged, HasSubstr("# kept\npreferences: {}\n"));
  const YAML::Node root = YAML::Load(merged);
  EXPECT_EQ(root["clusters"].size(), 1u);
  EXPECT_EQ(root["contexts"].size(), 1u);
  EXPECT_EQ(root["users"].size(), 1u);
  // An empty flow mapping (what `{}` a tool may write) gets the header and the lists.
  const std::string braces =
      MergeKubeconfigText("{}\n", Ours("demo", 16443), "gpuprov-demo", true, "f", &reemitted);
  EXPECT_TRUE(reemitted);
  EXPECT_EQ(ParseKubeconfig(braces).server, "https://127.0.0.1:16443");
}

// kubectl's own layout, users last: a second VM merged after a first, then switched to.
TEST(MergeKubeconfigText, ASecondVmAfterAFirstWhenUsersIsTheLastList) {
  const std::string user_file =
      "apiVersion: v1\n# the user's own cluster\nclusters:\n- cluster:\n"
      "    certificate-authority-data: QUJD\n    server: https://prod.example:6443\n"
      "  name: prod\ncontexts:\n- context:\n    cluster: prod\n    user: admin\n  name: prod\n"
      "current-context: prod\nkind: Config\npreferences: {}\nusers:\n- name: admin\n  user:\n"
      "    token: abc\n";
  std::string text = MergeKubeconfigText(user_file, Ours("a", 16443), "gpuprov-a", false, "f");
  text = MergeKubeconfigText(text, Ours("b", 16444), "gpuprov-b", true, "f");
  const YAML::Node root = YAML::Load(text);
  EXPECT_EQ(root["users"].size(), 3u) << text;
  EXPECT_EQ(root["current-context"].Scalar(), "gpuprov-b");
  text = RemoveKubeconfigEntries(text, "gpuprov-a", "f");
  text = RemoveKubeconfigEntries(text, "gpuprov-b", "f");
  std::string want = user_file;
  want.replace(want.find("current-context: prod"), 21, "current-context: \"\"");
  EXPECT_EQ(text, want);
}

// Many layouts a user's file may have (list order, dash indentation, comments and blank lines
// between and after entries, flow-style entries, a missing or null list, no final newline):
// merging and removing again gives back every byte, and kubectl's view of the other entries
// (what yaml-cpp parses) never changes in between.
TEST(MergeKubeconfigText, RemoveAfterMergeGivesBackEveryLayoutByteForByte) {
  const std::vector<std::string> indents = {"", "  ", "    "};
  const std::vector<std::string> between = {"", "\n", "# note\n", "\n  # indented note\n\n"};
  int layouts = 0;
  for (const std::string& dash : indents) {
    for (const std::string& gap : between) {
      for (int order = 0; order < 3; ++order) {
        for (int variant = 0; variant < 3; ++variant) {
          const std::string in = dash + "  ";  // an entry's keys, under its dash
          std::string clusters = "clusters:\n" + dash + "- cluster:\n" + in +
                                 "  server: https://a:1\n" + in + "name: a\n" + gap + dash +
                                 "- {name: 'b', cluster: {server: \"https://b:2\"}}\n";
          std::string users = "users:\n" + dash + "- name: a\n" + in + "user:\n" + in +
                              "  token: t   # a comment\n" + gap;
          if (variant == 1) users = "users: null\n";
          if (variant == 2) users = "";
          std::string contexts = "contexts:\n" + dash + "- context:\n" + in + "  cluster: a\n" +
                                 in + "  user: a\n" + in + "name: a\n";
          std::vector<std::string> parts = {clusters, users, contexts};
          std::rotate(parts.begin(), parts.begin() + order, parts.end());
          std::string file = "apiVersion: v1\n" + parts[0] + parts[1] + parts[2] +
                             "current-context: a\nkind: Config\n";
          if (variant == 2) file.pop_back();  // no final newline
          ++layouts;
          SCOPED_TRACE(file);
          const std::string merged =
              MergeKubeconfigText(file, Ours("demo", 16443), "gpuprov-demo", false, "f");
          const YAML::Node root = YAML::Load(merged);
          EXPECT_EQ(Server(root, "b"), "https://b:2");
          EXPECT_EQ(Server(root, "gpuprov-demo"), "https://127.0.0.1:16443");
          EXPECT_EQ(root["current-context"].Scalar(), "a");
          const std::string back = RemoveKubeconfigEntries(merged, "gpuprov-demo", "f");
          // A null list becomes an empty block list ("users:"), null to YAML and kubectl
          // alike; a missing one is added at the end and stays as an empty list.
          std::string want = file;
          if (variant == 1) want.replace(want.find("users: null"), 11, "users:");
          if (variant == 2) want += "\nusers:\n";
          EXPECT_EQ(back, want);
          // Switching and removing: the same but an emptied current-context.
          const std::string switched =
              MergeKubeconfigText(file, Ours("demo", 16443), "gpuprov-demo", true, "f");
          EXPECT_EQ(YAML::Load(switched)["current-context"].Scalar(), "gpuprov-demo");
          const YAML::Node removed =
              YAML::Load(RemoveKubeconfigEntries(switched, "gpuprov-demo", "f"));
          EXPECT_EQ(removed["current-context"].Scalar(), "");
          EXPECT_EQ(removed["clusters"].size(), 2u);
        }
      }
    }
  }
  EXPECT_EQ(layouts, 108);
}

TEST(MergeKubeconfigText, RemoveLeavesAFileWithoutOurEntriesAlone) {
  EXPECT_EQ(RemoveKubeconfigEntries(kUserFile, "gpuprov-demo", "f"), kUserFile);
  EXPECT_EQ(RemoveKubeconfigEntries("", "gpuprov-demo", "f"), "");
}

TEST(UserKubeconfigFile, FirstOfKubeconfigElseHomeKubeConfig) {
  std::map<std::string, std::string> env = {{"HOME", "/home/u"}};
  auto lookup = [&](const std::string& k) -> std::optional<std::string> {
    auto it = env.find(k);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  EXPECT_EQ(UserKubeconfigFile(lookup), fs::path("/home/u/.kube/config"));
  env["KUBECONFIG"] = ":/a/one:/b/two";
  EXPECT_EQ(UserKubeconfigFile(lookup), fs::path("/a/one"));
  env.clear();
  EXPECT_THROW(UserKubeconfigFile(lookup), Error);
}

TEST(MergeKubeconfigFile, RefusesAFileThatIsNotRegularAndLeavesItAlone) {
  testing::ScopedTempDir dir;
  const fs::path file = dir.path() / "config";
  ASSERT_EQ(mkfifo(file.c_str(), 0600), 0);
  const fs::path lock = dir.path() / "locks" / "kubeconfig.lock";
  try {
    MergeKubeconfigFile(file, Ours("demo", 16443), "gpuprov-demo", false, lock);
    FAIL() << "merged into a FIFO";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("kubeconfig '" + file.string() +
                                               "': it is a FIFO (named pipe)"));
  }
  struct stat st {};
  ASSERT_EQ(lstat(file.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

TEST(MergeKubeconfigFile, KeepsABackupWritesAtomicallyAnd0600) {
  testing::ScopedTempDir dir;
  const fs::path file = dir.path() / "kube" / "config";
  const fs::path lock = dir.path() / "locks" / "kubeconfig.lock";
  KubeconfigEdit made = MergeKubeconfigFile(file, Ours("demo", 16443), "gpuprov-demo", false, lock);
  EXPECT_TRUE(made.changed);
  EXPECT_TRUE(made.backup.empty());
  struct stat st {};
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat(file.parent_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  const std::string first = ReadFile(file);
  KubeconfigEdit again = MergeKubeconfigFile(file, Ours("b", 16444), "gpuprov-b", true, lock);
  EXPECT_TRUE(again.changed);
  EXPECT_EQ(ReadFile(again.backup), first);
  ASSERT_EQ(stat(again.backup.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_FALSE(MergeKubeconfigFile(file, Ours("b", 16444), "gpuprov-b", true, lock).changed);
  EXPECT_TRUE(RemoveFromKubeconfigFile(file, "gpuprov-b", lock).changed);
  EXPECT_FALSE(RemoveFromKubeconfigFile(file, "gpuprov-b", lock).changed);
  EXPECT_FALSE(RemoveFromKubeconfigFile(dir.path() / "missing", "gpuprov-b", lock).changed);
  EXPECT_FALSE(fs::exists(dir.path() / "missing"));
  EXPECT_FALSE(fs::exists(file.string() + ".lock"));  // kubectl's lock, released
}

TEST(MergeKubeconfigFile, WaitsForKubectlsLockFileAndNamesIt) {
  testing::ScopedTempDir dir;
  const fs::path file = dir.path() / "config";
  const fs::path lock = dir.path() / "locks" / "kubeconfig.lock";
  WriteFileAtomic(file.string() + ".lock", "", 0600);  // a kubectl writing the file
  try {
    MergeKubeconfigFile(file, Ours("demo", 16443), "gpuprov-demo", false, lock);
    FAIL() << "wrote under kubectl's lock";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("kubectl's lock file " + file.string() + ".lock"));
    EXPECT_THAT(e.hint(), HasSubstr("remove " + file.string() + ".lock"));
  }
  EXPECT_FALSE(fs::exists(file));
  EXPECT_TRUE(fs::exists(file.string() + ".lock"));  // not ours to remove
}

TEST(MergeKubeconfigFile, AFlowStyleFileIsRewrittenWhole0600WithTheOldOneInTheBackup) {
  testing::ScopedTempDir dir;
  const fs::path file = dir.path() / "config";
  const fs::path lock = dir.path() / "locks" / "kubeconfig.lock";
  WriteFileAtomic(file, kFlowFile, 0640);
  const KubeconfigEdit edit =
      MergeKubeconfigFile(file, Ours("demo", 16443), "gpuprov-demo", false, lock);
  EXPECT_TRUE(edit.changed);
  EXPECT_TRUE(edit.reemitted);
  EXPECT_EQ(ReadFile(edit.backup), kFlowFile);
  EXPECT_EQ(testing::ModeOf(file), 0600u);  // group bits dropped: it holds credentials
  EXPECT_EQ(testing::ModeOf(edit.backup), 0600u);
  EXPECT_EQ(YAML::Load(ReadFile(file))["clusters"].size(), 2u);
  // Written by rename: no temporary file is left beside it.
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 3u);  // config, config.gpuprov-backup, locks/
}

/// `kubectl config view --kubeconfig FILE -o jsonpath=PATH`: its stdout, or nullopt with the
/// reason in *problem (no kubectl on PATH, or kubectl refused the file).
std::optional<std::string> KubectlView(const fs::path& file, const std::string& jsonpath,
                                       std::string* problem) {
  Poco::Path kubectl;
  const char* path = std::getenv("PATH");
  if (path == nullptr || !Poco::Path::find(path, "kubectl", kubectl)) {
    *problem = "kubectl is not on PATH";
    return std::nullopt;
  }
  Poco::Pipe out;
  Poco::ProcessHandle child = Poco::Process::launch(
      kubectl.toString(), {"config", "view", "--kubeconfig", file.string(), "-o", "jsonpath=" + jsonpath},
      nullptr, &out, &out);
  Poco::PipeInputStream stream(out);
  std::string text;
  Poco::StreamCopier::copyToString(stream, text);
  if (child.wait() != 0) {
    *problem = "kubectl config view " + file.string() + ": " + text;
    return std::nullopt;
  }
  return text;
}

// The real kubectl reads what each layout became: the user's contexts and gpuprov's, the
// current context, and a quoted number still a string.
TEST(MergeKubeconfigFile, KubectlReadsTheMergedFileOfEveryLayout) {
  std::string problem;
  testing::ScopedTempDir dir;
  const fs::path probe = dir.path() / "probe";
  WriteFileAtomic(probe, "apiVersion: v1\nkind: Config\n", 0600);
  if (!KubectlView(probe, "{.kind}", &problem) && problem == "kubectl is not on PATH") {
    GTEST_SKIP() << problem;
  }
  const std::map<std::string, std::string> layouts = {
      {"block", kUserFile}, {"flow", kFlowFile},
      {"mixed", "apiVersion: v1\nkind: Config\nclusters:\n- name: prod\n  cluster: {server: "
                "'https://prod.example:6443'}\ncontexts: [{name: prod, context: {cluster: prod, "
                "user: admin, namespace: '123'}}]\nusers: []\ncurrent-context: prod\n"},
      {"empty", "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n"}};
  for (const auto& [layout, text] : layouts) {
    SCOPED_TRACE(layout);
    const fs::path file = dir.path() / layout;
    WriteFileAtomic(file, text, 0600);
    const fs::path lock = dir.path() / "locks" / "kubeconfig.lock";
    ASSERT_TRUE(MergeKubeconfigFile(file, Ours("demo", 16443), "gpuprov-demo", false, lock).changed);
    ASSERT_TRUE(MergeKubeconfigFile(file, Ours("b", 16444), "gpuprov-b", true, lock).changed);
    std::optional<std::string> names = KubectlView(file, "{.contexts[*].name}", &problem);
    ASSERT_TRUE(names) << problem;
    std::istringstream words(*names);
    std::vector<std::string> contexts{std::istream_iterator<std::string>(words), {}};
    std::sort(contexts.begin(), contexts.end());
    const std::vector<std::string> want_all = {"gpuprov-b", "gpuprov-demo", "prod"};
    const std::vector<std::string> want_ours = {"gpuprov-b", "gpuprov-demo"};
    EXPECT_EQ(contexts, layout == "empty" ? want_ours : want_all) << ReadFile(file);
    EXPECT_EQ(KubectlView(file, "{.current-context}", &problem).value_or(problem), "gpuprov-b");
    EXPECT_EQ(KubectlView(file, R"({.clusters[?(@.name=="gpuprov-demo")].cluster.server})",
                          &problem)
                  .value_or(problem),
              "https://127.0.0.1:16443");
    if (layout == "flow" || layout == "mixed") {
      EXPECT_EQ(KubectlView(file, R"({.contexts[?(@.name=="prod")].context.namespace})", &problem)
                    .value_or(problem),
                "123");
    }
  }
}

}  // namespace
}  // namespace gpuprov
