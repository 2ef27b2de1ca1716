// One way to profile an entry, shared by `sparge run --repeat` and the GUI's timings view: sparse runs, each
// followed by a dense run of our own kernels and a run of every dense baseline the engine offers (cuDNN).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sparge/core/engine.h"
#include "sparge/profiler/profiler.h"

namespace sparge::prof {

struct ProfileRequest {
  std::string entry;  // the entry's name, for run labels
  core::RunConfig config;
  std::vector<int64_t> heads;   // query heads (every batch item); empty = every head
  int warmup = 1;               // rounds measured but left out of the report, at least
  // ... and such rounds until at least this many milliseconds of them have run (`sparge run --warmup-ms`), so
  // that the profiled rounds find the GPU in the state sustained load leaves it in; each round beyond
  // `warmup` adds its runs to the progress total as it starts. 0: by count alone.
  int warmupMs = 0;
  int repeat = 10;              // profiled rounds
  bool denseBaseline = true;    // time our dense kernels (every valid block, no PV skip) in each round
  bool engineBaselines = true;  // time the engine's dense baselines (Engine::denseBaselines) in each round
  const core::CancelFlag* cancel = nullptr;
  // Called on the calling thread after each engine run with (runs done, runs in total).
  std::function<void(int done, int total)> progress;
};

// Engine runs profileEntry makes for `request` (the progress total; with warmupMs, at least this many).
int profileRunCount(const ProfileRequest& request, int availableBaselines);

// First one run with the error metrics, marked warm-up (it also fills the engine's caches: reference,
// statistics); then warm-up rounds (warmup of them, or more for warmupMs), then repeat rounds, each of
//   1. the sparse run, as deployed (prediction + quantization + attention; no error metrics),
//   2. with denseBaseline, the same entry with every head dense (labelled "(dense)"),
//   3. with engineBaselines, each available baseline (labelled "(cudnn)"; its kernels count as that stage).
// Every run is a profiler run of its own, so the report's figures separate them: the sparse figure over the
// sparse runs, the speedup over the fastest dense measured (DerivedFigures). Baselines the engine cannot run
// are named with the reason in the report's notes. Returns the first run's result (masks, errors). Any
// profiler works; call profiler.report() afterwards. Throws what the engine throws (core::Cancelled on
// cancel; the open run is closed).
core::EntryResult profileEntry(core::Engine& engine, Profiler& profiler, const ProfileRequest& request);

}  // namespace sparge::prof
