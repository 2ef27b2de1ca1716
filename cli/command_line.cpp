// sparge's command line: the subcommands, the checks of every option (option_checks.h) and of the command
// name, and the run of the parsed command with its errors turned into messages and exit codes.
#include "command_line.h"

#include <iostream>
#include <new>
#include <sstream>
#include <string>

#include "option_checks.h"
#include "sparge/core/data_dir.h"
#include "sparge/core/engine.h"
#include "sparge/core/error.h"
#include "sparge/core/names.h"

namespace sparge::cli {
namespace {

const char* const kCommands[] = {"info", "run", "synth", "tune", "bench", "annotate", "compare"};
const char* const kCommandList = "info, run, synth, tune, bench, annotate or compare";
// Longer error messages (a file's names echoed in them) are shortened in the middle.
constexpr size_t kMessageBytes = 4096;

// The first argument names the command; CLI11 would say only that "a subcommand is required".
std::string commandProblem(int argc, const char* const* argv) {
  if (argc < 2) return "no command given — use one of " + std::string(kCommandList) + " (sparge --help)";
  const std::string first = argv[1];
  if (!first.empty() && first[0] == '-') return "";
  for (const char* c : kCommands)
    if (first == c) return "";
  return "unknown command '" + core::shortForDisplay(first) + "' — use one of " + kCommandList +
         " (sparge --help)";
}

// CLI11 prints a usage error with a hint to --help; a sparge::Error from a subcommand's checks the same way.
int usageError(const std::string& message, std::ostream& err) {
  err << "sparge: error: " << core::shortForDisplay(message, kMessageBytes)
      << "\nRun with --help for more information.\n";
  return 2;
}

}  // namespace

std::string defaultCapturePath() {
  return core::sampleCapturePath().string();
}

ParsedCommand parseCommandLine(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  ParsedCommand parsed;
  if (std::string problem = commandProblem(argc, argv); !problem.empty()) {
    parsed.exitCode = usageError(problem, err);
    return parsed;
  }
  parsed.app = std::make_shared<CLI::App>(
      "sparge — SpargeAttn sparsity explorer (headless). Run `sparge <command> --help` for details.");
  CLI::App& app = *parsed.app;
  app.require_subcommand(1);
  app.set_version_flag("--version", "sparge 0.1.0");
  registerInfo(app, parsed.action);
  registerRun(app, parsed.action);
  registerSynth(app, parsed.action);
  registerTune(app, parsed.action);
  registerBench(app, parsed.action);
  registerAnnotate(app, parsed.action);
  registerCompare(app, parsed.action);
  checkEveryOption(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    parsed.action = nullptr;
    // Help and version end with 0 (CLI11 prints them); every usage error with 2, said as ours are.
    parsed.exitCode = e.get_exit_code() == 0 ? app.exit(e, out, err) : usageError(e.what(), err);
    return parsed;
  } catch (const Error& e) {  // a subcommand's checks of its options, after CLI11's
    parsed.action = nullptr;
    parsed.exitCode = usageError(e.what(), err);
    return parsed;
  }
  parsed.runsOnEveryRank =
      app.got_subcommand("tune") || app.got_subcommand("run") || app.got_subcommand("bench");
  if (!parsed.action) parsed.exitCode = 2;
  return parsed;
}

int runCommand(int argc, char** argv, int rank, bool& escaped) {
  std::ostringstream quiet;  // every rank parses the same line; one message is enough
  ParsedCommand parsed = rank == 0 ? parseCommandLine(argc, argv, std::cout, std::cerr)
                                   : parseCommandLine(argc, argv, quiet, quiet);
  if (!parsed.action) return parsed.exitCode;
  if (rank != 0 && !parsed.runsOnEveryRank) return 0;
  const std::string rankLabel = rank > 0 ? "rank " + std::to_string(rank) + ": " : "";
  try {
    return parsed.action();
  } catch (const sparge::core::Cancelled&) {
    std::cerr << "sparge: cancelled\n";
    escaped = true;
    return 130;
  } catch (const std::bad_alloc&) {
    escaped = true;
    std::cerr << "sparge: error: " << rankLabel
              << "out of memory — run fewer heads (--heads), fewer entries (--entry) or smaller shapes; "
                 "--max-memory SIZE sets the limit the commands check before they allocate\n";
    return 1;
  } catch (const std::exception& e) {
    escaped = true;
    // Names may hold control bytes and any length: printed through shortForDisplay().
    std::cerr << "sparge: error: " << rankLabel << core::shortForDisplay(e.what(), kMessageBytes) << "\n";
    return 1;
  }
}

}  // namespace sparge::cli
