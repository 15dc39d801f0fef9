#include "tunnel_command.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "app_context.h"
#include "error.h"
#include "state_store.h"
#include "test_support.h"

namespace gpuprov {
namespace {

TEST(ChooseTunnelPort, FirstPortNoOtherVmHoldsAndNothingListensOn) {
  const auto all_free = [](int) { return true; };
  EXPECT_EQ(ChooseTunnelPort(16443, {}, all_free), 16443);
  EXPECT_EQ(ChooseTunnelPort(16443, {16443, 16444, 16446}, all_free), 16445);
  const auto busy_16445 = [](int port) { return port != 16445; };
  EXPECT_EQ(ChooseTunnelPort(16443, {16443, 16444}, busy_16445), 16446);
  EXPECT_EQ(ChooseTunnelPort(20000, {16443}, all_free), 20000);
}

// What a running tunnel follows after a drop: the record's address now; nothing while the
// record has no address (a replacement under way) or is gone.
TEST(RecordedSshTarget, TheRecordsAddressNowOrNothing) {
  testing::ScopedTempDir home;
  const AppContext app{Paths::ForHome(home.path()), "", false, OutputFormat::kText, nullptr};
  EXPECT_FALSE(RecordedSshTarget(app, "demo"));
  VmRecord record;
  record.name = "demo";
  record.cloud = "verda";
  record.phase = "intent";
  StateStore store(app.paths);
  store.Save(record);
  EXPECT_FALSE(RecordedSshTarget(app, "demo"));
  record.public_ip = "127.90.0.7";
  record.ssh_port = 2222;
  record.ssh_user = "root";
  store.Save(record);
  const std::optional<SshTarget> target = RecordedSshTarget(app, "demo");
  ASSERT_TRUE(target);
  EXPECT_EQ(target->host, "127.90.0.7");
  EXPECT_EQ(target->port, 2222);
  EXPECT_EQ(target->user, "root");
  EXPECT_EQ(target->known_hosts_path, app.paths.known_hosts().string());
}

TEST(ChooseTunnelPort, NoneLeftIsAnErrorNamingTheConfigKey) {
  try {
    ChooseTunnelPort(65534, {65534}, [](int port) { return port != 65535; });
    FAIL() << "found a port";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("from 65534 to 65535"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("tunnel_first_port"), std::string::npos);
  }
}

TEST(RecordedTunnelPort, ReadsTheRecordsPortAndIgnoresGarbage) {
  VmRecord rec;
  EXPECT_EQ(RecordedTunnelPort(rec), std::nullopt);
  rec.extra[kTunnelPortKey] = "16444";
  EXPECT_EQ(RecordedTunnelPort(rec), 16444);
  for (const char* bad : {"", "0", "70000", "12x"}) {
    rec.extra[kTunnelPortKey] = bad;
    EXPECT_EQ(RecordedTunnelPort(rec), std::nullopt) << bad;
  }
}

TEST(LocalPortFree, FalseWhileASocketListensThereTrueAfter) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  EXPECT_FALSE(LocalPortFree(port));
  close(fd);
  EXPECT_TRUE(LocalPortFree(port));
}

}  // namespace
}  // namespace gpuprov
