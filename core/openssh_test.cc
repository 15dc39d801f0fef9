#include "openssh.h"

#include <gtest/gtest.h>

#include "error.h"

namespace gpuprov {
namespace {

TEST(RemoteCommandLine, JoinsWordsWithSpacesUnquotedAsOpenSshDoes) {
  EXPECT_EQ(RemoteCommandLine({"exit 7"}), "exit 7");
  EXPECT_EQ(RemoteCommandLine({"nvidia-smi | head"}), "nvidia-smi | head");
  EXPECT_EQ(RemoteCommandLine({"echo", "a b", "$HOME"}), "echo a b $HOME");
  EXPECT_EQ(RemoteCommandLine({}), "");
}

TEST(ParseLocalForward, ReadsThreeFields) {
  const LocalForward f = ParseLocalForward("8888:localhost:8888");
  EXPECT_EQ(f.bind_address, "");
  EXPECT_EQ(f.port, 8888);
  EXPECT_EQ(f.host, "localhost");
  EXPECT_EQ(f.host_port, 8888);
  EXPECT_EQ(f.ToSpec(), "8888:localhost:8888");
}

TEST(ParseLocalForward, ReadsABindAddressAndBracketedIpv6) {
  const LocalForward f = ParseLocalForward("127.0.0.1:9000:[::1]:80");
  EXPECT_EQ(f.bind_address, "127.0.0.1");
  EXPECT_EQ(f.port, 9000);
  EXPECT_EQ(f.host, "[::1]");
  EXPECT_EQ(f.host_port, 80);
  EXPECT_EQ(f.ToSpec(), "127.0.0.1:9000:[::1]:80");
}

TEST(ParseLocalForward, RefusesBadSpecsNamingMinusLWithExitCode2) {
  for (const char* bad : {"8888", "8888:localhost", "0:h:1", "8888:h:70000", "x:h:1", "1:h:+2",
                          "1::2", "1:h;rm:2", "a:b:c:d:e", "1:[::1:2"}) {
    try {
      ParseLocalForward(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), kExitUsage) << bad;
      EXPECT_NE(std::string(e.what()).find("-L '"), std::string::npos) << e.what();
      EXPECT_NE(e.hint().find("[BIND:]PORT:HOST:HOSTPORT"), std::string::npos);
    }
  }
}

SshTarget Target() {
  return SshTarget{"127.0.0.5", 2222, "ubuntu", "/home/u/.gpu-provisioner/keys/id_ed25519",
                   "/home/u/.gpu-provisioner/known_hosts"};
}

TEST(OpenSshArgv, PinsTheHostKeyAndPassesForwardsAndTheJoinedCommand) {
  const std::vector<std::string> argv =
      OpenSshArgv(Target(), {ParseLocalForward("8888:localhost:8000")}, false, "exit 7");
  const std::vector<std::string> want = {"ssh",
                                         "-i",
                                         "/home/u/.gpu-provisioner/keys/id_ed25519",
                                         "-p",
                                         "2222",
                                         "-o",
                                         "IdentitiesOnly=yes",
                                         "-o",
                                         "UserKnownHostsFile=/home/u/.gpu-provisioner/known_hosts",
                                         "-o",
                                         "GlobalKnownHostsFile=/dev/null",
                                         "-o",
                                         "StrictHostKeyChecking=yes",
                                         "-o",
                                         "LogLevel=ERROR",
                                         "-L",
                                         "8888:localhost:8000",
                                         "-o",
                                         "ExitOnForwardFailure=yes",
                                         "ubuntu@127.0.0.5",
                                         "--",
                                         "exit 7"};
  EXPECT_EQ(argv, want);
}

TEST(OpenSshArgv, AShellHasNoCommandAndForwardOnlyHasMinusN) {
  std::vector<std::string> shell = OpenSshArgv(Target(), {}, false, "");
  EXPECT_EQ(shell.back(), "ubuntu@127.0.0.5");
  std::vector<std::string> forward_only =
      OpenSshArgv(Target(), {ParseLocalForward("1:h:2")}, true, "");
  EXPECT_EQ(forward_only[forward_only.size() - 2], "-N");
}

TEST(SshConfigBlock, NamesEveryFieldAndThePinnedKnownHosts) {
  EXPECT_EQ(SshConfigBlock(SshHostAlias("demo"), Target()),
            "Host gpuprov-demo\n"
            "  HostName 127.0.0.5\n"
            "  Port 2222\n"
            "  User ubuntu\n"
            "  IdentityFile /home/u/.gpu-provisioner/keys/id_ed25519\n"
            "  IdentitiesOnly yes\n"
            "  UserKnownHostsFile /home/u/.gpu-provisioner/known_hosts\n"
            "  GlobalKnownHostsFile /dev/null\n"
            "  StrictHostKeyChecking yes\n");
}

TEST(SshConfigBlock, QuotesPathsWithSpacesAndRefusesQuotes) {
  SshTarget t = Target();
  t.private_key_path = "/home/u/my keys/id";
  EXPECT_NE(SshConfigBlock("gpuprov-a", t).find("  IdentityFile \"/home/u/my keys/id\"\n"),
            std::string::npos);
  t.known_hosts_path = "/tmp/a\"b";
  EXPECT_THROW(SshConfigBlock("gpuprov-a", t), Error);
}

}  // namespace
}  // namespace gpuprov
