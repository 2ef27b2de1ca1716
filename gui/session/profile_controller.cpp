#include "profile_controller.h"

#include <algorithm>
#include <functional>

#include "sparge/core/error.h"
#include "sparge/profiler/profiler.h"

namespace sparge::gui {

namespace {
// `runs` profiled runs of `config`, `step()` after each. One profiler at a time: CUPTI's activity
// callbacks are process-wide, so a second live profiler would fall back to CUDA events.
prof::TimingReport timeRuns(core::Engine& engine, const std::string& entry, const core::RunConfig& config,
                            int runs, const core::RunOptions& opt, const std::function<void()>& step) {
  prof::Profiler profiler;
  for (int i = 0; i < runs; ++i) {
    profiler.begin(prof::makeRunInfo(entry, config, {}, engine.name()));
    core::EntryResult r = engine.run(config, opt);
    profiler.end(&r);
    step();
  }
  return profiler.report();
}

TimingSummary summarize(const prof::TimingReport& rep, const prof::TimingReport& dense,
                        const core::RunConfig& config, int runs) {
  TimingSummary t;
  t.valid = true;
  t.runs = runs;
  t.clock = prof::toString(rep.source);
  t.clockDetail = rep.clock;
  t.device = rep.device.name;
  t.numerics = std::string(core::toString(config.numerics)) + ", " + config.geometry.label();
  for (const auto& st : rep.stages) {
    std::string name = prof::toString(st.stage);
    if (st.source != rep.source) name += std::string(" (") + prof::toString(st.source) + ")";
    t.stages.push_back(StageSpan{name, st.ms.min, st.ms.median, st.ms.max});
  }
  t.sparseMs = rep.derived.sparseMs.value_or(0);
  t.denseMs = dense.derived.sparseMs.value_or(0);
  t.denseTops = rep.derived.denseEquivalentTops.value_or(0);
  t.executedTops = rep.derived.executedTops.value_or(0);
  t.note = rep.sourceReason;
  return t;
}
}  // namespace

void ProfileController::reset(ResetScope scope) {
  if (scope == ResetScope::Capture) data_.reset();
}

void ProfileController::profile(int runs) {
  if (!core_.capture.loaded) return;
  runs = std::clamp(runs, 1, 100);
  auto backend = core_.backend;
  uint64_t epoch = core_.epoch;
  core::RunConfig config = runs_.config();
  std::string entry = core_.capture.entryName;
  const int steps = 2 * runs + 1;
  core_.progress = Progress{true, "timing " + std::to_string(runs) + " runs + dense", 0, steps, 0};
  auto job = [this, backend, epoch, config, runs, entry, steps](const core::CancelFlag& cancel) {
    core::Engine& engine = backend->ensureEngine();
    if (!backend->entry) throw Error("profile", "no entry loaded");
    core::RunOptions opt;
    opt.cancel = &cancel;
    int done = 0;
    auto step = [&] {
      ++done;
      core_.post([this, epoch, done, steps] {
        if (epoch != core_.epoch) return;
        core_.progress.done = done;
        core_.progress.fraction = double(done) / double(steps);
      });
    };
    engine.run(config, opt);  // warm-up: fills the dense-reference cache so it is not timed
    step();
    core::RunConfig dense = config;
    dense.defaults.dense = true;
    dense.perHead.clear();
    prof::TimingReport rep = timeRuns(engine, entry, config, runs, opt, step);
    prof::TimingReport drep = timeRuns(engine, entry, dense, runs, opt, step);
    auto data = std::make_shared<ProfileData>();
    data->summary = summarize(rep, drep, config, runs);
    data->kernels = kernelRows(rep, "sparse");
    for (auto& k : kernelRows(drep, "dense baseline")) data->kernels.push_back(std::move(k));
    data->timeline = runTimeline(rep);
    core_.post([this, data, epoch] {
      core_.progress = Progress{};
      if (epoch == core_.epoch) data_ = data;
    });
  };
  core_.submit(JobKind::Profile, job);
}

}  // namespace sparge::gui
