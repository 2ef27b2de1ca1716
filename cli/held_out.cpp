// Held-out validation after tuning: every entry of the held-out captures that the parameter file has a group
// for runs with the file's parameters (as `sparge run --params --params-any-capture` runs it), and each
// head's L1 is judged against the file's deployed budget.
#include "held_out.h"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>

#include "format.h"
#include "guards.h"
#include "sparge/core/capture.h"
#include "sparge/core/memory_guard.h"
#include "sparge/core/names.h"
#include "sparge/core/params_io.h"
#include "sparge/kernels/engine_factory.h"

namespace sparge::cli {
namespace {

// Runs the held-out entries of one capture; returns how many ran.
int validateCapture(core::ParamsFile& file, const std::string& paramsPath, const std::string& capture,
                    core::Engine& engine) {
  core::CaptureReader reader(capture);
  int runs = 0;
  for (const core::EntryInfo& info : reader.entries()) {
    const core::ParamsGroup* g = core::findGroup(file, info.name, info.layer);
    if (!g) {
      std::printf("  %s:%s: no group in the parameter file, skipped\n", core::printable(capture).c_str(),
                  core::printable(info.name).c_str());
      continue;
    }
    core::checkRunMemory(capture, info, file.geometry, 0);
    auto data = std::make_shared<core::EntryData>(core::loadEntry(reader, info.name));
    if (core::identityOf(*g, data->digest) == core::ParamsIdentity::Matches) {
      std::printf("  %s:%s: group \"%s\" was tuned on it (not held out), skipped\n",
                  core::printable(capture).c_str(), core::printable(info.name).c_str(),
                  core::printable(g->name).c_str());
      continue;
    }
    core::RunConfig config;
    core::applyParams(file, paramsPath, info, config);
    engine.setEntry(data);
    core::addHeldOut(file, engine.run(config, core::RunOptions{}), capture);
    ++runs;
  }
  return runs;
}

void printHeldOut(const core::ParamsFile& file) {
  int64_t heads = 0, violating = 0;
  for (const core::ParamsGroup& g : file.groups) {
    Table t({"head", "numerics", "L1 tuned", "held-out inputs", "over budget", "max L1", "on"});
    bool any = false;
    for (const core::ParamsHead& h : g.heads) {
      if (!h.heldOut) continue;
      any = true;
      ++heads;
      violating += h.heldOut->violations > 0 ? 1 : 0;
      t.row({std::to_string(h.head) + (h.heldOut->violations > 0 ? " (over!)" : ""),
             core::toString(core::numericsOf(file, h)), fmtNum(h.l1, 5), std::to_string(h.heldOut->inputs),
             std::to_string(h.heldOut->violations), fmtNum(h.heldOut->maxL1, 5),
             core::printable(h.heldOut->maxL1Entry)});
    }
    if (!any) continue;
    std::printf("\n%s  (held out)\n", core::printable(g.name).c_str());
    t.print(std::cout);
  }
  std::printf("\nheld-out: %lld of %lld heads exceed the budget L1 %g on some input they were not tuned on\n",
              (long long)violating, (long long)heads, file.l2);
}

}  // namespace

int validateHeldOut(const std::string& paramsPath, const std::vector<std::string>& captures,
                    core::EngineChoice choice, int threads) {
  core::ParamsFile file = core::readParams(paramsPath);
  engines::EngineSelection selection = engines::makeEngine(choice, threads);
  if (!selection.message.empty()) std::fprintf(stderr, "note: %s\n", selection.message.c_str());
  std::printf(
      "\nheld-out validation with %s: the parameters of %s on %zu capture%s, budget L1 %g (deployed)\n",
      selection.engine->name().c_str(), core::printable(paramsPath).c_str(), captures.size(),
      captures.size() == 1 ? "" : "s", file.l2);
  int runs = 0;
  for (const std::string& capture : captures)
    runs += validateCapture(file, paramsPath, capture, *selection.engine);
  if (runs == 0) {
    std::printf("held-out: no entry of the given captures was held out; %s unchanged\n",
                core::printable(paramsPath).c_str());
    return 0;
  }
  printHeldOut(file);
  core::writeHeldOut(paramsPath, file);
  std::printf("held-out figures written to %s\n", core::printable(paramsPath).c_str());
  return 0;
}

}  // namespace sparge::cli
