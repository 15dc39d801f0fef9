// Talking to a cluster's API server from this machine, as kubectl would with the kubeconfig
// gpuprov writes: TLS verified against the cluster CA (host name included), client-certificate
// auth. Also the direct-mode checks of docs/design.md §3: is the API port reachable, and does
// the served certificate cover the public host.
#pragma once

#include <Poco/JSON/Object.h>

#include <chrono>
#include <string>
#include <vector>

#include "kubeconfig.h"

namespace gpuprov {

/// Opens and closes a TCP connection to host:port within \a timeout. "" when it worked, else
/// why not ("connection refused", "timed out", ...).
std::string TcpConnectError(const std::string& host, int port, std::chrono::milliseconds timeout);

/// "" when a TLS server whose certificate chains to \a ca_pem (the host name is not checked)
/// completes a handshake at host:port within \a timeout; else why not ("connection refused",
/// "timed out after 3s", a reset or TLS error).
std::string TlsHandshakeError(const std::string& host, int port, const std::string& ca_pem,
                              std::chrono::milliseconds timeout);

/// The names (DNS names and IP addresses) in the subjectAltName of the certificate served at
/// host:port. The chain is verified against \a ca_pem; the host name is not (that is what the
/// caller checks with CertificateCovers). Throws Error when the handshake or chain fails.
std::vector<std::string> ServedCertificateNames(const std::string& host, int port,
                                                const std::string& ca_pem,
                                                std::chrono::milliseconds timeout);

/// True when \a names covers \a host: equal (IP addresses compared as addresses), or a DNS
/// wildcard "*.example.com" matching one left-most label.
bool CertificateCovers(const std::vector<std::string>& names, const std::string& host);

/// The JSON object an API answer holds (a resource, a list, a Status); null when \a text is
/// not one (empty, cut off, HTML from a proxy).
Poco::JSON::Object::Ptr ParseKubeObject(const std::string& text);

struct KubeResponse {
  int status = 0;
  std::string body;
};

/// GET \a path (e.g. "/readyz") at https://host:port with the client certificate of \a creds,
/// the server verified against creds.ca_pem including the host name. Throws Error on TLS or
/// connection failure; any HTTP status is a result.
KubeResponse KubeGet(const std::string& host, int port, const KubeCredentials& creds,
                     const std::string& path, std::chrono::milliseconds timeout);

}  // namespace gpuprov
