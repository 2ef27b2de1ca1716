// Parsing sparge's command line into the action of one command, with every option checked before any work.
// main() runs the action; the CLI fuzzer parses only.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <ostream>

#include "commands.h"

namespace sparge::cli {

// The outcome of parsing: an action to run, or an exit status (help, version, usage error: 2).
struct ParsedCommand {
  std::shared_ptr<CLI::App> app;  // the actions read their subcommand's counts: kept while they run
  Action action;
  int exitCode = 0;              // when there is no action
  bool runsOnEveryRank = false;  // tune, run and bench split their work over the ranks of an MPI job
};

// Parses argv; messages (help, usage errors) go to `out` and `err`. Never runs the command and never
// throws: every problem is a message and exit status 2.
ParsedCommand parseCommandLine(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

// Parses and runs one command; `escaped` is set when an error left the command outside its job protocol
// (other ranks may then be waiting for this one). Only rank 0 prints usage errors.
int runCommand(int argc, char** argv, int rank, bool& escaped);

}  // namespace sparge::cli
