// SPDX-License-Identifier: Apache-2.0
//
// The command line (core/cli.cc's global options and command table, core/cli_args.cc's parser)
// with argv from the input, cut at NUL bytes; then the value parsers of provision's flags
// (--gpus, --disk-gb, --tag) on every argument.
//
// No command may run (it would touch the home folder, drivers and clouds): "--help" is put right
// after the command name, where the parser always reads it as the help switch, so RunCli prints
// the command's help once every option has been parsed. Contract: RunCli returns an exit code,
// it never throws; the value parsers return or throw gpuprov::Error.
#include <cstdint>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "error.h"
#include "fuzz_input.h"
#include "gpu_request.h"
#include "provision_options.h"

namespace {

/// Where RunCli finds the command name: the first argument after the leading options (and the
/// values of --driver-path, --output and -o among them), as core/cli.cc reads it.
size_t CommandIndex(const std::vector<std::string>& args) {
  size_t i = 0;
  while (i < args.size() && !args[i].empty() && args[i][0] == '-') {
    const std::string& a = args[i];
    if ((a == "--driver-path" || a == "--output" || a == "-o") && i + 1 < args.size()) ++i;
    ++i;
  }
  return i;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpuprov;
  std::vector<std::string> args = fuzz::SplitAtNul(data, size);
  if (args.size() == 1 && args[0].empty()) args.clear();
  const size_t at = CommandIndex(args);
  if (at < args.size()) args.insert(args.begin() + static_cast<long>(at) + 1, "--help");

  // Help and error lines go to std::cout / std::cerr: keep the fuzzer's output readable.
  std::ostringstream sink;
  std::streambuf* out = std::cout.rdbuf(sink.rdbuf());
  std::streambuf* err = std::cerr.rdbuf(sink.rdbuf());
  const int rc = RunCli(args);
  std::cout.rdbuf(out);
  std::cerr.rdbuf(err);
  if (rc != 0 && rc != kExitUsage) __builtin_trap();  // parsing alone never fails otherwise

  std::map<std::string, std::string> tags;
  for (const std::string& a : args) {
    try {
      (void)ParseGpuRequest(a, "--gpus");
    } catch (const Error&) {
    }
    try {
      (void)ParseDiskGbFlag(a);
    } catch (const Error&) {
    }
    try {
      AddTagFlag(a, tags);
    } catch (const Error&) {
    }
  }
  return 0;
}
