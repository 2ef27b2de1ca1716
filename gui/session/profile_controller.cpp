#include "profile_controller.h"

#include <algorithm>

#include "sparge/core/error.h"
#include "sparge/profiler/profile_entry.h"

namespace sparge::gui {

namespace {
TimingSummary summarize(const prof::TimingReport& rep, const core::RunConfig& config, int runs,
                        int warmupMs) {
  TimingSummary t;
  t.valid = true;
  t.runs = runs;
  t.warmupRuns = rep.warmupRuns;
  t.warmupMs = warmupMs;
  t.clock = prof::toString(rep.source);
  t.clockDetail = rep.clock;
  t.device = rep.device.name;
  t.numerics = std::string(core::toString(config.numerics)) + ", " + config.geometry.label();
  for (const auto& st : rep.stages) {
    std::string name = prof::toString(st.stage);
    if (st.source != rep.source) name += std::string(" (") + prof::toString(st.source) + ")";
    t.stages.push_back(StageSpan{name, st.ms.min, st.ms.median, st.ms.max});
  }
  const prof::DerivedFigures& d = rep.derived;
  t.sparseMs = d.sparseMs.value_or(0);
  t.denseMs = d.denseMs.value_or(0);
  t.cudnnMs = d.cudnnMs.value_or(0);
  t.speedup = d.speedup.value_or(0);
  t.speedupBaseline = d.speedupBaseline;
  t.denseTops = d.denseEquivalentTops.value_or(0);
  t.executedTops = d.executedTops.value_or(0);
  t.note = rep.sourceReason;
  t.notes = rep.notes;
  if (!d.note.empty()) t.notes.push_back(d.note);
  return t;
}
}  // namespace

void ProfileController::reset(ResetScope scope) {
  if (scope == ResetScope::Capture) data_.reset();
}

void ProfileController::profile(int runs, int warmupMs) {
  if (!core_.capture.loaded) return;
  runs = std::clamp(runs, 1, kMaxRuns);
  warmupMs = std::clamp(warmupMs, 0, kMaxWarmupMs);
  auto backend = core_.backend;
  uint64_t epoch = core_.epoch;
  core::RunConfig config = runs_.config();
  std::string entry = core_.capture.entryName;
  std::string what = "timing " + std::to_string(runs) + " runs + dense baselines";
  if (warmupMs > 0) what += " after " + std::to_string(warmupMs) + " ms of warm-up";
  core_.progress = Progress{true, what, 0, 0, 0};
  auto job = [this, backend, epoch, config, runs, warmupMs, entry](const core::CancelFlag& cancel) {
    core::Engine& engine = backend->ensureEngine();
    if (!backend->entry) throw Error("profile", "no entry loaded");
    prof::ProfilerOptions po;  // profileEntry marks its warm-up runs itself
    po.useCupti = po.useCudaEvents = engine.isGpu();
    prof::Profiler profiler(po);
    prof::ProfileRequest req;
    req.entry = entry;
    req.config = config;
    req.repeat = runs;
    req.warmupMs = warmupMs;
    req.cancel = &cancel;
    req.progress = [this, epoch](int done, int total) {
      core_.post([this, epoch, done, total] {
        if (epoch != core_.epoch || !core_.progress.active) return;
        core_.progress.done = done;
        core_.progress.total = total;
        core_.progress.fraction = total > 0 ? double(done) / double(total) : 0;
      });
    };
    prof::profileEntry(engine, profiler, req);
    prof::TimingReport rep = profiler.report();
    auto data = std::make_shared<ProfileData>();
    data->summary = summarize(rep, config, runs, warmupMs);
    data->kernels = kernelRows(rep);
    data->timeline = runTimeline(rep);
    core_.post([this, data, epoch] {
      core_.progress = Progress{};
      if (epoch == core_.epoch) data_ = data;
    });
  };
  core_.submit(JobKind::Profile, job);
}

}  // namespace sparge::gui
