// sparge: the headless command line of Sparge Studio (info, run, synth, tune, bench).
#include <cstdio>
#include <iostream>
#include <memory>

#include "commands.h"
#include "job_support.h"
#include "sparge/core/data_dir.h"
#include "sparge/core/engine.h"
#include "sparge/core/error.h"
#include "sparge/core/names.h"
#include "sparge/kernels/engine_factory.h"

namespace sparge::cli {

using scaleout::setJobTransport;

std::string defaultCapturePath() {
  return core::sampleCapturePath().string();
}

namespace {

// Commands that split their work over the ranks of an MPI job; the others run on rank 0 only.
bool runsOnEveryRank(const CLI::App& app) {
  return app.got_subcommand("tune") || app.got_subcommand("run") || app.got_subcommand("bench");
}

}  // namespace

// Parses and runs one command; `escaped` is set when an error left the command outside its job
// protocol (other ranks may then be waiting for this one).
int runCommand(int argc, char** argv, int rank, bool& escaped) {
  CLI::App app{
      "sparge — SpargeAttn sparsity explorer (headless). Run `sparge <command> --help` for details."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "sparge 0.1.0");
  Action action;
  registerInfo(app, action);
  registerRun(app, action);
  registerSynth(app, action);
  registerTune(app, action);
  registerBench(app, action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (rank == 0) app.exit(e);  // every rank parses the same line; one message is enough
    return 2;                    // usage error
  }
  if (rank != 0 && !runsOnEveryRank(app)) return 0;
  try {
    return action ? action() : 2;
  } catch (const sparge::core::Cancelled&) {
    std::cerr << "sparge: cancelled\n";
    escaped = true;
    return 130;
  } catch (const std::exception& e) {
    escaped = true;
    // Names may hold control bytes: printed through printable().
    std::cerr << "sparge: error: " << (rank > 0 ? "rank " + std::to_string(rank) + ": " : "")
              << sparge::core::printable(e.what()) << "\n";
    return 1;
  }
}

}  // namespace sparge::cli

int main(int argc, char** argv) {
  using namespace sparge::cli;
  sparge::engines::prepareCudaProcess();  // before MPI's threads
  std::unique_ptr<sparge::scaleout::Transport> transport;
  try {
    transport = sparge::scaleout::openTransport(&argc, &argv);
  } catch (const std::exception& e) {
    std::cerr << "sparge: error: " << sparge::core::printable(e.what()) << "\n";
    return 1;
  }
  setJobTransport(transport.get());
  bool escaped = false;
  const int code = runCommand(argc, argv, transport->rank(), escaped);
  if (escaped && transport->size() > 1) {
    // A rank that failed outside a job may leave the others waiting for it: end them all.
    std::fflush(stdout);
    transport->abort(code);
  }
  return code;
}
