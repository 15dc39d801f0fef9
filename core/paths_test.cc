#include "paths.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>

#include "error.h"
#include "test_support.h"

namespace gpuprov {
namespace {

using gpuprov::testing::ScopedTempDir;
using gpuprov::testing::ModeOf;

using ::testing::HasSubstr;

EnvLookup MapEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(PathsTest, GpuprovHomeWins) {
  Paths paths(MapEnv({{"GPUPROV_HOME", "/srv/gp"}, {"HOME", "/home/u"}}));
  EXPECT_EQ(paths.home(), "/srv/gp");
  EXPECT_EQ(paths.config_file(), "/srv/gp/config.toml");
  EXPECT_EQ(paths.state_dir(), "/srv/gp/state");
  EXPECT_EQ(paths.kube_dir(), "/srv/gp/kube");
  EXPECT_EQ(paths.keys_dir(), "/srv/gp/keys");
  EXPECT_EQ(paths.known_hosts(), "/srv/gp/known_hosts");
  EXPECT_EQ(paths.user_driver_dir(), "/srv/gp/drivers");
  EXPECT_EQ(paths.lock_dir(), "/srv/gp/locks");
}

TEST(PathsTest, HomeFallsBackToDotGpuProvisioner) {
  Paths paths(MapEnv({{"HOME", "/home/u"}}));
  EXPECT_EQ(paths.home(), "/home/u/.gpu-provisioner");
}

TEST(PathsTest, EmptyGpuprovHomeCountsAsUnset) {
  Paths paths(MapEnv({{"GPUPROV_HOME", ""}, {"HOME", "/home/u"}}));
  EXPECT_EQ(paths.home(), "/home/u/.gpu-provisioner");
}

TEST(PathsTest, RelativeGpuprovHomeIsMadeAbsolute) {
  Paths paths(MapEnv({{"GPUPROV_HOME", "rel/gp/"}}));
  EXPECT_TRUE(paths.home().is_absolute());
  EXPECT_EQ(paths.home(), (std::filesystem::current_path() / "rel/gp/").lexically_normal());
}

TEST(PathsTest, NoHomeAtAllIsAUsageError) {
  try {
    Paths paths(MapEnv({}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
    EXPECT_THAT(e.what(), HasSubstr("GPUPROV_HOME"));
  }
}

TEST(PathsTest, ForHome) { EXPECT_EQ(Paths::ForHome("/a/b").state_dir(), "/a/b/state"); }

TEST(EnsureDirTest, CreatesWithMode0700IncludingParents) {
  ScopedTempDir tmp;
  const mode_t old_umask = ::umask(0);
  const std::filesystem::path dir = tmp.path() / "home" / "state";
  EnsureDir(dir);
  ::umask(old_umask);
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  EXPECT_EQ(ModeOf(dir), 0700u);
  EXPECT_EQ(ModeOf(tmp.path() / "home"), 0700u);
}

TEST(EnsureDirTest, ModeIs0700EvenWithARestrictiveUmask) {
  ScopedTempDir tmp;
  const mode_t old_umask = ::umask(0777);
  EnsureDir(tmp.path() / "d");
  ::umask(old_umask);
  EXPECT_EQ(ModeOf(tmp.path() / "d"), 0700u);
}

TEST(EnsureDirTest, TightensAnExistingOpenDirectory) {
  ScopedTempDir tmp;
  const std::filesystem::path dir = tmp.path() / "open";
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0775), 0);
  EnsureDir(dir);
  EXPECT_EQ(ModeOf(dir), 0700u);
}

TEST(EnsureDirTest, ExistingPrivateDirectoryIsLeftAlone) {
  ScopedTempDir tmp;
  const std::filesystem::path dir = tmp.path() / "private";
  ASSERT_EQ(::mkdir(dir.c_str(), 0500), 0);
  EnsureDir(dir);
  EXPECT_EQ(ModeOf(dir), 0500u);
}

TEST(EnsureDirTest, AFileInTheWayIsAnErrorNamingThePath) {
  ScopedTempDir tmp;
  const std::filesystem::path file = tmp.path() / "file";
  {
    std::FILE* f = std::fopen(file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  try {
    EnsureDir(file);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(file.string()));
    EXPECT_THAT(e.what(), HasSubstr("not a directory"));
  }
}

TEST(EnsureDirTest, StickySharedDirectoryIsNotTightened) {
  ScopedTempDir tmp;
  const std::filesystem::path dir = tmp.path() / "shared";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 01777), 0);
  EXPECT_THROW(EnsureDir(dir), Error);
  EXPECT_EQ(ModeOf(dir), 01777u);
}

}  // namespace
}  // namespace gpuprov
