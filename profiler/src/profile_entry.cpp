// profileEntry: sparse rounds with our dense kernels and the engine's dense baselines beside them.
#include "sparge/profiler/profile_entry.h"

#include "sparge/core/result.h"
#include "sparge/profiler/warm_up.h"

namespace sparge::prof {

namespace {

// Engine runs of one round: the sparse run and its baselines.
int runsPerRound(const ProfileRequest& request, int availableBaselines) {
  return 1 + (request.denseBaseline ? 1 : 0) + (request.engineBaselines ? availableBaselines : 0);
}

struct Round {
  core::Engine& engine;
  Profiler& profiler;
  const ProfileRequest& request;
  std::vector<core::DenseBaseline> baselines;  // available ones only
  core::RunConfig denseConfig;
  core::RunOptions options;
  TimingSource engineClock = TimingSource::WallClock;
  int done = 0, total = 0;

  void step() {
    ++done;
    if (request.progress) request.progress(done, total);
  }
  RunInfo info(const core::RunConfig& config, const std::string& suffix) const {
    return makeRunInfo(request.entry + suffix, config, request.heads, engine.name());
  }
  // Under CUPTI the kernels time every run; otherwise the engine's clock gives the baseline stages.
  bool recordEngineTimes() const { return profiler.source() != TimingSource::Cupti; }

  void sparse(bool warmup) {
    ProfileScope scope(profiler, info(request.config, ""), warmup);
    const core::EntryResult r = engine.run(request.config, options);
    scope.end(&r);
    engineClock = parseTimingSource(r.times.clock).value_or(TimingSource::WallClock);
    step();
  }
  void dense(bool warmup) {
    ProfileScope scope(profiler, info(denseConfig, " (dense)"), warmup);
    const core::EntryResult r = engine.run(denseConfig, options);
    scope.end();
    if (recordEngineTimes()) {
      const TimingSource src = parseTimingSource(r.times.clock).value_or(TimingSource::WallClock);
      profiler.record(Stage::Dense, r.times.sparseMs, src);
      if (r.times.quantizeMs > 0) profiler.record(Stage::Quantize, r.times.quantizeMs, src);
    }
    step();
  }
  void all(bool warmup) {
    sparse(warmup);
    if (request.denseBaseline) dense(warmup);
    for (const core::DenseBaseline& b : baselines) baseline(b, warmup);
  }
  void baseline(const core::DenseBaseline& b, bool warmup) {
    RunInfo runInfo = info(request.config, " (" + b.name + ")");
    runInfo.params = b.label;
    runInfo.otherKernels = Stage::Cudnn;
    ProfileScope scope(profiler, runInfo, warmup);
    const double ms = engine.runDenseBaseline(b.name);
    scope.end();
    if (recordEngineTimes()) profiler.record(Stage::Cudnn, ms, engineClock);
    step();
  }
};

std::vector<core::DenseBaseline> availableBaselines(core::Engine& engine, Profiler& profiler,
                                                    const ProfileRequest& request) {
  std::vector<core::DenseBaseline> out;
  if (!request.engineBaselines) return out;
  // A baseline runs every head of the entry, so it is no comparison for a subset of them.
  const auto entry = engine.entry();
  const bool subset = entry && !request.heads.empty() && int64_t(request.heads.size()) < entry->info.headsQ;
  for (const core::DenseBaseline& b : engine.denseBaselines()) {
    if (subset) {
      profiler.addNote(b.label + " not timed: it runs every head, and this profile runs a subset of them");
      continue;
    }
    if (b.available)
      out.push_back(b);
    else
      profiler.addNote(b.label + " not timed: " + b.reason);
  }
  return out;
}

}  // namespace

int profileRunCount(const ProfileRequest& request, int availableBaselines) {
  return 1 + (request.warmup + request.repeat) * runsPerRound(request, availableBaselines);
}

core::EntryResult profileEntry(core::Engine& engine, Profiler& profiler, const ProfileRequest& request) {
  Round round{engine, profiler, request, availableBaselines(engine, profiler, request), request.config, {}};
  round.denseConfig.perHead.clear();
  round.denseConfig.defaults.dense = true;
  round.options.heads = request.heads;
  round.options.cancel = request.cancel;
  round.total = profileRunCount(request, int(round.baselines.size()));

  core::RunOptions withErrors = round.options;
  withErrors.computeError = true;
  core::EntryResult result;
  {
    // A warm-up run of its own, so that its kernels (the reference among them) are attributed and left out.
    ProfileScope scope(profiler, round.info(request.config, " (with error metrics)"), true);
    result = engine.run(request.config, withErrors);
    scope.end();
  }
  round.engineClock = parseTimingSource(result.times.clock).value_or(TimingSource::WallClock);
  round.step();

  // Timed runs are the deployed call alone: the error metrics (and the extra runs they need for quantized
  // numerics) would otherwise land in the sparse and dense stages.
  round.options.computeError = false;
  // Engine runs return once their results are in, so the wall clock counts the GPU's time too.
  // A warm-up by time runs rounds beyond `warmup`: each extends the progress total as it starts, so that
  // the progress shown never passes its total.
  const int perRound = runsPerRound(request, int(round.baselines.size()));
  warmUp(request.warmup, request.warmupMs, [&](int i) {
    if (i >= request.warmup) round.total += perRound;
    round.all(true);
  });
  for (int i = 0; i < request.repeat; ++i) round.all(false);
  return result;
}

}  // namespace sparge::prof
