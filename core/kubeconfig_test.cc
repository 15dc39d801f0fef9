#include "kubeconfig.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "error.h"
#include "file_util.h"
#include "kube_api_client.h"
#include "test_support.h"

namespace gpuprov {
namespace {

using testing::ModeOf;
using testing::ScopedTempDir;

// base64 of "-----BEGIN CERTIFICATE-----\nCA\n", "...\nCLIENT\n", "-----BEGIN EC PRIVATE KEY-----\nKEY\n".
constexpr const char* kCa = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkNBCg==";
constexpr const char* kClient = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkNMSUVOVAo=";
constexpr const char* kKey = "LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCktFWQo=";

std::string K3sYaml() {
  // The shape k3s writes to /etc/rancher/k3s/k3s.yaml.
  return std::string("apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: ") + kCa +
         "\n    server: https://127.0.0.1:6443\n  name: default\ncontexts:\n- context:\n"
         "    cluster: default\n    user: default\n  name: default\ncurrent-context: default\n"
         "kind: Config\npreferences: {}\nusers:\n- name: default\n  user:\n"
         "    client-certificate-data: " + kClient + "\n    client-key-data: " + kKey + "\n";
}

TEST(Kubeconfig, ParsesK3sYaml) {
  KubeCredentials c = ParseKubeconfig(K3sYaml());
  EXPECT_EQ(c.server, "https://127.0.0.1:6443");
  EXPECT_EQ(c.ca_pem, "-----BEGIN CERTIFICATE-----\nCA\n");
  EXPECT_EQ(c.client_cert_pem, "-----BEGIN CERTIFICATE-----\nCLIENT\n");
  EXPECT_EQ(c.client_key_pem, "-----BEGIN EC PRIVATE KEY-----\nKEY\n");
}

TEST(Kubeconfig, RendersRenamedContextPointingAtTheEndpoint) {
  KubeCredentials c = ParseKubeconfig(K3sYaml());
  const std::string text = RenderKubeconfig("gpu-k8s", "https://203.0.113.7:6443", c);
  YAML::Node y = YAML::Load(text);
  EXPECT_EQ(y["current-context"].as<std::string>(), "gpuprov-gpu-k8s");
  EXPECT_EQ(y["clusters"][0]["name"].as<std::string>(), "gpuprov-gpu-k8s");
  EXPECT_EQ(y["users"][0]["name"].as<std::string>(), "gpuprov-gpu-k8s");
  EXPECT_EQ(y["contexts"][0]["context"]["cluster"].as<std::string>(), "gpuprov-gpu-k8s");
  EXPECT_EQ(y["contexts"][0]["context"]["user"].as<std::string>(), "gpuprov-gpu-k8s");
  EXPECT_EQ(y["clusters"][0]["cluster"]["server"].as<std::string>(), "https://203.0.113.7:6443");
  EXPECT_EQ(text.find("insecure-skip-tls-verify"), std::string::npos);
  // Round trip: the credentials survive.
  KubeCredentials back = ParseKubeconfig(text);
  EXPECT_EQ(back.ca_pem, c.ca_pem);
  EXPECT_EQ(back.client_cert_pem, c.client_cert_pem);
  EXPECT_EQ(back.client_key_pem, c.client_key_pem);
  EXPECT_EQ(back.server, "https://203.0.113.7:6443");
}

// Found by fuzzing (tests/fuzz/corpus/kubeconfig/crash-bad-base64-character): a character
// outside base64 made Poco's decoder throw DataFormatException past ParseKubeconfig.
TEST(Kubeconfig, RefusesDataThatIsNotBase64NamingTheField) {
  std::string bad = K3sYaml();
  bad.replace(bad.find(kKey), 4, "LS0t!");
  try {
    ParseKubeconfig(bad);
    FAIL() << "accepted client-key-data that is not base64";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("client-key-data is not base64 PEM"), std::string::npos)
        << e.what();
  }
}

// Found by fuzzing (tests/fuzz/corpus/kubeconfig/crash-context-is-a-scalar): a node of another
// shape than a kubeconfig's made yaml-cpp throw BadSubscript past ParseKubeconfig.
TEST(Kubeconfig, RefusesNodesOfTheWrongShape) {
  std::string scalar_context = K3sYaml();
  scalar_context.replace(scalar_context.find("- context:\n    cluster: default\n    user: default"),
                         std::string("- context:\n    cluster: default\n    user: default").size(),
                         "- context: 127.0.0.1:6443");
  EXPECT_THROW(ParseKubeconfig(scalar_context), Error);
  std::string scalar_entry = K3sYaml();
  scalar_entry.replace(scalar_entry.find("users:\n"), 8, "users:\n- just-a-name\n");
  EXPECT_THROW(ParseKubeconfig(scalar_entry), Error);
}

TEST(Kubeconfig, RejectsWhatIsNotUsable) {
  EXPECT_THROW(ParseKubeconfig("not: [yaml"), Error);
  EXPECT_THROW(ParseKubeconfig("apiVersion: v1\n"), Error);
  std::string no_key = K3sYaml();
  no_key = no_key.substr(0, no_key.find("    client-key-data"));
  try {
    ParseKubeconfig(no_key);
    FAIL() << "accepted a kubeconfig without a client key";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("client-key-data"), std::string::npos) << e.what();
  }
  std::string insecure = K3sYaml();
  insecure.replace(insecure.find("    server:"), 0, "    insecure-skip-tls-verify: true\n");
  EXPECT_THROW(ParseKubeconfig(insecure), Error);
}

TEST(Kubeconfig, WrittenAtomicallyWithMode0600) {
  ScopedTempDir dir;
  const auto path = dir.path() / "kube" / "gpu-k8s.yaml";
  WriteKubeconfig(path, "apiVersion: v1\n");
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_EQ(ModeOf(path.parent_path()), 0700u);
  WriteKubeconfig(path, "apiVersion: v1\nkind: Config\n");
  EXPECT_EQ(ReadFile(path), "apiVersion: v1\nkind: Config\n");
  EXPECT_EQ(ModeOf(path), 0600u);
}

TEST(KubeApiClient, CertificateCoversIpAndDnsNames) {
  const std::vector<std::string> names = {"kubernetes", "localhost", "127.0.0.1", "::1",
                                          "10.43.0.1", "*.nodes.example.com"};
  EXPECT_TRUE(CertificateCovers(names, "127.0.0.1"));
  EXPECT_TRUE(CertificateCovers(names, "::1"));
  EXPECT_TRUE(CertificateCovers(names, "0:0:0:0:0:0:0:1"));
  EXPECT_TRUE(CertificateCovers(names, "LOCALHOST"));
  EXPECT_TRUE(CertificateCovers(names, "gpu.nodes.example.com"));
  EXPECT_FALSE(CertificateCovers(names, "a.gpu.nodes.example.com"));
  EXPECT_FALSE(CertificateCovers(names, "127.90.0.5"));
  EXPECT_FALSE(CertificateCovers(names, "203.0.113.7"));
  EXPECT_FALSE(CertificateCovers({}, "127.0.0.1"));
}

TEST(KubeApiClient, RefusedPortIsReported) {
  // Port 1 on loopback: nothing listens there.
  const std::string err = TcpConnectError("127.0.0.1", 1, std::chrono::seconds(2));
  EXPECT_NE(err.find("refused"), std::string::npos) << err;
}

}  // namespace
}  // namespace gpuprov
