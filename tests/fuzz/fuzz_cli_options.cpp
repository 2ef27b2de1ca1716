// libFuzzer target: sparge's command-line parser with every option check (cli/command_line.h), never the
// commands themselves. The input is the argument list, arguments separated by NUL bytes. Every input must end
// in a parsed command or a message with exit status 0 (help, version) or 2 (usage error); an exception, a
// crash or a sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "command_line.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args{"sparge"};
  std::string current;
  for (size_t i = 0; i < size && args.size() < 64; ++i) {
    if (data[i] == 0) {
      args.push_back(current);
      current.clear();
    } else {
      current += char(data[i]);
    }
  }
  if (args.size() < 64) args.push_back(current);
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  const sparge::cli::ParsedCommand parsed =
      sparge::cli::parseCommandLine(int(argv.size()), argv.data(), out, err);
  if (!parsed.action && parsed.exitCode != 0 && parsed.exitCode != 2) std::abort();
  if (!parsed.action && parsed.exitCode == 2 && err.str().empty()) std::abort();  // a usage error says why
  return 0;
}
