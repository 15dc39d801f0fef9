// Kubeconfigs: reading the one k3s writes on the node (/etc/rancher/k3s/k3s.yaml) and writing the
// one gpuprov gives the user (<home>/kube/<name>.yaml): cluster, user and context renamed to
// gpuprov-<name>, server pointed at the access endpoint, mode 0600, written atomically.
// TLS stays verified: the cluster CA is kept and insecure-skip-tls-verify is never written.
#pragma once

#include <filesystem>
#include <string>

namespace gpuprov {

/// The credentials in a kubeconfig: PEM text, decoded from the *-data fields.
struct KubeCredentials {
  std::string server;          // as written in the file, e.g. https://127.0.0.1:6443
  std::string ca_pem;          // certificate-authority-data
  std::string client_cert_pem; // client-certificate-data
  std::string client_key_pem;  // client-key-data
};

/// Parses k3s's kubeconfig: the current context's cluster and user. Throws Error naming what is
/// missing (e.g. "client-key-data") when it is not a kubeconfig with embedded credentials.
KubeCredentials ParseKubeconfig(const std::string& yaml_text);

/// "gpuprov-<name>": the cluster, user and context name gpuprov writes.
std::string KubeContextName(const std::string& vm_name);

/// The user's kubeconfig: one cluster, user and context named KubeContextName(vm_name), server
/// \a server, the CA and client certificate of \a credentials.
std::string RenderKubeconfig(const std::string& vm_name, const std::string& server,
                             const KubeCredentials& credentials);

/// Writes \a text to \a path with mode 0600 through a temporary file and rename (the folder is
/// made 0700 when missing), so readers never see a partial kubeconfig.
void WriteKubeconfig(const std::filesystem::path& path, const std::string& text);

}  // namespace gpuprov
