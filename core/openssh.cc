#include "openssh.h"

#include <cerrno>
#include <cstdlib>

#include "error.h"

namespace gpuprov {
namespace {

Error BadForward(const std::string& spec, const std::string& why) {
  return UsageError("-L '" + spec + "': " + why,
                    "write -L [BIND:]PORT:HOST:HOSTPORT, e.g. -L 8888:localhost:8888 (HOST as "
                    "the VM sees it; an IPv6 address in brackets, [::1])");
}

/// Splits at ':' outside brackets; the brackets stay on their field.
std::vector<std::string> SplitFields(const std::string& spec) {
  std::vector<std::string> fields(1);
  bool in_brackets = false;
  for (char c : spec) {
    if (c == '[') in_brackets = true;
    if (c == ']') in_brackets = false;
    if (c == ':' && !in_brackets) {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

int PortField(const std::string& spec, const std::string& text, const char* what) {
  errno = 0;
  char* end = nullptr;
  const long port = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || port < 1 || port > 65535 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    throw BadForward(
        spec, std::string(what) + " must be a port number from 1 to 65535, not '" + text + "'");
  }
  return static_cast<int>(port);
}

void HostField(const std::string& spec, const std::string& text, const char* what) {
  if (text.empty()) throw BadForward(spec, std::string(what) + " is empty");
  for (char c : text) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '-' || c == '_' || c == '[' || c == ']' || c == ':' ||
                    c == '*';
    if (!ok)
      throw BadForward(spec, std::string(what) + " '" + text + "' is not a host name or address");
  }
  if ((text.front() == '[') != (text.back() == ']')) {
    throw BadForward(spec, std::string(what) + " '" + text + "' has an unclosed bracket");
  }
}

std::string ConfigValue(const std::string& value) {
  if (value.find_first_of("\"\r\n") != std::string::npos) {
    throw Error("cannot write '" + value +
                    "' into an ssh_config block (it holds a quote or a "
                    "line break)",
                "move the file to a path without them, e.g. with GPUPROV_HOME");
  }
  if (value.find_first_of(" \t") != std::string::npos) return "\"" + value + "\"";
  return value;
}

}  // namespace

int ParseLocalPort(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const long port = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || port < 1 || port > 65535) {
    throw UsageError("--local-port must be a port number from 1 to 65535, not '" + text + "'",
                     "e.g. --local-port 16444");
  }
  return static_cast<int>(port);
}

std::string RemoteCommandLine(const std::vector<std::string>& words) {
  std::string line;
  for (const auto& word : words) {
    if (!line.empty()) line += ' ';
    line += word;
  }
  return line;
}

std::string LocalForward::ToSpec() const {
  return (bind_address.empty() ? "" : bind_address + ":") + std::to_string(port) + ":" + host +
         ":" + std::to_string(host_port);
}

LocalForward ParseLocalForward(const std::string& spec) {
  const std::vector<std::string> fields = SplitFields(spec);
  if (fields.size() != 3 && fields.size() != 4) {
    throw BadForward(
        spec, "expected 3 or 4 fields separated by ':', found " + std::to_string(fields.size()));
  }
  LocalForward f;
  size_t i = 0;
  if (fields.size() == 4) {
    f.bind_address = fields[i++];
    HostField(spec, f.bind_address, "the bind address");
  }
  f.port = PortField(spec, fields[i++], "the local port");
  f.host = fields[i++];
  HostField(spec, f.host, "the host");
  f.host_port = PortField(spec, fields[i++], "the host port");
  return f;
}

std::vector<std::string> OpenSshArgv(const SshTarget& target,
                                     const std::vector<LocalForward>& forwards, bool no_command,
                                     const std::string& command_line) {
  std::vector<std::string> argv = {"ssh",
                                   "-i",
                                   target.private_key_path,
                                   "-p",
                                   std::to_string(target.port),
                                   "-o",
                                   "IdentitiesOnly=yes",
                                   "-o",
                                   "UserKnownHostsFile=" + target.known_hosts_path,
                                   "-o",
                                   "GlobalKnownHostsFile=/dev/null",
                                   "-o",
                                   "StrictHostKeyChecking=yes",
                                   "-o",
                                   "LogLevel=ERROR"};
  for (const auto& f : forwards) {
    argv.push_back("-L");
    argv.push_back(f.ToSpec());
  }
  if (!forwards.empty()) argv.push_back("-o"), argv.push_back("ExitOnForwardFailure=yes");
  if (no_command) argv.push_back("-N");
  argv.push_back(target.user + "@" + target.host);
  if (!command_line.empty()) {
    // "--" so a command starting with '-' is not read as an ssh option.
    argv.push_back("--");
    argv.push_back(command_line);
  }
  return argv;
}

std::string SshHostAlias(const std::string& vm_name) { return "gpuprov-" + vm_name; }

std::string SshConfigBlock(const std::string& alias, const SshTarget& target) {
  std::string out = "Host " + ConfigValue(alias) + "\n";
  out += "  HostName " + ConfigValue(target.host) + "\n";
  out += "  Port " + std::to_string(target.port) + "\n";
  out += "  User " + ConfigValue(target.user) + "\n";
  out += "  IdentityFile " + ConfigValue(target.private_key_path) + "\n";
  out += "  IdentitiesOnly yes\n";
  out += "  UserKnownHostsFile " + ConfigValue(target.known_hosts_path) + "\n";
  out += "  GlobalKnownHostsFile /dev/null\n";
  out += "  StrictHostKeyChecking yes\n";
  return out;
}

}  // namespace gpuprov
