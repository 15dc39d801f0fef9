// SPDX-License-Identifier: Apache-2.0
#include "tar_writer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace gpuprov::docker {
namespace {

// A temporary folder removed with everything in it.
class ScopedTempDir {
 public:
  ScopedTempDir() {
    char tmpl[] = "/tmp/gpuprov-tar-test.XXXXXX";
    if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~ScopedTempDir() { std::system(("rm -rf -- '" + path_ + "'").c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Runs a shell command; returns its stdout and sets *rc to its exit status.
std::string RunShell(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) throw std::runtime_error("popen failed: " + cmd);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = pclose(p);
  *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

unsigned ModeOf(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

// The line of a `tar -tv` listing that ends with " <path>"; "" when none.
std::string LineFor(const std::string& listing, const std::string& path) {
  std::istringstream lines(listing);
  for (std::string line; std::getline(lines, line);) {
    const std::string tail = " " + path;
    if (line.size() >= tail.size() &&
        line.compare(line.size() - tail.size(), tail.size(), tail) == 0) {
      return line;
    }
  }
  return "";
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary);
  f << data;
}

TEST(TarWriterTest, EmptyArchiveIsTwoZeroBlocks) {
  TarWriter tar(0);
  std::string a = tar.Finish();
  EXPECT_EQ(a.size(), 1024u);
  EXPECT_EQ(a, std::string(1024, '\0'));
}

TEST(TarWriterTest, SizesAreBlockMultiplesAndParentsAreAdded) {
  TarWriter tar(0);
  tar.AddFile("/var/lib/cloud/seed/nocloud/meta-data", "instance-id: x\n");
  // var, var/lib, var/lib/cloud, var/lib/cloud/seed, var/lib/cloud/seed/nocloud, the file
  EXPECT_EQ(tar.entry_count(), 6u);
  EXPECT_EQ(tar.Finish().size() % 512, 0u);
  // header + one data block per entry... directories have no data.
  EXPECT_EQ(tar.Finish().size(), 6 * 512u + 512u + 1024u);
}

TEST(TarWriterTest, ListsWithTarAndRoundTrips) {
  ScopedTempDir dir;
  TarWriter tar;
  const std::string meta = "instance-id: gpuprov-a-1234\nlocal-hostname: a\n";
  const std::string user = "#!/bin/bash\necho hi\n";
  std::string binary;
  for (int i = 0; i < 1500; ++i) binary += static_cast<char>(i % 256);
  const std::string long_dir =
      "deep/" + std::string(50, 'd') + "/" + std::string(50, 'e') + "/" + std::string(40, 'f');
  tar.AddFile("/var/lib/cloud/seed/nocloud/meta-data", meta, 0644);
  tar.AddFile("var/lib/cloud/seed/nocloud/user-data", user, 0600);
  tar.AddFile("./etc/gpuprov-testvm/gpu", "L4:1\n", 0644);
  tar.AddFile("bin/blob", binary, 0755);
  tar.AddFile(long_dir + "/" + std::string(90, 'n'), "long", 0640);
  tar.AddFile("empty", "", 0644);
  tar.AddDirectory("var/empty-dir", 0700);
  WriteFile(dir.path() + "/a.tar", tar.Finish());

  int rc = 0;
  std::string listing = RunShell("tar -tvf '" + dir.path() + "/a.tar' 2>&1", &rc);
  ASSERT_EQ(rc, 0) << listing;
  EXPECT_EQ(LineFor(listing, "var/lib/cloud/seed/nocloud/meta-data").substr(0, 20),
            "-rw-r--r-- root/root");
  EXPECT_NE(LineFor(listing, "var/lib/cloud/seed/nocloud/meta-data").find(" 46 "),
            std::string::npos);
  EXPECT_EQ(LineFor(listing, "var/lib/cloud/seed/nocloud/user-data").substr(0, 20),
            "-rw------- root/root");
  EXPECT_EQ(LineFor(listing, "var/lib/cloud/seed/nocloud/").substr(0, 20), "drwxr-xr-x root/root");
  EXPECT_EQ(LineFor(listing, "var/").substr(0, 20), "drwxr-xr-x root/root");
  EXPECT_EQ(LineFor(listing, "bin/blob").substr(0, 20), "-rwxr-xr-x root/root");
  EXPECT_EQ(LineFor(listing, "var/empty-dir/").substr(0, 20), "drwx------ root/root");
  EXPECT_NE(LineFor(listing, long_dir + "/" + std::string(90, 'n')), "");

  std::string out = dir.path() + "/out";
  mkdir(out.c_str(), 0755);
  std::string err = RunShell("tar -xf '" + dir.path() + "/a.tar' -C '" + out + "' 2>&1", &rc);
  ASSERT_EQ(rc, 0) << err;
  EXPECT_EQ(ReadFile(out + "/var/lib/cloud/seed/nocloud/meta-data"), meta);
  EXPECT_EQ(ReadFile(out + "/var/lib/cloud/seed/nocloud/user-data"), user);
  EXPECT_EQ(ReadFile(out + "/etc/gpuprov-testvm/gpu"), "L4:1\n");
  EXPECT_EQ(ReadFile(out + "/bin/blob"), binary);
  EXPECT_EQ(ReadFile(out + "/" + long_dir + "/" + std::string(90, 'n')), "long");
  EXPECT_EQ(ReadFile(out + "/empty"), "");
  EXPECT_EQ(ModeOf(out + "/var/lib/cloud/seed/nocloud/user-data"), 0600u);
  EXPECT_EQ(ModeOf(out + "/bin/blob"), 0755u);
  EXPECT_EQ(ModeOf(out + "/var/lib/cloud/seed/nocloud"), 0755u);
  EXPECT_EQ(ModeOf(out + "/var/empty-dir"), 0700u);
}

TEST(TarWriterTest, GnuTarSeesAValidUstarHeader) {
  ScopedTempDir dir;
  TarWriter tar(1700000000);
  tar.AddFile("a/b", "x");
  WriteFile(dir.path() + "/a.tar", tar.Finish());
  int rc = 0;
  // --format=ustar makes GNU tar check the magic; a bad checksum fails any listing.
  std::string listing =
      RunShell("tar --format=ustar --full-time -tvf '" + dir.path() + "/a.tar' 2>&1", &rc);
  ASSERT_EQ(rc, 0) << listing;
  EXPECT_NE(listing.find("2023-11-14"), std::string::npos) << listing;
}

TEST(TarWriterTest, RefusesBadPaths) {
  TarWriter tar;
  EXPECT_THROW(tar.AddFile("", "x"), std::invalid_argument);
  EXPECT_THROW(tar.AddFile("/", "x"), std::invalid_argument);
  EXPECT_THROW(tar.AddFile("a/../b", "x"), std::invalid_argument);
  EXPECT_THROW(tar.AddFile("a/./b", "x"), std::invalid_argument);
  EXPECT_THROW(tar.AddFile(std::string(101, 'x'), "x"), std::invalid_argument);
  EXPECT_THROW(tar.AddFile(std::string(200, 'x') + "/" + std::string(20, 'y'), "x"),
               std::invalid_argument);
  tar.AddFile("a/b", "x");
  EXPECT_THROW(tar.AddFile("a/b", "y"), std::invalid_argument);
  EXPECT_THROW(tar.AddFile("a", "y"), std::invalid_argument);  // a is a directory
  EXPECT_THROW(tar.AddDirectory("a/b"), std::invalid_argument);
  tar.AddDirectory("a");  // already there: no second entry
  EXPECT_EQ(tar.entry_count(), 2u);
}

}  // namespace
}  // namespace gpuprov::docker
