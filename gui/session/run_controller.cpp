#include "run_controller.h"

#include <algorithm>
#include <chrono>

#include "sparge/core/error.h"
#include "sysinfo.h"

namespace sparge::gui {

using Clock = std::chrono::steady_clock;

bool RunController::hasOverride(int64_t head) const {
  return head >= 0 && head < static_cast<int64_t>(config_.perHead.size()) &&
         !(config_.perHead[head] == config_.defaults);
}

int RunController::overrideCount() const {
  int n = 0;
  for (size_t h = 0; h < config_.perHead.size(); ++h) n += hasOverride(static_cast<int64_t>(h));
  return n;
}

bool sameConfig(const core::RunConfig& a, const core::RunConfig& b) {
  return a.method == b.method && a.geometry == b.geometry && a.numerics == b.numerics &&
         a.smoothK == b.smoothK && a.sink == b.sink && a.diagonal == b.diagonal && a.defaults == b.defaults &&
         a.perHead == b.perHead && a.perHeadNumerics == b.perHeadNumerics;
}

void setExactHeads(core::RunConfig& c, const std::vector<uint8_t>* exact) {
  c.perHeadNumerics.clear();
  if (!exact || c.numerics == core::Numerics::None) return;
  if (std::find(exact->begin(), exact->end(), uint8_t(1)) == exact->end()) return;
  c.perHeadNumerics.assign(exact->size(), c.numerics);
  for (size_t h = 0; h < exact->size(); ++h)
    if ((*exact)[h]) c.perHeadNumerics[h] = core::Numerics::None;
}

std::vector<uint8_t> exactHeadsOf(const core::RunConfig& c) {
  std::vector<uint8_t> exact(c.perHeadNumerics.size(), 0);
  for (size_t h = 0; h < exact.size(); ++h)
    exact[h] = c.numerics != core::Numerics::None && c.perHeadNumerics[h] == core::Numerics::None;
  return exact;
}

void RunController::fitPerHead(core::RunConfig& config) const {
  // Overrides survive an entry change when the head count matches (layers of one model); otherwise
  // they cannot mean anything for the new entry and are dropped.
  int64_t n = core_.capture.headsQ();
  if (core_.capture.loaded && !config.perHead.empty() && static_cast<int64_t>(config.perHead.size()) != n)
    config.perHead.clear();
  if (core_.capture.loaded && !config.perHeadNumerics.empty() &&
      static_cast<int64_t>(config.perHeadNumerics.size()) != n)
    config.perHeadNumerics.clear();
}

void RunController::applyConfig(const core::RunConfig& requested) {
  core::RunConfig next = requested;
  // Other numerics for the run: the heads that ran exact stay exact, the others take the new numerics.
  if (next.numerics != config_.numerics && next.perHeadNumerics == config_.perHeadNumerics) {
    const std::vector<uint8_t> exact = exactHeadsOf(config_);
    setExactHeads(next, &exact);
  }
  fitPerHead(next);
  bool everyHead = next.method != config_.method || !(next.geometry == config_.geometry) ||
                   next.numerics != config_.numerics || next.perHeadNumerics != config_.perHeadNumerics ||
                   next.smoothK != config_.smoothK || next.sink != config_.sink ||
                   next.diagonal != config_.diagonal;
  std::set<int64_t> changed;
  for (int64_t h = 0; !everyHead && h < core_.capture.headsQ(); ++h) {
    if (!(next.forHead(h) == config_.forHead(h))) changed.insert(h);
  }
  if (!sameConfig(next, config_)) ++configGeneration_;
  config_ = std::move(next);
  if (everyHead) {
    schedule({}, true);
  } else if (!changed.empty()) {
    schedule(changed, false);
  }
}

void RunController::setParams(const core::HeadParams& p, ApplyTarget target) {
  if (target == ApplyTarget::SelectedHead && core_.capture.loaded) {
    setHeadParams(core_.capture.selected.head, p);
    return;
  }
  core::validate(p, "parameters", config_.method);
  core::RunConfig next = config_;
  next.defaults = p;
  next.perHead.clear();
  applyConfig(next);
}

void RunController::setHeadParams(int64_t head, const core::HeadParams& p) {
  core::validate(p, "parameters of head " + std::to_string(head), config_.method);
  if (head < 0 || head >= core_.capture.headsQ()) return;
  core::RunConfig next = config_;
  if (next.perHead.empty()) next.perHead.assign(static_cast<size_t>(core_.capture.headsQ()), next.defaults);
  next.perHead[head] = p;
  applyConfig(next);
}

void RunController::clearOverride(int64_t head) {
  if (hasOverride(head)) setHeadParams(head, config_.defaults);
}

void RunController::clearAllOverrides() {
  core::RunConfig next = config_;
  next.perHead.clear();
  applyConfig(next);
}

void RunController::dropOverridesEqualTo(const std::vector<core::HeadParams>& set) {
  if (config_.perHead == set && !set.empty()) {
    config_.perHead.clear();
    ++configGeneration_;
  }
}

void RunController::rerun() {
  if (core_.capture.loaded) schedule({}, true);
}

void RunController::reset(ResetScope scope) {
  owedHeads_.clear();
  owedAll_ = false;
  if (scope == ResetScope::Capture) {
    result_.reset();
    ++resultGeneration_;
    ++mapsGeneration_;
  }
}

void RunController::onEntryLoaded(const std::vector<core::HeadParams>* stored,
                                  const std::vector<uint8_t>* exact) {
  fitPerHead(config_);
  if (stored && static_cast<int64_t>(stored->size()) == core_.capture.headsQ()) config_.perHead = *stored;
  setExactHeads(config_,
                exact && static_cast<int64_t>(exact->size()) == core_.capture.headsQ() ? exact : nullptr);
  ++configGeneration_;
  schedule({}, true);
}

void RunController::showResult(std::shared_ptr<const core::EntryResult> result) {
  result_ = std::move(result);
  ++resultGeneration_;
  ++mapsGeneration_;
  shownRunId_ = 0;
}

void RunController::schedule(const std::set<int64_t>& heads, bool all) {
  if (!core_.capture.loaded) return;  // the load job schedules a full run when it lands
  owedAll_ = owedAll_ || all;
  owedHeads_.insert(heads.begin(), heads.end());
  if (!owedAll_ && static_cast<int64_t>(owedHeads_.size()) >= core_.capture.headsQ()) owedAll_ = true;

  core::RunConfig config = config_;
  std::vector<int64_t> headList;
  if (!owedAll_) headList.assign(owedHeads_.begin(), owedHeads_.end());
  auto backend = core_.backend;
  uint64_t epoch = core_.epoch;
  // The id is known only after submit; the job reads it through a shared cell.
  auto idCell = std::make_shared<std::atomic<uint64_t>>(0);
  LastRun stamps;
  auto job = [this, backend, config, headList, epoch, idCell,
              stamps](const core::CancelFlag& cancel) mutable {
    stamps.started = Clock::now();
    core::Engine& engine = backend->ensureEngine();
    if (!backend->entry) throw Error("run", "no entry loaded");
    const auto t0 = Clock::now();
    auto deliver = [&](std::shared_ptr<const core::EntryResult> result) {
      stamps.finished = Clock::now();
      const double ms = std::chrono::duration<double, std::milli>(stamps.finished - t0).count();
      int64_t used = 0, total = 0;
      if (engine.isGpu()) gpuMemory(&used, &total);
      core_.post([this, result, epoch, runId = idCell->load(), ms, used, total, stamps] {
        core_.engine.gpuUsed = used;
        core_.engine.gpuTotal = total;
        apply(result, epoch, runId, ms, stamps);
      });
    };
    core::RunOptions options;
    options.heads = headList;
    options.computeError = true;
    options.cancel = &cancel;
    // Quantized numerics: the deployed figures are shown as soon as they exist, the sparsity part of the
    // error split when its pass lands; a newer change waiting for the worker takes the place of that pass.
    options.onDeployed = [&](std::shared_ptr<const core::EntryResult> early) {
      deliver(std::move(early));
      return !core_.pending(JobKind::Run);
    };
    core::EntryResult result = engine.run(config, options);
    if (!result.heads.empty()) deliver(std::make_shared<const core::EntryResult>(std::move(result)));
  };
  // A running job is cancelled for a newer one only when runs are slow: while runs take under
  // kFinishRunsBelowMs the running one finishes (its result is merged and shown), so a slider drag
  // keeps updating the views; the newest pending change still replaces older pending ones.
  uint64_t id =
      core_.submit(JobKind::Run, job, cancelRunningOnChange_ && lastRun_.wallMs >= kFinishRunsBelowMs);
  idCell->store(id);
  latestRunId_ = id;
}

void RunController::apply(std::shared_ptr<const core::EntryResult> r, uint64_t epoch, uint64_t runId,
                          double wallMs, LastRun stamps) {
  if (epoch != core_.epoch) return;
  if (runId == latestRunId_) {
    owedHeads_.clear();
    owedAll_ = false;
  }
  stamps.times = r->times;
  stamps.wallMs = wallMs;
  stamps.heads = static_cast<int64_t>(r->heads.size());
  stamps.applied = Clock::now();
  lastRun_ = stamps;
  for (const auto& w : r->warnings) core_.messages.addWarning(w);
  const bool splitLanded = result_ && result_->splitPending && runId == shownRunId_;
  result_ = merge(std::move(r));
  ++resultGeneration_;
  if (!splitLanded) ++mapsGeneration_;
  shownRunId_ = runId;
}

std::shared_ptr<const core::EntryResult> RunController::merge(
    std::shared_ptr<const core::EntryResult> r) const {
  const int64_t expected = r->info.batch * r->info.headsQ;
  bool complete = static_cast<int64_t>(r->heads.size()) == expected;
  auto sameShape = [&](const core::EntryResult& a) {
    return a.info.name == r->info.name && a.config.geometry == r->config.geometry &&
           a.config.numerics == r->config.numerics && a.config.smoothK == r->config.smoothK &&
           a.config.sink == r->config.sink && a.config.diagonal == r->config.diagonal;
  };
  // A partial result of another geometry or numerics cannot be merged; it is shown alone until the
  // full one lands.
  if (complete || !result_ || !sameShape(*result_)) return r;
  auto merged = std::make_shared<core::EntryResult>(*result_);
  for (const auto& h : r->heads) {
    auto it = std::find_if(merged->heads.begin(), merged->heads.end(),
                           [&](const core::HeadResult& m) { return m.batch == h.batch && m.head == h.head; });
    if (it != merged->heads.end()) {
      *it = h;
    } else {
      merged->heads.push_back(h);
    }
  }
  std::sort(merged->heads.begin(), merged->heads.end(), [](const auto& a, const auto& b) {
    return a.batch != b.batch ? a.batch < b.batch : a.head < b.head;
  });
  merged->times = r->times;
  merged->engine = r->engine;
  merged->config = r->config;  // the latest run's settings; per-head values live in each HeadResult
  merged->splitPending = r->splitPending;
  core::aggregate(*merged);
  return merged;
}

}  // namespace sparge::gui
