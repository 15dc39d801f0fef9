#include "kubeconfig.h"

#include <Poco/Base64Decoder.h>
#include <Poco/Base64Encoder.h>
#include <yaml-cpp/yaml.h>

#include <sstream>

#include "error.h"
#include "file_util.h"
#include "paths.h"

namespace gpuprov {
namespace {

Error Bad(const std::string& what) {
  return Error("the node's kubeconfig (/etc/rancher/k3s/k3s.yaml) is not usable: " + what,
               "look at it with `gpuprov ssh <name> -- sudo cat /etc/rancher/k3s/k3s.yaml`; "
               "re-running `gpuprov provision` re-runs the installer");
}

std::string DecodeBase64(const std::string& field, const std::string& text) {
  std::istringstream in(text);
  Poco::Base64Decoder decoder(in);
  // istream::read turns the decoder's DataFormatException (a character outside base64) into
  // badbit; an exception through istreambuf_iterator would leak the string being built.
  std::string out;
  char chunk[1024];
  while (decoder.read(chunk, sizeof(chunk)) || decoder.gcount() > 0) {
    out.append(chunk, static_cast<size_t>(decoder.gcount()));
  }
  if (decoder.bad() || out.find("-----BEGIN") == std::string::npos) {
    throw Bad(field + " is not base64 PEM");
  }
  return out;
}

std::string EncodeBase64(const std::string& data) {
  std::ostringstream out;
  Poco::Base64Encoder encoder(out);
  encoder.rdbuf()->setLineLength(0);
  encoder << data;
  encoder.close();
  return out.str();
}

/// The entry of list \a key whose "name" is \a name (or the only entry when name is empty).
YAML::Node Named(const YAML::Node& root, const std::string& key, const std::string& name) {
  const YAML::Node list = root[key];
  if (!list || !list.IsSequence() || list.size() == 0) throw Bad("no " + key);
  for (const auto& item : list) {
    if (name.empty() || (item["name"] && item["name"].as<std::string>() == name)) return item;
  }
  throw Bad("no entry named '" + name + "' in " + key);
}

std::string Field(const YAML::Node& node, const std::string& key) {
  if (!node || !node[key] || !node[key].IsScalar()) throw Bad("no " + key);
  return node[key].as<std::string>();
}

/// The current context's credentials in a parsed kubeconfig. yaml-cpp throws when a node has
/// another shape than read here (a scalar where a mapping belongs): the caller turns that into Bad.
KubeCredentials ReadCredentials(const YAML::Node& root) {
  const std::string current =
      root["current-context"] && root["current-context"].IsScalar()
          ? root["current-context"].as<std::string>()
          : "";
  const YAML::Node context = Named(root, "contexts", current)["context"];
  const std::string cluster_name = Field(context, "cluster");
  const std::string user_name = Field(context, "user");
  const YAML::Node cluster = Named(root, "clusters", cluster_name)["cluster"];
  const YAML::Node user = Named(root, "users", user_name)["user"];
  if (cluster && cluster["insecure-skip-tls-verify"] &&
      cluster["insecure-skip-tls-verify"].as<std::string>() == "true") {
    throw Bad("it disables TLS verification");
  }
  KubeCredentials c;
  c.server = Field(cluster, "server");
  c.ca_pem = DecodeBase64("certificate-authority-data", Field(cluster, "certificate-authority-data"));
  c.client_cert_pem = DecodeBase64("client-certificate-data", Field(user, "client-certificate-data"));
  c.client_key_pem = DecodeBase64("client-key-data", Field(user, "client-key-data"));
  return c;
}

}  // namespace

KubeCredentials ParseKubeconfig(const std::string& yaml_text) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw Bad(std::string("not YAML: ") + e.what());
  }
  if (!root.IsMap()) throw Bad("not a YAML mapping");
  try {
    return ReadCredentials(root);
  } catch (const YAML::Exception& e) {
    throw Bad(std::string("not a kubeconfig: ") + e.what());
  }
}

std::string KubeContextName(const std::string& vm_name) { return "gpuprov-" + vm_name; }

std::string RenderKubeconfig(const std::string& vm_name, const std::string& server,
                             const KubeCredentials& c) {
  const std::string n = KubeContextName(vm_name);
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "apiVersion" << YAML::Value << "v1";
  out << YAML::Key << "kind" << YAML::Value << "Config";
  out << YAML::Key << "clusters" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << n;
  out << YAML::Key << "cluster" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "server" << YAML::Value << server;
  out << YAML::Key << "certificate-authority-data" << YAML::Value << EncodeBase64(c.ca_pem);
  out << YAML::EndMap << YAML::EndMap << YAML::EndSeq;
  out << YAML::Key << "users" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << n;
  out << YAML::Key << "user" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "client-certificate-data" << YAML::Value << EncodeBase64(c.client_cert_pem);
  out << YAML::Key << "client-key-data" << YAML::Value << EncodeBase64(c.client_key_pem);
  out << YAML::EndMap << YAML::EndMap << YAML::EndSeq;
  out << YAML::Key << "contexts" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << n;
  out << YAML::Key << "context" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "cluster" << YAML::Value << n;
  out << YAML::Key << "user" << YAML::Value << n;
  out << YAML::EndMap << YAML::EndMap << YAML::EndSeq;
  out << YAML::Key << "current-context" << YAML::Value << n;
  out << YAML::Key << "preferences" << YAML::Value << YAML::BeginMap << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

void WriteKubeconfig(const std::filesystem::path& path, const std::string& text) {
  EnsureDir(path.parent_path());
  WriteFileAtomic(path, text, 0600);
}

}  // namespace gpuprov
