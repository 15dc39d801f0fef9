#include "kubeconfig_merge.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <map>

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

TEST(MergeKubeconfigText, RefusesWhatItCannotEditAsTextNamingTheFile) {
  const std::string flow =
      "apiVersion: v1\nclusters: [{name: x, cluster: {server: 'https://x'}}]\nkind: Config\n";
  try {
    MergeKubeconfigText(flow, Ours("demo", 16443), "gpuprov-demo", false, "/home/u/.kube/config");
    FAIL() << "accepted a flow list";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("/home/u/.kube/config"));
    EXPECT_THAT(e.what(), HasSubstr("flow-style"));
  }
  EXPECT_THROW(MergeKubeconfigText("- a\n- b\n", Ours("d", 1), "gpuprov-d", false, "f"), Error);
  EXPECT_THROW(MergeKubeconfigText("a: [\n", Ours("d", 1), "gpuprov-d", false, "f"), Error);
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

}  // namespace
}  // namespace gpuprov
