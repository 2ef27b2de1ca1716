#include "tune_controller.h"

#include <algorithm>
#include <cstdio>

#include "sparge/core/error.h"

namespace sparge::gui {

namespace {
// Tunes every entry of the open capture; the engine is moved back to the selected entry afterwards.
core::TuneResult tuneAllEntries(Backend& backend, const std::vector<core::EntryInfo>& entries,
                                const core::TuneOptions& opt, const core::TuneCallbacks& cb) {
  std::vector<core::TuneInput> inputs;
  for (const auto& e : entries) {
    core::TuneInput in;
    in.name = e.name;
    in.layer = e.layer;
    in.headsQ = e.headsQ;
    in.load = [&backend, name = e.name]() {
      return std::make_shared<const core::EntryData>(core::loadEntry(*backend.reader, name));
    };
    inputs.push_back(std::move(in));
  }
  core::Engine& engine = backend.ensureEngine();
  struct Restore {
    Backend& b;
    // The tuner moved the engine through the other entries. A failure here surfaces at the next run.
    ~Restore() {
      try {
        b.engine->setEntry(b.entry);
      } catch (...) {
      }
    }
  } restore{backend};
  return core::tune(engine, core::makeGroups(inputs, false), opt, cb);
}

std::string tuneLabel(TuneScope scope, const CaptureModel& capture) {
  switch (scope) {
    case TuneScope::SelectedHead:
      return "tuning head " + std::to_string(capture.selected.head);
    case TuneScope::Entry:
      return "tuning " + capture.entryName;
    case TuneScope::AllEntries:
      break;
  }
  return "tuning all entries";
}
}  // namespace

core::TuneOptions tuneOptionsFor(const core::RunConfig& config, const Budget& budget) {
  core::TuneOptions opt;
  opt.l1 = budget.l1;
  opt.l2 = budget.l2;
  opt.mode = config.defaults.mode;
  opt.method = config.method;  // another method's knob is tuned; its other parameters stay the defaults'
  opt.methodBase = config.defaults;
  opt.geometry = config.geometry;
  opt.numerics = config.numerics;  // the budget bounds the L1 the user sees: the deployed one
  opt.smoothK = config.smoothK;
  opt.sink = config.sink;
  opt.diagonal = config.diagonal;
  return opt;
}

const TuneRow* TuneController::row(const std::string& entry, int64_t head) const {
  for (const auto& r : rows_) {
    if (r.entry == entry && r.head == head) return &r;
  }
  return nullptr;
}

const std::vector<core::HeadParams>* TuneController::storedParams(const std::string& entry) const {
  auto it = stored_.find(entry);
  return it == stored_.end() ? nullptr : &it->second;
}

void TuneController::store(const std::string& entry, std::vector<core::HeadParams> params,
                           std::vector<uint8_t> exact) {
  stored_[entry] = std::move(params);
  if (exact.empty())
    storedExact_.erase(entry);
  else
    storedExact_[entry] = std::move(exact);
  ++storedGeneration_;
}

const std::vector<uint8_t>* TuneController::storedExact(const std::string& entry) const {
  auto it = storedExact_.find(entry);
  return it == storedExact_.end() ? nullptr : &it->second;
}

void TuneController::setBudget(const Budget& b) {
  if (b == budget_) return;
  budget_ = b;
  if (followBudget_) submit(TuneScope::SelectedHead, true);
}

void TuneController::setFollowBudget(bool on) {
  followBudget_ = on;
  if (on) submit(TuneScope::SelectedHead, true);
}

void TuneController::autoTune(TuneScope scope) {
  submit(scope, false);
}

void TuneController::onSelectionChanged() {
  if (followBudget_) submit(TuneScope::SelectedHead, true);
}

void TuneController::reset(ResetScope scope) {
  if (scope != ResetScope::Capture) return;
  rows_.clear();
  stored_.clear();
  storedExact_.clear();
  ++storedGeneration_;
  lastTune_.reset();
}

void TuneController::submit(TuneScope scope, bool live) {
  if (!core_.capture.loaded) return;
  core::TuneOptions opt = tuneOptionsFor(runs_.config(), budget_);
  if (scope == TuneScope::SelectedHead) opt.heads = {core_.capture.selected.head};
  try {
    opt.validate("auto-tune");
  } catch (const std::exception& e) {
    if (!live) core_.messages.pushError(e.what());
    return;
  }
  auto backend = core_.backend;
  uint64_t epoch = core_.epoch;
  std::vector<core::EntryInfo> entries = core_.capture.entries;
  std::string label = tuneLabel(scope, core_.capture);
  core_.progress = Progress{true, label, 0, 0, 0};
  uint64_t id = ++latestTuneId_;  // counted here, not by the worker: a fast job may end before submit returns
  auto job = [this, backend, epoch, entries, opt, scope, label, live, id](const core::CancelFlag& cancel) {
    core::TuneCallbacks cb;
    cb.cancel = &cancel;
    cb.progress = [this, epoch, label, id](const core::TuneProgress& p) {
      core_.post([this, p, epoch, label, id] {
        // A replaced or cancelled tune must not bring the bar back.
        if (epoch != core_.epoch || id != latestTuneId_ || !core_.progress.active) return;
        char eta[64] = "";
        if (p.etaSeconds >= 0) std::snprintf(eta, sizeof eta, ", ETA %.0f s", p.etaSeconds);
        core_.progress = Progress{true, label + " (" + core::toString(p.phase) + eta + ")", p.unitsDone,
                                  p.unitsTotal, p.fraction};
      });
    };
    cb.headFinished = [this, epoch](const core::TunedGroup& g, const core::TunedHead& h) {
      std::string name = g.entries.empty() ? g.name : g.entries.front();
      core_.post([this, name, h, epoch] { onHeadTuned(name, h, epoch); });
    };
    if (!backend->entry) throw Error("auto-tune", "no entry loaded");
    core::TuneResult r = scope == TuneScope::AllEntries && backend->reader
                             ? tuneAllEntries(*backend, entries, opt, cb)
                             : core::tuneEntry(backend->ensureEngine(), backend->entry, opt, cb);
    auto shared = std::make_shared<const core::TuneResult>(std::move(r));
    core_.post([this, shared, epoch, live, id] { onFinished(shared, epoch, live, id); });
  };
  core_.submit(JobKind::Tune, job, true);
}

void TuneController::onFinished(std::shared_ptr<const core::TuneResult> result, uint64_t epoch, bool live,
                                uint64_t id) {
  // A live (follow-budget) tune replaced by a newer one ends cancelled: it leaves no trace and the bar
  // stays for its successor.
  bool latest = id == latestTuneId_;
  if (latest) core_.progress = Progress{};
  if (epoch != core_.epoch) return;
  // Heads finished before a cancel have their parameters set; their re-runs, dropped by the cancel, are
  // still owed.
  if (runs_.owesRuns()) runs_.runOwed();
  if (live && result->cancelled && !latest) return;
  lastTune_ = result;
  char msg[160];
  std::snprintf(msg, sizeof msg, "auto-tune: %lld heads in %.1f s (%lld engine runs)%s",
                static_cast<long long>(result->headsFinished()), result->elapsedSeconds,
                static_cast<long long>(result->probes), result->cancelled ? ", cancelled" : "");
  core_.messages.addNotice(msg);
}

void TuneController::onHeadTuned(const std::string& entry, const core::TunedHead& h, uint64_t epoch) {
  if (epoch != core_.epoch) return;
  TuneRow row{entry,      h.head,           h.params,
              h.isSparse, h.stage1Sparsity, h.totalSparsity,
              h.l1,       h.probes,         core::describe(h.decision)};
  row.l1Sparse = h.l1Sparse;
  row.l1Quant = h.l1Quant;
  auto it = std::find_if(rows_.begin(), rows_.end(),
                         [&](const TuneRow& r) { return r.entry == entry && r.head == h.head; });
  if (it != rows_.end()) {
    *it = row;
  } else {
    // Kept ordered by entry, then head: heads finish in any order.
    auto pos = std::find_if(rows_.begin(), rows_.end(), [&](const TuneRow& r) {
      return r.entry == entry ? r.head > h.head : r.entry > entry;
    });
    rows_.insert(pos, row);
  }
  auto& stored = stored_[entry];
  ++storedGeneration_;
  // The GUI tunes in the run's numerics: a head that ran exact (loaded values) does so no more.
  if (auto ex = storedExact_.find(entry); ex != storedExact_.end() && size_t(h.head) < ex->second.size())
    ex->second[size_t(h.head)] = 0;
  if (entry == core_.capture.entryName && core_.capture.loaded) {
    if (size_t(h.head) < runs_.config().perHeadNumerics.size()) {
      core::RunConfig c = runs_.config();
      c.perHeadNumerics[size_t(h.head)] = c.numerics;
      runs_.applyConfig(c);
    }
    // Tuned values land on the sliders (as per-head overrides) and the head re-runs for its mask.
    runs_.setHeadParams(h.head, h.params);
    stored = runs_.config().perHead;
    ++generation_;
    return;
  }
  const core::EntryInfo* info = core_.capture.find(entry);
  if (info && stored.size() != static_cast<size_t>(info->headsQ)) {
    stored.assign(static_cast<size_t>(info->headsQ), runs_.config().defaults);
  }
  if (h.head >= 0 && h.head < static_cast<int64_t>(stored.size())) stored[h.head] = h.params;
}

}  // namespace sparge::gui
