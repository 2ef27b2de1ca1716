// sparge: the headless command line of Sparge Studio (info, run, synth, tune, bench, annotate, compare).
#include <cstdio>
#include <iostream>
#include <memory>

#include "command_line.h"
#include "job_support.h"
#include "sparge/core/names.h"
#include "sparge/kernels/engine_factory.h"

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
  sparge::scaleout::setJobTransport(transport.get());
  bool escaped = false;
  const int code = runCommand(argc, argv, transport->rank(), escaped);
  if (escaped && transport->size() > 1) {
    // A rank that failed outside a job may leave the others waiting for it: end them all.
    std::fflush(stdout);
    transport->abort(code);
  }
  return code;
}
