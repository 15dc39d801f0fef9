#include "kube_api_client.h"

#include <Poco/Crypto/EVPPKey.h>
#include <Poco/Crypto/X509Certificate.h>
#include <Poco/JSON/Parser.h>
#include <Poco/Net/Context.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/Net/HTTPSClientSession.h>
#include <Poco/Net/IPAddress.h>
#include <Poco/Net/NetException.h>
#include <Poco/Net/SSLManager.h>
#include <Poco/Net/SecureStreamSocket.h>
#include <Poco/Net/SocketAddress.h>
#include <Poco/Net/StreamSocket.h>
#include <Poco/StreamCopier.h>
#include <openssl/x509v3.h>

#include <functional>
#include <sstream>

#include "error.h"

namespace gpuprov {
namespace {

void InitSslOnce() {
  static const bool done = [] {
    Poco::Net::initializeSSL();
    return true;
  }();
  (void)done;
}

Poco::Crypto::X509Certificate CertFromPem(const std::string& pem) {
  std::istringstream in(pem);
  return Poco::Crypto::X509Certificate(in);
}

/// A client context trusting only \a ca_pem (no system CAs), with the client certificate of
/// \a client when given. Sessions on it check the peer's name against the host connected to
/// unless extended verification is turned off.
Poco::Net::Context::Ptr MakeContext(const std::string& ca_pem, const KubeCredentials* client) {
  InitSslOnce();
  Poco::Net::Context::Params params;
  params.verificationMode = Poco::Net::Context::VERIFY_RELAXED;
  params.loadDefaultCAs = false;
  params.cipherList = "HIGH:!aNULL:!MD5";
  Poco::Net::Context::Ptr ctx = new Poco::Net::Context(Poco::Net::Context::TLS_CLIENT_USE, params);
  ctx->addCertificateAuthority(CertFromPem(ca_pem));
  if (client) {
    ctx->useCertificate(CertFromPem(client->client_cert_pem));
    std::istringstream key(client->client_key_pem);
    ctx->usePrivateKey(Poco::Crypto::EVPPKey(nullptr, &key));
  }
  return ctx;
}

Poco::Timespan Span(std::chrono::milliseconds t) {
  return Poco::Timespan(static_cast<Poco::Timespan::TimeDiff>(t.count()) * 1000);
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// "" when \a connect returns, else why it failed: "timed out after Ns", "connection refused",
/// or Poco's text.
std::string ConnectError(std::chrono::milliseconds timeout, const std::function<void()>& connect) {
  try {
    connect();
    return "";
  } catch (const Poco::TimeoutException&) {
    return "timed out after " + std::to_string(timeout.count() / 1000) + "s";
  } catch (const Poco::Net::ConnectionRefusedException&) {
    return "connection refused";
  } catch (const Poco::Exception& e) {
    return e.displayText();
  }
}

}  // namespace

std::string TcpConnectError(const std::string& host, int port, std::chrono::milliseconds timeout) {
  return ConnectError(timeout, [&] {
    Poco::Net::StreamSocket socket;
    socket.connect(Poco::Net::SocketAddress(host, static_cast<Poco::UInt16>(port)), Span(timeout));
    socket.close();
  });
}

std::string TlsHandshakeError(const std::string& host, int port, const std::string& ca_pem,
                              std::chrono::milliseconds timeout) {
  return ConnectError(timeout, [&] {
    Poco::Net::Context::Ptr ctx = MakeContext(ca_pem, nullptr);
    ctx->enableExtendedCertificateVerification(false);
    Poco::Net::SecureStreamSocket socket(ctx);
    socket.connect(Poco::Net::SocketAddress(host, static_cast<Poco::UInt16>(port)), Span(timeout));
    socket.completeHandshake();
    socket.close();
  });
}

std::vector<std::string> ServedCertificateNames(const std::string& host, int port,
                                                const std::string& ca_pem,
                                                std::chrono::milliseconds timeout) {
  std::vector<std::string> names;
  try {
    Poco::Net::Context::Ptr ctx = MakeContext(ca_pem, nullptr);
    // Chain only: the host name check is the caller's, to tell "wrong names" from "bad chain".
    ctx->enableExtendedCertificateVerification(false);
    Poco::Net::SecureStreamSocket socket(ctx);
    socket.connect(Poco::Net::SocketAddress(host, static_cast<Poco::UInt16>(port)), Span(timeout));
    socket.completeHandshake();
    Poco::Net::X509Certificate cert = socket.peerCertificate();
    auto* sans = static_cast<GENERAL_NAMES*>(
        X509_get_ext_d2i(const_cast<X509*>(cert.certificate()), NID_subject_alt_name, nullptr, nullptr));
    if (sans) {
      for (int i = 0; i < sk_GENERAL_NAME_num(sans); ++i) {
        const GENERAL_NAME* n = sk_GENERAL_NAME_value(sans, i);
        if (n->type == GEN_DNS) {
          const ASN1_IA5STRING* s = n->d.dNSName;
          names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                             static_cast<size_t>(ASN1_STRING_length(s)));
        } else if (n->type == GEN_IPADD) {
          const ASN1_OCTET_STRING* s = n->d.iPAddress;
          const auto* bytes = ASN1_STRING_get0_data(s);
          const int len = ASN1_STRING_length(s);
          if (len == 4 || len == 16) {
            names.push_back(
                Poco::Net::IPAddress(bytes, static_cast<poco_socklen_t>(len)).toString());
          }
        }
      }
      GENERAL_NAMES_free(sans);
    }
    socket.close();
  } catch (const Poco::Exception& e) {
    throw Error("TLS to the Kubernetes API at " + host + ":" + std::to_string(port) +
                    " failed: " + e.displayText(),
                "the server's certificate must be signed by the cluster CA in k3s.yaml");
  }
  return names;
}

Poco::JSON::Object::Ptr ParseKubeObject(const std::string& text) {
  try {
    Poco::JSON::Parser parser;
    return parser.parse(text).extract<Poco::JSON::Object::Ptr>();
  } catch (const Poco::Exception&) {
    return nullptr;
  } catch (const std::exception&) {
    return nullptr;
  }
}

bool CertificateCovers(const std::vector<std::string>& names, const std::string& host) {
  Poco::Net::IPAddress host_ip;
  const bool is_ip = Poco::Net::IPAddress::tryParse(host, host_ip);
  const std::string h = Lower(host);
  for (const auto& name : names) {
    Poco::Net::IPAddress ip;
    if (is_ip) {
      if (Poco::Net::IPAddress::tryParse(name, ip) && ip == host_ip) return true;
      continue;
    }
    const std::string n = Lower(name);
    if (n == h) return true;
    if (n.rfind("*.", 0) == 0) {
      const auto dot = h.find('.');
      if (dot != std::string::npos && dot > 0 && h.substr(dot) == n.substr(1)) return true;
    }
  }
  return false;
}

KubeResponse KubeGet(const std::string& host, int port, const KubeCredentials& creds,
                     const std::string& path, std::chrono::milliseconds timeout) {
  try {
    Poco::Net::Context::Ptr ctx = MakeContext(creds.ca_pem, &creds);
    Poco::Net::HTTPSClientSession session(host, static_cast<Poco::UInt16>(port), ctx);
    session.setTimeout(Span(timeout));
    Poco::Net::HTTPRequest request(Poco::Net::HTTPRequest::HTTP_GET, path,
                                   Poco::Net::HTTPMessage::HTTP_1_1);
    request.set("Accept", "application/json");
    request.set("User-Agent", "gpuprov");
    session.sendRequest(request);
    Poco::Net::HTTPResponse response;
    std::istream& body = session.receiveResponse(response);
    KubeResponse out;
    out.status = static_cast<int>(response.getStatus());
    std::ostringstream text;
    Poco::StreamCopier::copyStream(body, text);
    out.body = text.str();
    return out;
  } catch (const Poco::Exception& e) {
    throw Error("the Kubernetes API at https://" + host + ":" + std::to_string(port) +
                    " did not answer " + path + ": " + e.displayText(),
                "");
  }
}

}  // namespace gpuprov
