// sparge: the headless command line of Sparge Studio (info, run, synth, tune, bench).
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "sparge/core/data_dir.h"
#include "sparge/core/engine.h"
#include "sparge/core/error.h"
#include "sparge/core/names.h"

namespace sparge::cli {

std::string defaultCapturePath() {
  return core::sampleCapturePath().string();
}

}  // namespace sparge::cli

int main(int argc, char** argv) {
  using namespace sparge::cli;
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
    app.exit(e);
    return 2;  // usage error
  }
  try {
    return action ? action() : 2;
  } catch (const sparge::core::Cancelled&) {
    std::cerr << "sparge: cancelled\n";
    return 130;
  } catch (const std::exception& e) {
    std::cerr << "sparge: error: " << sparge::core::printable(e.what())
              << "\n";  // names may hold control bytes
    return 1;
  }
}
