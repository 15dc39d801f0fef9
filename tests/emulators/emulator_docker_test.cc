// SPDX-License-Identifier: Apache-2.0
//
// The docker backend: droplets and pods are real test VM containers. Checks
// through docker exec that cloud-init ran the user data, that the SSH key from
// the API reached /root/.ssh/authorized_keys, the GPU file, the boot-script
// and late-GPU faults, the remapped SSH port of Prime Intellect pods, that a
// port answers on the instance's address exactly while the cloud's firewall
// allows it (real TCP connects), and that deleting (and stopping the emulator)
// removes the containers; SSH refused during the SSH delay (flag and fault) while the boot
// script runs.
// Skipped when Docker or the test image is not there.
#include <gtest/gtest.h>

#include <Poco/Net/NetException.h>
#include <Poco/Net/SocketAddress.h>
#include <Poco/Net/StreamSocket.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "docker_backend_fixture.h"

namespace gpuprov::emulator {
namespace {

using testing::Call;
using testing::DockerBackendTest;
using testing::ReachablePorts;
using testing::Reply;
using testing::WaitFor;
using namespace std::chrono_literals;

constexpr const char* kToken = "dop_v1_docker_test";
constexpr const char* kPiKey = "pit_docker_test";
constexpr const char* kPublicKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPtlieUdwvU3Yi8XHX36t5VZpca1by3GqjV+S0aD87Tm emu-test";

// What a TCP server at ip:port sends first (up to 64 bytes within 5 s); "" when the
// connection is refused, reset or silent.
std::string Greeting(const std::string& ip, int port) {
  try {
    Poco::Net::StreamSocket s;
    s.connect(Poco::Net::SocketAddress(ip, static_cast<uint16_t>(port)), Poco::Timespan(5, 0));
    s.setReceiveTimeout(Poco::Timespan(5, 0));
    char buf[64];
    int n = s.receiveBytes(buf, sizeof buf);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  } catch (const Poco::Exception&) {
    return "";
  }
}

class EmulatorDockerTest : public DockerBackendTest {
 protected:
  void SetUp() override {
    EmulatorOptions o;
    o.tokens["digitalocean"] = {kToken};
    o.tokens["primeintellect"] = {kPiKey};
    StartDockerEmulator(o);
    if (IsSkipped()) return;
    do_ = emu_->BaseUrl("digitalocean");
    pi_ = emu_->BaseUrl("primeintellect");
  }

  Reply Do(const std::string& method, const std::string& path, const std::string& body = "") {
    return Call(do_, method, path, body, kToken);
  }

  // A droplet in nyc2; in the VPC vpc_uuid with tags when given.
  int64_t CreateDroplet(const std::string& name, const std::string& size,
                        const std::string& user_data, int64_t key_id,
                        const std::string& vpc_uuid = "",
                        const std::vector<std::string>& tags = {}) {
    Poco::JSON::Object body;
    body.set("name", name);
    body.set("region", "nyc2");
    body.set("size", size);
    body.set("image", "gpu-h100x1-base");
    body.set("user_data", user_data);
    Poco::JSON::Array::Ptr keys = new Poco::JSON::Array;
    keys->add(key_id);
    body.set("ssh_keys", keys);
    if (!vpc_uuid.empty()) body.set("vpc_uuid", vpc_uuid);
    if (!tags.empty()) {
      Poco::JSON::Array::Ptr t = new Poco::JSON::Array;
      for (const auto& tag : tags) t->add(tag);
      body.set("tags", t);
    }
    std::ostringstream s;
    body.stringify(s);
    Reply r = Do("POST", "/droplets", s.str());
    EXPECT_EQ(r.status, 202) << r.body;
    return GetObject(r.Json(), "droplet")->getValue<int64_t>("id");
  }

  // The droplet's public address once it is active ("" if it never is within 60 s).
  std::string ActiveIp(int64_t id) {
    std::string ip;
    WaitFor(
        [&] {
          JsonObject d = GetObject(Do("GET", "/droplets/" + std::to_string(id)).Json(), "droplet");
          if (!d || d->getValue<std::string>("status") != "active") return false;
          JsonArray v4 = GetArray(GetObject(d, "networks"), "v4");
          for (unsigned i = 0; i < v4->size(); ++i) {
            if (v4->getObject(i)->getValue<std::string>("type") == "public") {
              ip = v4->getObject(i)->getValue<std::string>("ip_address");
            }
          }
          return !ip.empty();
        },
        60s);
    return ip;
  }

  int64_t AddKey() {
    Reply k = Do("POST", "/account/keys",
                 R"({"name":"t","public_key":")" + std::string(kPublicKey) + "\"}");
    EXPECT_EQ(k.status, 201) << k.body;
    return GetObject(k.Json(), "ssh_key")->getValue<int64_t>("id");
  }

  // Registers the test key (unless register_key is false: a pod made before did) and creates a
  // one-L40S Prime Intellect pod NAME; *conn is its sshConnection ("root@ADDRESS -p PORT") once
  // the API reports one.
  void CreatePod(const std::string& name, std::string* conn, bool register_key = true) {
    if (register_key) {
      Reply k = Call(pi_, "POST", "/ssh_keys/",
                     R"({"name":"t","publicKey":")" + std::string(kPublicKey) + "\"}", kPiKey);
      ASSERT_EQ(k.status, 200);
    }
    Reply c = Call(pi_, "POST", "/pods/",
                   R"({"pod":{"name":")" + name +
                       R"(","cloudId":"1L40S.20V","gpuType":"L40S_48GB","gpuCount":1,"socket":"PCIe"},"provider":{"type":"datacrunch"}})",
                   kPiKey);
    ASSERT_EQ(c.status, 200) << c.body;
    const std::string id = c.Json()->getValue<std::string>("id");
    pod_ids_[name] = id;
    ASSERT_TRUE(WaitFor(
        [&] {
          JsonObject p = Call(pi_, "GET", "/pods/" + id, "", kPiKey).Json();
          auto s = GetString(p, "sshConnection");
          if (auto a = GetArray(p, "sshConnection"); a && a->size() && !a->isNull(0)) {
            s = a->getElement<std::string>(0);
          }
          if (!s) return false;
          *conn = *s;
          return true;
        },
        60s));
  }

  // Sets in container cid a node firewall as gpuprov's installer writes one (nft, table inet
  // emu_test, prerouting): loopback, answers and SSH pass, then the rule lines `accepts`; the
  // rest is dropped.
  docker::ExecResult NodeFirewall(const std::string& cid, const std::string& accepts = "") {
    return Exec(cid,
                "nft -f - <<'EOF'\n"
                "table inet emu_test {\n"
                "  chain inbound {\n"
                "    type filter hook prerouting priority mangle; policy accept;\n"
                "    iif lo accept\n"
                "    ct state established,related accept\n"
                "    tcp dport 22 accept\n" +
                    accepts +
                    "    drop\n"
                    "  }\n"
                    "}\n"
                    "EOF\n");
  }

  std::string do_, pi_;
  std::map<std::string, std::string> pod_ids_;  // CreatePod's pods: name -> id
};

// The address of an sshConnection ("root@ADDRESS -p PORT").
std::string AddressOf(const std::string& conn) {
  const size_t at = conn.find('@'), p = conn.find(" -p ");
  return at == std::string::npos || p == std::string::npos ? "" : conn.substr(at + 1, p - at - 1);
}

TEST_F(EmulatorDockerTest, DropletRunsItsUserDataAndGetsTheKeyAndGpu) {
  int64_t key = AddKey();
  int64_t id = CreateDroplet("emu-docker-vm", "gpu-h100x1-80gb",
                             "#!/bin/bash\necho ran-by-cloud-init > /root/emulator-user-data\n", key);
  const std::string ip = ActiveIp(id);
  ASSERT_FALSE(ip.empty()) << "the droplet never became active with a public address";
  EXPECT_EQ(ip.rfind("127.90.", 0), 0u) << ip;
  std::string cid = ContainerOf("digitalocean", "emu-docker-vm");
  ASSERT_FALSE(cid.empty());
  // Nothing is published by Docker; the port gate forwards. No firewall yet: every port.
  auto info = engine_.InspectContainer(cid);
  ASSERT_TRUE(info);
  EXPECT_TRUE(info->port_bindings.empty());
  EXPECT_EQ(ReachablePorts(control_, "digitalocean", "emu-docker-vm"), "1-65535");
  EXPECT_TRUE(WaitFor([&] { return Greeting(ip, 22).rfind("SSH-2.0-", 0) == 0; }, 60s))
      << "SSH does not answer on " << ip << ":22";

  std::string status = WaitCloudInit(cid);
  EXPECT_NE(status.find("status: done"), std::string::npos) << status;
  EXPECT_EQ(Exec(cid, "cat /root/emulator-user-data").out, "ran-by-cloud-init\n");
  EXPECT_NE(Exec(cid, "cat /root/.ssh/authorized_keys").out.find(kPublicKey), std::string::npos);
  EXPECT_EQ(Exec(cid, "cat /etc/gpuprov-testvm/gpu").out, "H100-80GB:1\n");

  // A server on 8080 in the VM: reachable while the droplet is in no firewall (found by
  // the backend's listening-port scan), refused once a firewall without 8080 is attached,
  // reachable when a rule opens it, refused again when the rule goes.
  Exec(cid,
       "setsid python3 -c \"import socket\n"
       "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
       "s.bind(('0.0.0.0', 8080)); s.listen(8)\n"
       "while True:\n  c, _ = s.accept(); c.sendall(b'gate-ok'); c.close()\n\" "
       ">/dev/null 2>&1 < /dev/null &");
  EXPECT_TRUE(WaitFor([&] { return Greeting(ip, 8080) == "gate-ok"; }, 20s));
  Reply fw = Do("POST", "/firewalls",
                R"({"name":"emu-docker-fw","inbound_rules":[{"protocol":"tcp","ports":"22",)"
                R"("sources":{"addresses":["0.0.0.0/0"]}}],"droplet_ids":[)" +
                    std::to_string(id) + "]}");
  ASSERT_EQ(fw.status, 202) << fw.body;
  const std::string fw_id = GetObject(fw.Json(), "firewall")->getValue<std::string>("id");
  EXPECT_EQ(Greeting(ip, 8080), "");
  EXPECT_EQ(Greeting(ip, 22).rfind("SSH-2.0-", 0), 0u);
  const std::string rule =
      R"({"inbound_rules":[{"protocol":"tcp","ports":"8080","sources":{"addresses":["0.0.0.0/0"]}}]})";
  ASSERT_EQ(Do("POST", "/firewalls/" + fw_id + "/rules", rule).status, 204);
  EXPECT_EQ(Greeting(ip, 8080), "gate-ok");
  ASSERT_EQ(Do("DELETE", "/firewalls/" + fw_id + "/rules", rule).status, 204);
  EXPECT_EQ(Greeting(ip, 8080), "");

  EXPECT_EQ(Do("DELETE", "/droplets/" + std::to_string(id)).status, 204);
  EXPECT_TRUE(WaitFor([&] { return !engine_.InspectContainer(cid); }, 60s));
  EXPECT_EQ(Call(control_, "GET", "/counts").Json()->getValue<int>("backend_instances"), 0);
}

// The emulator with --ssh-delay-seconds 20.
class EmulatorDockerSshDelayTest : public EmulatorDockerTest {
 protected:
  void SetUp() override {
    EmulatorOptions o;
    o.tokens["digitalocean"] = {kToken};
    o.ssh_delay_seconds = 20;
    StartDockerEmulator(o);
    if (IsSkipped()) return;
    do_ = emu_->BaseUrl("digitalocean");
  }

  // The control API's instance row of the droplet called name.
  JsonObject Row(const std::string& name) {
    JsonArray rows = GetArray(Call(control_, "GET", "/instances?cloud=digitalocean").Json(),
                              "instances");
    for (unsigned i = 0; i < rows->size(); ++i) {
      if (rows->getObject(i)->getValue<std::string>("name") == name) return rows->getObject(i);
    }
    return nullptr;
  }
};

TEST_F(EmulatorDockerSshDelayTest, SshIsRefusedUntilTheDelayWhileTheBootScriptRuns) {
  int64_t key = AddKey();
  // The flag's delay; then a fault of 0 s for the next create overrides it.
  int64_t late = CreateDroplet("emu-ssh-late", "s-1vcpu-1gb",
                               "#!/bin/bash\necho booted > /root/boot-ran\n", key);
  ASSERT_EQ(Call(control_, "POST", "/faults",
                 R"({"cloud":"digitalocean","fault":"ssh_delay","seconds":0})")
                .status,
            200);
  int64_t now = CreateDroplet("emu-ssh-now", "s-1vcpu-1gb", "", key);
  const std::string late_ip = ActiveIp(late);
  const auto active = std::chrono::steady_clock::now();
  const std::string now_ip = ActiveIp(now);
  ASSERT_FALSE(late_ip.empty());
  ASSERT_FALSE(now_ip.empty());
  EXPECT_TRUE(WaitFor([&] { return Greeting(now_ip, 22).rfind("SSH-2.0-", 0) == 0; }, 60s));
  // The late droplet is running and its boot script has run, but SSH is refused.
  const std::string cid = ContainerOf("digitalocean", "emu-ssh-late");
  ASSERT_FALSE(cid.empty());
  EXPECT_TRUE(WaitFor([&] { return Exec(cid, "cat /root/boot-ran 2>/dev/null").out == "booted\n"; },
                      60s));
  JsonObject row = Row("emu-ssh-late");
  ASSERT_TRUE(row);
  EXPECT_FALSE(row->getValue<bool>("ssh_open"));
  EXPECT_EQ(row->getValue<std::string>("reachable_ports"), "1-21,23-65535");
  EXPECT_EQ(Greeting(late_ip, 22), "");
  EXPECT_TRUE(Row("emu-ssh-now")->getValue<bool>("ssh_open"));
  // Then it answers, about 20 s after it was running.
  EXPECT_TRUE(WaitFor([&] { return Greeting(late_ip, 22).rfind("SSH-2.0-", 0) == 0; }, 60s));
  EXPECT_GE(std::chrono::steady_clock::now() - active, 15s);
  EXPECT_TRUE(Row("emu-ssh-late")->getValue<bool>("ssh_open"));
  EXPECT_EQ(Row("emu-ssh-late")->getValue<std::string>("reachable_ports"), "1-65535");
}

TEST_F(EmulatorDockerTest, BootScriptFailsAndGpuAppearsLater) {
  ASSERT_EQ(Call(control_, "POST", "/faults",
                 R"({"cloud":"digitalocean","fault":"boot_script_fails"})")
                .status,
            200);
  ASSERT_EQ(Call(control_, "POST", "/faults",
                 R"({"cloud":"digitalocean","fault":"gpu_after_boot","seconds":20})")
                .status,
            200);
  int64_t key = AddKey();
  CreateDroplet("emu-docker-fail", "gpu-l40sx1-48gb", "#!/bin/bash\ntouch /root/first-part\n", key);
  std::string cid;
  ASSERT_TRUE(WaitFor([&] { return !(cid = ContainerOf("digitalocean", "emu-docker-fail")).empty(); },
                      30s));
  std::string status = WaitCloudInit(cid);
  EXPECT_NE(status.find("status: error"), std::string::npos) << status;
  // The injected failure stops the script at its first line: nothing of it ran.
  EXPECT_EQ(Exec(cid, "test -f /root/first-part || echo absent").out, "absent\n");
  // The GPU file appears 20 s after the container started; cloud-init took less here
  // unless the machine is very loaded, so only require it to show up eventually.
  EXPECT_TRUE(WaitFor(
      [&] { return Exec(cid, "cat /etc/gpuprov-testvm/gpu 2>/dev/null").out == "L40S:1\n"; },
      60s));
}

TEST_F(EmulatorDockerTest, PrimeIntellectPodPublishesSshOnARemappedPort) {
  std::string conn;
  ASSERT_NO_FATAL_FAILURE(CreatePod("emu-docker-pod", &conn));
  // root@127.90.x.y -p N with N != 22, and SSH answers exactly there.
  const size_t at = conn.find('@'), p = conn.find(" -p ");
  ASSERT_NE(p, std::string::npos) << conn;
  const std::string ip = conn.substr(at + 1, p - at - 1);
  const std::string port = conn.substr(p + 4);
  EXPECT_NE(port, "22");
  std::string cid = ContainerOf("primeintellect", "emu-docker-pod");
  auto info = engine_.InspectContainer(cid);
  ASSERT_TRUE(info);
  EXPECT_TRUE(WaitFor([&] { return Greeting(ip, std::stoi(port)).rfind("SSH-2.0-", 0) == 0; },
                      60s))
      << conn;
  EXPECT_EQ(Greeting(ip, 22), "") << "SSH is remapped, not on 22";
  // Stopping the emulator removes its containers.
  emu_.reset();
  EXPECT_FALSE(engine_.InspectContainer(cid));
}

// Prime Intellect has no firewall API (every port allowed, PortSet::All()): whatever the node
// listens on is reachable at its address, as on the real cloud, so only the node's own firewall
// can close the Kubernetes ports. The gate delivers through the container's network namespace,
// so rules there (as gpuprov's installer writes them on tunnel-access clouds) do close them.
TEST_F(EmulatorDockerTest, PrimeIntellectForwardsEveryListeningPortUntilTheNodeFirewallDropsIt) {
  std::string conn;
  ASSERT_NO_FATAL_FAILURE(CreatePod("emu-docker-open", &conn));
  const size_t at = conn.find('@'), p = conn.find(" -p ");
  ASSERT_NE(p, std::string::npos) << conn;
  const std::string ip = conn.substr(at + 1, p - at - 1);
  const int ssh_port = std::stoi(conn.substr(p + 4));
  EXPECT_EQ(ReachablePorts(control_, "primeintellect", "emu-docker-open"), "1-65535");
  ASSERT_TRUE(WaitFor([&] { return Greeting(ip, ssh_port).rfind("SSH-2.0-", 0) == 0; }, 60s));
  const std::string cid = ContainerOf("primeintellect", "emu-docker-open");
  ASSERT_FALSE(cid.empty());

  // k3s's API, its ingress and the kubelet, listening on the node's address (not the wildcard:
  // the test VM's metadata fixture holds 169.254.169.254:80).
  Exec(cid,
       "a=$(ip -4 -o addr show dev eth0 | awk '{ sub(\"/.*\", \"\", $4); print $4 }'); "
       "setsid python3 -c \"import socket, sys, threading\n"
       "def serve(p):\n"
       "  s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
       "  s.bind((sys.argv[1], p)); s.listen(8)\n"
       "  while True:\n    c, _ = s.accept(); c.sendall(b'port-%d' % p); c.close()\n"
       "for p in (6443, 80, 443, 10250):\n  threading.Thread(target=serve, args=(p,)).start()\n\" "
       "\"$a\" >/dev/null 2>&1 < /dev/null &");
  for (int port : {6443, 80, 443, 10250}) {
    EXPECT_TRUE(WaitFor([&] { return Greeting(ip, port) == "port-" + std::to_string(port); }, 30s))
        << ip << ":" << port << " is not reachable although the node listens there and the cloud "
        << "has no firewall";
  }

  // The node drops new inbound connections but SSH: the same ports go silent, SSH still answers.
  const auto nft = NodeFirewall(cid);
  ASSERT_EQ(nft.exit_code, 0) << nft.out << nft.err;
  for (int port : {6443, 80, 443, 10250}) {
    EXPECT_EQ(Greeting(ip, port), "") << ip << ":" << port << " passes the node's firewall";
  }
  EXPECT_EQ(Greeting(ip, ssh_port).rfind("SSH-2.0-", 0), 0u);
  EXPECT_EQ(Exec(cid, "python3 -c \"import socket, sys; s = socket.create_connection((sys.argv[1], "
                      "6443)); print(s.recv(16).decode())\" $(ip -4 -o addr show dev eth0 | awk "
                      "'{ sub(\"/.*\", \"\", $4); print $4 }')")
                .out,
            "port-6443\n")
      << "the node reaches its own address (over lo)";
}

// Issue 33's test world: droplets of one VPC are test VMs on one Docker network, each with its
// own private address there, and the cloud firewall between them is enforced on that network
// (nft in each container's network namespace, set from outside it): a firewall applied to the
// cluster's tag with rules whose sources are that tag lets the cluster's droplets reach each
// other on exactly its ports; a droplet of the same VPC without the tag reaches none of them.
TEST_F(EmulatorDockerTest, DigitalOceanPeersReachEachOtherOnlyOnTheirFirewallsPorts) {
  const int64_t key = AddKey();
  Reply v = Do("POST", "/vpcs", R"({"name":"gpuprov-emu-train","region":"nyc2"})");
  ASSERT_EQ(v.status, 201) << v.body;
  const std::string vpc = GetObject(v.Json(), "vpc")->getValue<std::string>("id");
  auto create = [&](const std::string& name, bool member) {
    return CreateDroplet(name, "s-1vcpu-1gb", "", key, vpc,
                         member ? std::vector<std::string>{"gpuprov-cluster:emu-train"}
                                : std::vector<std::string>{});
  };
  const int64_t server = create("emu-train", true);
  const int64_t agent = create("emu-train-agent-1", true);
  const int64_t stranger = create("emu-stranger", false);
  Reply fw = Do("POST", "/firewalls", R"({"name":"gpuprov-emu-train-peers",
      "inbound_rules":[
        {"protocol":"tcp","ports":"6443","sources":{"tags":["gpuprov-cluster:emu-train"]}},
        {"protocol":"tcp","ports":"10250","sources":{"tags":["gpuprov-cluster:emu-train"]}},
        {"protocol":"udp","ports":"51820","sources":{"tags":["gpuprov-cluster:emu-train"]}}],
      "outbound_rules":[{"protocol":"tcp","ports":"all","destinations":{"addresses":["0.0.0.0/0"]}},
                        {"protocol":"udp","ports":"all","destinations":{"addresses":["0.0.0.0/0"]}}],
      "tags":["gpuprov-cluster:emu-train"]})");
  ASSERT_EQ(fw.status, 202) << fw.body;
  for (int64_t id : {server, agent, stranger}) ASSERT_FALSE(ActiveIp(id).empty()) << id;

  auto private_ip = [&](int64_t id) {
    JsonObject d = GetObject(Do("GET", "/droplets/" + std::to_string(id)).Json(), "droplet");
    JsonArray v4 = GetArray(GetObject(d, "networks"), "v4");
    for (unsigned i = 0; i < v4->size(); ++i) {
      if (v4->getObject(i)->getValue<std::string>("type") == "private") {
        return v4->getObject(i)->getValue<std::string>("ip_address");
      }
    }
    return std::string();
  };
  const std::string server_ip = private_ip(server);
  const std::string agent_ip = private_ip(agent);
  ASSERT_EQ(server_ip.rfind("10.", 0), 0u) << server_ip;
  ASSERT_NE(server_ip, agent_ip);

  // The server listens on the peer ports and on one the firewall does not open.
  const std::string server_cid = ContainerOf("digitalocean", "emu-train");
  const std::string agent_cid = ContainerOf("digitalocean", "emu-train-agent-1");
  const std::string stranger_cid = ContainerOf("digitalocean", "emu-stranger");
  ASSERT_FALSE(server_cid.empty() || agent_cid.empty() || stranger_cid.empty());
  ServePorts(server_cid, {6443, 10250, 8080}, {51820});
  auto probe = [&](const std::string& cid, const std::string& protocol, int port) {
    return Probe(cid, server_ip, protocol, port);
  };
  // A request lets the emulator see both peers running and set their rules.
  ASSERT_TRUE(WaitFor(
      [&] {
        Do("GET", "/droplets");
        return probe(agent_cid, "tcp", 6443) == "port-6443\n";
      },
      30s))
      << "the agent does not reach the server's 6443 on " << server_ip;
  EXPECT_EQ(probe(agent_cid, "tcp", 10250), "port-10250\n");
  EXPECT_EQ(probe(agent_cid, "udp", 51820), "port-51820\n");
  EXPECT_EQ(probe(agent_cid, "tcp", 8080), "") << "a port the firewall does not open";
  for (const char* protocol : {"tcp", "udp"}) {
    const int port = std::string(protocol) == "tcp" ? 6443 : 51820;
    EXPECT_EQ(probe(stranger_cid, protocol, port), "")
        << "a droplet without the cluster tag reaches " << protocol << " " << port;
  }
}

// Issue 33's test world for a cloud with no private network: Prime Intellect's pods reach each
// other at their public addresses (127.90.x.y here, which inside a test VM would be its own
// loopback) on every port, as across the internet, and see each other's public address as the
// source, so the node firewall gpuprov's installer writes (peers by public address) is what
// filters. A pod deleted is no longer routed to.
TEST_F(EmulatorDockerTest, PrimeIntellectPodsReachEachOtherAtTheirPublicAddresses) {
  std::string server_conn, agent_conn, stranger_conn;
  ASSERT_NO_FATAL_FAILURE(CreatePod("emu-pub-server", &server_conn));
  ASSERT_NO_FATAL_FAILURE(CreatePod("emu-pub-agent", &agent_conn, false));
  ASSERT_NO_FATAL_FAILURE(CreatePod("emu-pub-stranger", &stranger_conn, false));
  const std::string server_ip = AddressOf(server_conn), agent_ip = AddressOf(agent_conn),
                    stranger_ip = AddressOf(stranger_conn);
  ASSERT_EQ(server_ip.rfind("127.90.", 0), 0u) << server_conn;
  const std::string server_cid = ContainerOf("primeintellect", "emu-pub-server");
  const std::string agent_cid = ContainerOf("primeintellect", "emu-pub-agent");
  const std::string stranger_cid = ContainerOf("primeintellect", "emu-pub-stranger");
  ASSERT_FALSE(server_cid.empty() || agent_cid.empty() || stranger_cid.empty());
  ServePorts(server_cid, {6443, 10250, 8080}, {51820});
  // Port 7000 answers with the address the connection came from.
  Exec(server_cid,
       "setsid python3 -c \"import socket\n"
       "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
       "s.bind(('0.0.0.0', 7000)); s.listen(8)\n"
       "while True:\n  c, a = s.accept(); c.sendall(a[0].encode()); c.close()\n\" "
       ">/dev/null 2>&1 </dev/null &");
  auto probe = [&](const std::string& cid, const std::string& protocol, int port) {
    return Probe(cid, server_ip, protocol, port);
  };
  ASSERT_TRUE(WaitFor([&] { return probe(agent_cid, "tcp", 6443) == "port-6443\n"; }, 30s))
      << "the agent does not reach the server's 6443 at " << server_ip;
  // No firewall in front of a pod: every port the server listens on.
  EXPECT_EQ(probe(agent_cid, "tcp", 10250), "port-10250\n");
  EXPECT_EQ(probe(agent_cid, "tcp", 8080), "port-8080\n");
  EXPECT_EQ(probe(agent_cid, "udp", 51820), "port-51820\n");
  EXPECT_EQ(probe(stranger_cid, "tcp", 6443), "port-6443\n");
  EXPECT_EQ(Probe(agent_cid, server_ip, "tcp", 7000), agent_ip + "\n")
      << "the server sees the agent's public address as the source";
  // Its own public address stays its own (lo), not the wire.
  EXPECT_EQ(Probe(server_cid, server_ip, "tcp", 8080), "port-8080\n");

  // The node firewall of a tunnel-access node admitting the agent only (as the installer's
  // --node-firewall ssh-only --peer AGENT writes it): the agent reaches the peer ports, the
  // stranger none, and 8080 nobody.
  const auto nft = NodeFirewall(
      server_cid, "    ip saddr { " + agent_ip + " } tcp dport { 6443, 10250 } accept\n"
                  "    ip saddr { " + agent_ip + " } udp dport 51820 accept\n");
  ASSERT_EQ(nft.exit_code, 0) << nft.out << nft.err;
  EXPECT_EQ(probe(agent_cid, "tcp", 6443), "port-6443\n");
  EXPECT_EQ(probe(agent_cid, "tcp", 10250), "port-10250\n");
  EXPECT_EQ(probe(agent_cid, "udp", 51820), "port-51820\n");
  EXPECT_EQ(probe(agent_cid, "tcp", 8080), "") << "a port the node firewall does not admit";
  for (const char* protocol : {"tcp", "udp"}) {
    const int port = std::string(protocol) == "tcp" ? 6443 : 51820;
    EXPECT_EQ(probe(stranger_cid, protocol, port), "")
        << "a pod the node firewall does not name reaches " << protocol << " " << port;
  }

  // The agent deleted: the server no longer routes its address to the wire.
  ASSERT_EQ(Call(pi_, "DELETE", "/pods/" + pod_ids_["emu-pub-agent"], "", kPiKey).status, 200);
  EXPECT_TRUE(WaitFor(
      [&] {
        return Exec(server_cid, "ip route show table local").out.find(agent_ip + " ") ==
               std::string::npos;
      },
      30s))
      << Exec(server_cid, "ip route show table local").out;
  EXPECT_NE(Exec(server_cid, "ip route show table local").out.find(stranger_ip + " "),
            std::string::npos);
}

}  // namespace
}  // namespace gpuprov::emulator
