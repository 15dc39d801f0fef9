// SPDX-License-Identifier: Apache-2.0
//
// gpuprov-emulator: a TEST program that serves the APIs of the clouds gpuprov
// has drivers for, on 127.0.0.1 only. See tests/emulators/README.md.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <pthread.h>
#include <optional>
#include <string>

#include "emulator.h"

#ifndef GPUPROV_TESTVM_IMAGE
#define GPUPROV_TESTVM_IMAGE "gpuprov-testvm:unknown"
#endif

namespace {

const char* kUsage =
    "usage: gpuprov-emulator [--backend memory|docker] [--clouds a,b] [--port CLOUD=N]...\n"
    "                        [--image TAG] [--boot-seconds N] [--no-rate-limits]\n"
    "                        [--api-latency-ms L] [--ssh-delay-seconds N]\n"
    "\n"
    "A test fixture: serves each cloud's API on its own 127.0.0.1 port at the real API's\n"
    "paths, then prints one line per cloud, '<cloud> <base-url>', and a last line\n"
    "'control <url>' (faults, counts, request log, reset), and runs until SIGINT/SIGTERM.\n"
    "Credentials accepted: each cloud's usual environment variables (DIGITALOCEAN_TOKEN or\n"
    "DIGITALOCEAN_ACCESS_TOKEN, PRIME_API_KEY, AWS_ACCESS_KEY_ID with AWS_SECRET_ACCESS_KEY\n"
    "(SigV4 checked), GOOGLE_APPLICATION_CREDENTIALS: a missing file there gets the\n"
    "service-account key the gcp emulator issues), LAMBDA_API_KEY, HYPERSTACK_API_KEY,\n"
    "VERDA_CLIENT_ID with VERDA_CLIENT_SECRET (OAuth2 client credentials),\n"
    "MASSED_API_KEY or MASSED_COMPUTE_API_TOKEN,\n"
    "NEBIUS_IAM_TOKEN and NEBIUS_CREDENTIALS_FILE (a missing file gets the service-account\n"
    "credentials whose JWTs the nebius token exchange accepts). nebius is a gRPC server:\n"
    "its line is 'nebius 127.0.0.1:PORT' (plaintext h2c).\n"
    "\n"
    "  --backend memory   instances are records whose state changes with time (default)\n"
    "  --backend docker   each instance is a test VM container (systemd, sshd, cloud-init)\n"
    "  --clouds LIST      comma-separated subset of: digitalocean,primeintellect,aws,gcp,\n"
    "                     lambda,hyperstack,verda,massedcompute,nebius (default all)\n"
    "  --port CLOUD=N     fixed port for CLOUD (or 'control'); default: ephemeral\n"
    "  --image TAG        docker backend image (default " GPUPROV_TESTVM_IMAGE ")\n"
    "  --boot-seconds N   memory backend: seconds from create to running (default 3)\n"
    "  --no-rate-limits   report the clouds' rate-limit headers but never enforce them\n"
    "  --api-latency-ms L every cloud API request is answered L ms later (default 0;\n"
    "                     control: POST /settings {\"api_latency_ms\": L})\n"
    "  --ssh-delay-seconds N\n"
    "                     docker backend: SSH is refused until N s after an instance is\n"
    "                     running, while its boot script runs from the start (default 0;\n"
    "                     per cloud: fault ssh_delay)\n";

int Usage(const std::string& error) {
  if (!error.empty()) std::cerr << "gpuprov-emulator: " << error << "\n";
  std::cerr << kUsage;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using gpuprov::emulator::Emulator;
  using gpuprov::emulator::EmulatorOptions;
  EmulatorOptions options;
  options.image = GPUPROV_TESTVM_IMAGE;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const std::string& flag) -> std::optional<std::string> {
      if (a == flag) {
        if (i + 1 >= argc) return std::nullopt;
        return std::string(argv[++i]);
      }
      if (a.rfind(flag + "=", 0) == 0) return a.substr(flag.size() + 1);
      return std::nullopt;
    };
    // The flag's value as a number >= 0 into *out; false when it is missing or not one.
    auto non_negative = [&](const std::string& flag, double* out) {
      auto v = value(flag);
      try {
        *out = v ? std::stod(*v) : -1;
      } catch (const std::exception&) {
        *out = -1;
      }
      return *out >= 0;
    };
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (a == "--no-rate-limits") {
      options.enforce_rate_limits = false;
    } else if (a.rfind("--backend", 0) == 0) {
      auto v = value("--backend");
      if (!v || (*v != "memory" && *v != "docker")) return Usage("--backend takes memory or docker");
      options.backend = *v;
    } else if (a.rfind("--clouds", 0) == 0) {
      auto v = value("--clouds");
      if (!v) return Usage("--clouds needs a list");
      options.clouds = gpuprov::emulator::Split(*v, ',');
    } else if (a.rfind("--port", 0) == 0) {
      auto v = value("--port");
      size_t eq = v ? v->find('=') : std::string::npos;
      if (eq == std::string::npos) return Usage("--port takes CLOUD=N");
      try {
        options.ports[v->substr(0, eq)] = std::stoi(v->substr(eq + 1));
      } catch (const std::exception&) {
        return Usage("--port takes CLOUD=N with a number N");
      }
    } else if (a.rfind("--image", 0) == 0) {
      auto v = value("--image");
      if (!v || v->empty()) return Usage("--image needs a tag");
      options.image = *v;
    } else if (a.rfind("--boot-seconds", 0) == 0) {
      if (!non_negative("--boot-seconds", &options.boot_seconds)) {
        return Usage("--boot-seconds takes a number >= 0");
      }
    } else if (a.rfind("--api-latency-ms", 0) == 0) {
      if (!non_negative("--api-latency-ms", &options.api_latency_ms)) {
        return Usage("--api-latency-ms takes a number >= 0");
      }
    } else if (a.rfind("--ssh-delay-seconds", 0) == 0) {
      if (!non_negative("--ssh-delay-seconds", &options.ssh_delay_seconds)) {
        return Usage("--ssh-delay-seconds takes a number >= 0");
      }
    } else {
      return Usage("unknown argument " + a);
    }
  }
  if (options.ssh_delay_seconds > 0 && options.backend != "docker") {
    return Usage("--ssh-delay-seconds needs --backend docker (the memory backend runs no SSH)");
  }

  // Block the stop signals in every thread; the main thread waits for them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  try {
    Emulator emulator(options);
    for (const auto& n : emulator.notes()) std::cerr << "gpuprov-emulator: " << n << "\n";
    emulator.Start();
    for (const auto& [cloud, url] : emulator.Endpoints()) std::cout << cloud << " " << url << "\n";
    std::cout.flush();
    std::cerr << "gpuprov-emulator: serving with the " << options.backend
              << " backend; stop with SIGINT or SIGTERM\n";
    int sig = 0;
    sigwait(&stop, &sig);
    std::cerr << "gpuprov-emulator: " << strsignal(sig) << "; stopping"
              << (options.backend == "docker" ? " and removing its containers" : "") << "\n";
    emulator.Stop();
  } catch (const std::exception& e) {
    std::cerr << "gpuprov-emulator: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
