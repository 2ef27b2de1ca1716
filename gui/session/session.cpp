#include "session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <thread>

#include "sparge/core/error.h"
#include "sysinfo.h"

#ifdef SPARGE_GUI_HAVE_PROFILER
#include "sparge/profiler/profiler.h"
#endif

namespace sparge::gui {

using Clock = std::chrono::steady_clock;

// State that only the worker thread touches: HDF5 is not thread-safe and engines are not re-entrant.
struct Session::Backend {
  EngineFactory factory;
  std::unique_ptr<core::Engine> engine;
  std::unique_ptr<core::CaptureReader> reader;
  std::shared_ptr<const core::EntryData> entry;

  core::Engine& ensureEngine() {
    if (!engine) {
      EngineBox box = factory();
      if (!box.engine) throw Error("engine", "no engine available");
      engine = std::move(box.engine);
    }
    return *engine;
  }
};

Session::Session(EngineFactory factory) : backend_(std::make_shared<Backend>()) {
  backend_->factory = std::move(factory);
  worker_.setErrorSink([this](const std::string& key, const std::string& message) {
    post([key, message](Session& s) {
      if (key == "tune" || key == "profile") s.progress_ = Progress{};  // both own the progress bar
      s.errors_.push_back(message);
    });
  });
  auto backend = backend_;
  worker_.submit("engine", [this, backend](const core::CancelFlag&) {
    EngineBox box = backend->factory();
    if (!box.engine) throw Error("engine", "no engine available");
    std::string name = box.engine->name();
    bool gpu = box.engine->isGpu();
    backend->engine = std::move(box.engine);
    int64_t used = 0, total = 0;
    if (gpu) gpuMemory(&used, &total);
    post([name, gpu, msg = box.message, used, total](Session& s) {
      s.engineName_ = name;
      s.engineGpu_ = gpu;
      s.engineMessage_ = msg;
      s.engineReady_ = true;
      s.gpuUsed_ = used;
      s.gpuTotal_ = total;
    });
  });
}

Session::~Session() { worker_.cancelAll(); }

void Session::post(Apply fn) {
  std::lock_guard lock(inboxMutex_);
  inbox_.push_back(std::move(fn));
}

bool Session::poll() {
  std::vector<Apply> batch;
  {
    std::lock_guard lock(inboxMutex_);
    batch.swap(inbox_);
  }
  for (auto& fn : batch) fn(*this);
  return !batch.empty();
}

bool Session::busy() const { return !worker_.idle(); }

std::string Session::activity() const {
  std::string key = worker_.runningKey();
  if (key.empty()) return {};
  if (key == "engine") return "starting engine";
  if (key == "open") return "opening capture";
  if (key == "load") return "loading entry " + entryName_;
  if (key == "run") return "running";
  if (key == "tune") return progress_.label.empty() ? "tuning" : progress_.label;
  return key;
}

bool Session::waitIdle(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  for (;;) {
    poll();
    bool inboxEmpty;
    {
      std::lock_guard lock(inboxMutex_);
      inboxEmpty = inbox_.empty();
    }
    if (worker_.idle() && inboxEmpty) {
      poll();
      std::lock_guard lock(inboxMutex_);
      if (inbox_.empty() && worker_.idle()) return true;
    }
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void Session::addNotice(std::string message) {
  notices_.push_back(std::move(message));
  if (notices_.size() > 50) notices_.erase(notices_.begin());
}

// ---------------------------------------------------------------- opening data

void Session::openCapture(const std::string& path, const std::string& entry) {
  // The old capture stays on screen until the new one has opened: a bad file changes nothing.
  auto backend = backend_;
  worker_.cancel("run");
  worker_.cancel("tune");
  worker_.submit("open", [this, backend, path, entry](const core::CancelFlag&) {
    auto reader = std::make_unique<core::CaptureReader>(path);
    auto entries = reader->entries();
    auto attrs = reader->rootAttributes();
    backend->reader = std::move(reader);
    post([path, entries, attrs, entry](Session& s) {
      ++s.epoch_;
      s.capturePath_ = path;
      s.entries_ = entries;
      s.rootAttributes_ = attrs;
      s.entryName_.clear();
      s.entryLoaded_ = false;
      s.result_.reset();
      ++s.resultGeneration_;
      s.tuned_.clear();
      s.tunedPerEntry_.clear();
      s.lastTune_.reset();
      s.timing_ = TimingSummary{};
      s.warnings_.clear();
      s.owedHeads_.clear();
      s.owedAll_ = false;
      if (!entries.empty()) s.selectEntry(entry.empty() ? entries.front().name : entry);
    });
  });
}

void Session::openEntryData(std::shared_ptr<const core::EntryData> entry) {
  auto backend = backend_;
  worker_.cancelAll();
  ++epoch_;
  capturePath_ = "(in memory)";
  entries_ = {entry->info};
  rootAttributes_.clear();
  entryName_ = entry->info.name;
  entryLoaded_ = false;
  result_.reset();
  ++resultGeneration_;
  tuned_.clear();
  uint64_t epoch = epoch_;
  worker_.submit("load", [this, backend, entry, epoch](const core::CancelFlag&) {
    backend->reader.reset();
    backend->entry = entry;
    backend->ensureEngine().setEntry(entry);
    post([info = entry->info, epoch](Session& s) {
      if (epoch != s.epoch_) return;
      s.entryInfo_ = info;
      s.entryLoaded_ = true;
      s.ensurePerHead();
      s.selected_ = HeadRef{std::min(s.selected_.batch, info.batch - 1), std::min(s.selected_.head, info.headsQ - 1)};
      s.scheduleRun({}, true);
    });
  });
}

void Session::selectEntry(const std::string& name) {
  if (name == entryName_ && entryLoaded_) return;
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const auto& e) { return e.name == name; });
  if (it == entries_.end()) {
    errors_.push_back("no entry named '" + name + "' in " + capturePath_);
    return;
  }
  worker_.cancel("run");
  worker_.cancel("tune");
  ++epoch_;
  // Tuned values belong to the entry they were tuned on: if the current overrides are exactly that
  // entry's tuned set, they do not follow to an entry that has none (manual overrides still do).
  if (auto t = tunedPerEntry_.find(entryName_); t != tunedPerEntry_.end() && t->second == config_.perHead)
    config_.perHead.clear();
  entryName_ = name;
  entryLoaded_ = false;
  owedHeads_.clear();
  owedAll_ = false;
  submitLoad(name);
}

void Session::submitLoad(const std::string& name) {
  auto backend = backend_;
  uint64_t epoch = epoch_;
  worker_.submit("load", [this, backend, name, epoch](const core::CancelFlag&) {
    if (!backend->reader) throw Error("load", "no capture open");
    std::vector<core::NonFiniteReport> nonFinite;
    auto entry = std::make_shared<core::EntryData>(core::loadEntry(*backend->reader, name, &nonFinite));
    backend->entry = entry;
    backend->ensureEngine().setEntry(entry);
    std::vector<std::string> warnings;
    for (const auto& nf : nonFinite) {
      warnings.push_back(name + ": " + core::toString(nf.tensor) + " batch " + std::to_string(nf.batch) +
                         " head " + std::to_string(nf.head) + " holds " + std::to_string(nf.count) +
                         " NaN/Inf values");
    }
    post([info = entry->info, epoch, warnings](Session& s) {
      if (epoch != s.epoch_) return;
      s.entryInfo_ = info;
      s.entryLoaded_ = true;
      s.warnings_ = warnings;
      s.ensurePerHead();
      if (auto t = s.tunedPerEntry_.find(info.name);
          t != s.tunedPerEntry_.end() && static_cast<int64_t>(t->second.size()) == info.headsQ) {
        s.config_.perHead = t->second;
      }
      s.selected_ = HeadRef{std::clamp<int64_t>(s.selected_.batch, 0, info.batch - 1),
                            std::clamp<int64_t>(s.selected_.head, 0, info.headsQ - 1)};
      s.scheduleRun({}, true);
    });
  });
}

void Session::selectHead(HeadRef head) {
  if (entryLoaded_) {
    head.batch = std::clamp<int64_t>(head.batch, 0, entryInfo_.batch - 1);
    head.head = std::clamp<int64_t>(head.head, 0, entryInfo_.headsQ - 1);
  }
  if (head == selected_) return;
  selected_ = head;
  if (followBudget_) retuneSelectedForBudget();
}

// ---------------------------------------------------------------- parameters

void Session::ensurePerHead() {
  // Overrides survive an entry change when the head count matches (layers of one model); otherwise
  // they cannot mean anything for the new entry and are dropped.
  int64_t n = headsQ();
  if (!config_.perHead.empty() && static_cast<int64_t>(config_.perHead.size()) != n) config_.perHead.clear();
}

bool Session::hasOverride(int64_t head) const {
  return head >= 0 && head < static_cast<int64_t>(config_.perHead.size()) && !(config_.perHead[head] == config_.defaults);
}

int Session::overrideCount() const {
  int n = 0;
  for (size_t h = 0; h < config_.perHead.size(); ++h) n += hasOverride(static_cast<int64_t>(h));
  return n;
}

void Session::setParams(const core::HeadParams& p, ApplyTarget target) {
  core::validate(p, "parameters");
  if (target == ApplyTarget::AllHeads || !entryLoaded_) {
    if (p == config_.defaults && config_.perHead.empty()) return;
    config_.defaults = p;
    config_.perHead.clear();
    scheduleRun({}, true);
    return;
  }
  int64_t h = selected_.head;
  if (config_.forHead(h) == p) return;
  if (config_.perHead.empty()) config_.perHead.assign(static_cast<size_t>(headsQ()), config_.defaults);
  config_.perHead[h] = p;
  scheduleRun({h}, false);
}

void Session::setGeometry(const core::Geometry& g) {
  if (g == config_.geometry) return;
  config_.geometry = g;
  scheduleRun({}, true);
}

void Session::setSmoothK(bool on) {
  if (on == config_.smoothK) return;
  config_.smoothK = on;
  scheduleRun({}, true);
}

void Session::setSink(bool on) {
  if (on == config_.sink) return;
  config_.sink = on;
  scheduleRun({}, true);
}

void Session::setConfig(const core::RunConfig& config) {
  config_ = config;
  ensurePerHead();
  scheduleRun({}, true);
}

void Session::clearOverride(int64_t head) {
  if (!hasOverride(head)) return;
  config_.perHead[head] = config_.defaults;
  scheduleRun({head}, false);
}

void Session::clearAllOverrides() {
  if (overrideCount() == 0) {
    config_.perHead.clear();
    return;
  }
  std::set<int64_t> heads;
  for (size_t h = 0; h < config_.perHead.size(); ++h) {
    if (hasOverride(static_cast<int64_t>(h))) heads.insert(static_cast<int64_t>(h));
  }
  config_.perHead.clear();
  scheduleRun(heads, false);
}

void Session::setBudget(const Budget& b) {
  if (b == budget_) return;
  budget_ = b;
  if (followBudget_) retuneSelectedForBudget();
}

void Session::setFollowBudget(bool on) {
  followBudget_ = on;
  if (on) retuneSelectedForBudget();
}

void Session::rerun() {
  if (!entryLoaded_) return;
  scheduleRun({}, true);
}

void Session::cancel() {
  worker_.cancel("run");
  worker_.cancel("tune");
  worker_.cancel("profile");  // the progress bar's Cancel button is shown for profiling too
  progress_ = Progress{};
  // What was owed stays owed: F5 or the next change runs it.
}

// ---------------------------------------------------------------- runs

void Session::scheduleRun(const std::set<int64_t>& heads, bool all) {
  if (!entryLoaded_) return;  // the load job schedules a full run when it lands
  owedAll_ = owedAll_ || all;
  owedHeads_.insert(heads.begin(), heads.end());
  if (!owedAll_ && static_cast<int64_t>(owedHeads_.size()) >= headsQ()) owedAll_ = true;

  core::RunConfig config = config_;
  std::vector<int64_t> headList;
  if (!owedAll_) headList.assign(owedHeads_.begin(), owedHeads_.end());
  auto backend = backend_;
  uint64_t epoch = epoch_;
  // The id is known only after submit; the job reads it through a shared cell.
  auto idCell = std::make_shared<std::atomic<uint64_t>>(0);
  uint64_t id = worker_.submit(
      "run",
      [this, backend, config, headList, epoch, idCell](const core::CancelFlag& cancel) {
        core::Engine& engine = backend->ensureEngine();
        if (!backend->entry) throw Error("run", "no entry loaded");
        core::RunOptions options;
        options.heads = headList;
        options.computeError = true;
        options.cancel = &cancel;
        auto t0 = Clock::now();
        auto result = std::make_shared<core::EntryResult>(engine.run(config, options));
        double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        int64_t used = 0, total = 0;
        if (engine.isGpu()) gpuMemory(&used, &total);
        uint64_t runId = idCell->load();
        post([result, epoch, runId, ms, used, total](Session& s) {
          s.gpuUsed_ = used;
          s.gpuTotal_ = total;
          s.applyResult(result, epoch, runId, ms);
        });
      },
      // A running job is cancelled for a newer one only when runs are slow: while runs take under
      // kFinishRunsBelowMs the running one finishes (its result is merged and shown), so a slider drag
      // keeps updating the views; the newest pending change still replaces older pending ones.
      cancelRunningOnChange_ && lastRunMs_ >= kFinishRunsBelowMs);
  idCell->store(id);
  latestRunId_ = id;
}

void Session::applyResult(std::shared_ptr<core::EntryResult> r, uint64_t epoch, uint64_t runId, double wallMs) {
  if (epoch != epoch_) return;
  bool latest = runId == latestRunId_;
  if (latest) {
    owedHeads_.clear();
    owedAll_ = false;
  }
  lastRunMs_ = wallMs;
  lastRunHeads_ = static_cast<int64_t>(r->heads.size());
  lastTimes_ = r->times;
  for (const auto& w : r->warnings) {
    if (std::find(warnings_.begin(), warnings_.end(), w) == warnings_.end()) warnings_.push_back(w);
  }

  const int64_t expected = r->info.batch * r->info.headsQ;
  bool complete = static_cast<int64_t>(r->heads.size()) == expected;
  auto sameShape = [&](const core::EntryResult& a) {
    return a.info.name == r->info.name && a.config.geometry == r->config.geometry &&
           a.config.smoothK == r->config.smoothK && a.config.sink == r->config.sink;
  };
  std::shared_ptr<core::EntryResult> merged;
  if (complete || !result_ || !sameShape(*result_)) {
    // A partial result of another geometry cannot be merged; it is shown alone until the full one lands.
    merged = r;
  } else {
    merged = std::make_shared<core::EntryResult>(*result_);
    for (auto& h : r->heads) {
      auto it = std::find_if(merged->heads.begin(), merged->heads.end(),
                             [&](const core::HeadResult& m) { return m.batch == h.batch && m.head == h.head; });
      if (it != merged->heads.end()) {
        *it = std::move(h);
      } else {
        merged->heads.push_back(std::move(h));
      }
    }
    std::sort(merged->heads.begin(), merged->heads.end(), [](const auto& a, const auto& b) {
      return a.batch != b.batch ? a.batch < b.batch : a.head < b.head;
    });
    merged->times = r->times;
    merged->engine = r->engine;
    core::aggregate(*merged);
  }
  merged->config = config_;  // per-head params live in each HeadResult; this records the current defaults
  result_ = merged;
  ++resultGeneration_;
}

// ---------------------------------------------------------------- tuning (see session_tune.cpp)

void Session::showResultForTesting(std::shared_ptr<const core::EntryResult> result) {
  ++epoch_;
  capturePath_ = "(synthetic result)";
  entries_ = {result->info};
  entryName_ = result->info.name;
  entryInfo_ = result->info;
  entryLoaded_ = true;
  result_ = std::move(result);
  ++resultGeneration_;
}

// ---------------------------------------------------------------- helpers

void applySetting(const std::string& keyValue, core::RunConfig& config, Budget& budget) {
  auto eq = keyValue.find('=');
  if (eq == std::string::npos || eq == 0) throw Error("--set " + keyValue, "expected key=value");
  std::string key = keyValue.substr(0, eq);
  std::string value = keyValue.substr(eq + 1);
  std::string where = "--set " + key;
  auto number = [&]() {
    try {
      size_t used = 0;
      double v = std::stod(value, &used);
      if (used != value.size()) throw Error(where, "not a number: '" + value + "'");
      return v;
    } catch (const std::logic_error&) {
      throw Error(where, "not a number: '" + value + "'");
    }
  };
  auto boolean = [&]() {
    if (value == "1" || value == "true" || value == "on" || value == "yes") return true;
    if (value == "0" || value == "false" || value == "off" || value == "no") return false;
    throw Error(where, "expected 0/1, got '" + value + "'");
  };
  core::HeadParams& p = config.defaults;
  if (key == "theta" || key == "simthreshd1") {
    p.theta = number();
  } else if (key == "tau" || key == "cdfthreshd") {
    p.tau = number();
    p.mode = core::SelectMode::Cdf;
  } else if (key == "topk") {
    p.topk = number();
    p.mode = core::SelectMode::TopK;
  } else if (key == "lambda" || key == "pvthreshd") {
    p.lambda = value == "inf" ? INFINITY : number();
  } else if (key == "mode") {
    if (value == "cdf") {
      p.mode = core::SelectMode::Cdf;
    } else if (value == "topk") {
      p.mode = core::SelectMode::TopK;
    } else {
      throw Error(where, "expected cdf or topk, got '" + value + "'");
    }
  } else if (key == "dense") {
    p.dense = boolean();
  } else if (key == "geometry") {
    config.geometry = core::Geometry::parse(value);
  } else if (key == "smooth_k" || key == "smoothk") {
    config.smoothK = boolean();
  } else if (key == "sink") {
    config.sink = boolean();
  } else if (key == "l1") {
    budget.l1 = number();
  } else if (key == "l2") {
    budget.l2 = number();
  } else {
    throw Error(where, "unknown setting (theta, tau, topk, lambda, mode, dense, geometry, smooth_k, sink, l1, l2)");
  }
  core::validate(p, where);
  if (!(budget.l1 > 0) || !(budget.l2 > 0)) throw Error(where, "budget must be > 0");
  config.perHead.clear();
}

std::vector<size_t> sortHeads(const core::EntryResult& result, HeadSort key, bool descending) {
  std::vector<size_t> order(result.heads.size());
  std::iota(order.begin(), order.end(), size_t{0});
  auto value = [&](size_t i) -> double {
    const auto& h = result.heads[i];
    switch (key) {
      case HeadSort::Sparsity: return h.sparsity.total();
      case HeadSort::Error: return h.error.l1();
      case HeadSort::Index: default: return static_cast<double>(h.batch * 1000000 + h.head);
    }
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    double va = value(a), vb = value(b);
    return descending ? va > vb : va < vb;
  });
  return order;
}

bool overBudget(const core::HeadResult& h, const Budget& b) {
  double bound = h.sparsity.skippedPvBlocks > 0 ? b.l2 : b.l1;
  return h.error.l1() > bound;
}

}  // namespace sparge::gui

// ---------------------------------------------------------------- tuning and profiling
namespace sparge::gui {

void Session::submitTune(TuneScope scope, bool live) {
  if (!entryLoaded_) return;
  core::TuneOptions opt;
  opt.l1 = budget_.l1;
  opt.l2 = budget_.l2;
  opt.mode = config_.defaults.mode;
  opt.geometry = config_.geometry;
  opt.smoothK = config_.smoothK;
  opt.sink = config_.sink;
  if (scope == TuneScope::SelectedHead) opt.heads = {selected_.head};
  try {
    opt.validate("auto-tune");
  } catch (const std::exception& e) {
    if (!live) errors_.push_back(e.what());
    return;
  }
  auto backend = backend_;
  uint64_t epoch = epoch_;
  std::vector<core::EntryInfo> entries = entries_;
  std::string label = scope == TuneScope::SelectedHead ? "tuning head " + std::to_string(selected_.head)
                      : scope == TuneScope::Entry      ? "tuning " + entryName_
                                                       : "tuning all entries";
  progress_ = Progress{true, label, 0, 0, 0};
  uint64_t tuneId = ++latestTuneId_;  // counted here, not by the worker: a fast job may end before submit returns
  worker_.submit(
      "tune",
      [this, backend, epoch, entries, opt, scope, label, live, tuneId](const core::CancelFlag& cancel) {
        core::Engine& engine = backend->ensureEngine();
        if (!backend->entry) throw Error("auto-tune", "no entry loaded");
        core::TuneCallbacks cb;
        cb.cancel = &cancel;
        cb.progress = [this, epoch, label, tuneId](const core::TuneProgress& p) {
          post([p, epoch, label, id = tuneId](Session& s) {
            // A replaced or cancelled tune must not bring the bar back.
            if (epoch != s.epoch_ || id != s.latestTuneId_ || !s.progress_.active) return;
            char eta[64] = "";
            if (p.etaSeconds >= 0) std::snprintf(eta, sizeof eta, ", ETA %.0f s", p.etaSeconds);
            s.progress_ = Progress{true, label + " (" + core::toString(p.phase) + eta + ")", p.unitsDone,
                                   p.unitsTotal, p.fraction};
          });
        };
        cb.headFinished = [this, epoch](const core::TunedGroup& g, const core::TunedHead& h) {
          std::string name = g.entries.empty() ? g.name : g.entries.front();
          post([name, h, epoch](Session& s) { s.onHeadTuned(name, h, epoch); });
        };
        core::TuneResult r;
        if (scope == TuneScope::AllEntries && backend->reader) {
          std::vector<core::TuneInput> inputs;
          for (const auto& e : entries) {
            core::TuneInput in;
            in.name = e.name;
            in.layer = e.layer;
            in.headsQ = e.headsQ;
            in.load = [backend, name = e.name]() {
              return std::make_shared<const core::EntryData>(core::loadEntry(*backend->reader, name));
            };
            inputs.push_back(std::move(in));
          }
          try {
            r = core::tune(engine, core::makeGroups(inputs, false), opt, cb);
          } catch (...) {
            engine.setEntry(backend->entry);
            throw;
          }
          engine.setEntry(backend->entry);  // the tuner moved the engine through the other entries
        } else {
          r = core::tuneEntry(engine, backend->entry, opt, cb);
        }
        auto shared = std::make_shared<const core::TuneResult>(std::move(r));
        post([shared, epoch, live, id = tuneId](Session& s) {
          // A live (follow-budget) tune replaced by a newer one ends cancelled: it leaves no trace and
          // the bar stays for its successor.
          bool latest = id == s.latestTuneId_;
          if (latest) s.progress_ = Progress{};
          if (epoch != s.epoch_) return;
          // Heads finished before a cancel have their parameters set; their re-runs, dropped by the
          // cancel, are still owed.
          if (!s.owedHeads_.empty() || s.owedAll_) s.scheduleRun({}, false);
          if (live && shared->cancelled && !latest) return;
          s.lastTune_ = shared;
          char msg[160];
          std::snprintf(msg, sizeof msg, "auto-tune: %lld heads in %.1f s (%lld engine runs)%s",
                        static_cast<long long>(shared->headsFinished()), shared->elapsedSeconds,
                        static_cast<long long>(shared->probes), shared->cancelled ? ", cancelled" : "");
          s.addNotice(msg);
        });
      },
      true);
}

void Session::profile(int runs) {
  if (!entryLoaded_) return;
  runs = std::clamp(runs, 1, 100);
  auto backend = backend_;
  uint64_t epoch = epoch_;
  core::RunConfig config = config_;
  std::string entryName = entryName_;
  progress_ = Progress{true, "timing " + std::to_string(runs) + " runs + dense", 0, 2 * runs + 1, 0};
  worker_.submit("profile", [this, backend, epoch, config, runs, entryName](const core::CancelFlag& cancel) {
    core::Engine& engine = backend->ensureEngine();
    if (!backend->entry) throw Error("profile", "no entry loaded");
    core::RunOptions opt;
    opt.cancel = &cancel;
    auto step = [this, epoch, runs](int done) {
      post([epoch, done, runs](Session& s) {
        if (epoch != s.epoch_) return;
        s.progress_.done = done;
        s.progress_.fraction = double(done) / double(2 * runs + 1);
      });
    };
    engine.run(config, opt);  // warm-up: fills the dense-reference cache so it is not timed
    step(1);
    core::RunConfig dense = config;
    dense.defaults.dense = true;
    dense.perHead.clear();
    TimingSummary t;
    t.runs = runs;
#ifdef SPARGE_GUI_HAVE_PROFILER
    prof::Profiler sparseProf;
    prof::Profiler denseProf(prof::ProfilerOptions{});
    core::EntryResult last;
    for (int i = 0; i < runs; ++i) {
      sparseProf.begin(prof::makeRunInfo(entryName, config, {}, engine.name()));
      last = engine.run(config, opt);
      sparseProf.end(&last);
      step(2 + i);
    }
    for (int i = 0; i < runs; ++i) {
      denseProf.begin(prof::makeRunInfo(entryName, dense, {}, engine.name()));
      core::EntryResult d = engine.run(dense, opt);
      denseProf.end(&d);
      step(2 + runs + i);
    }
    prof::TimingReport rep = sparseProf.report();
    prof::TimingReport drep = denseProf.report();
    t.clock = prof::toString(rep.source);
    t.clockDetail = rep.clock;
    t.device = rep.device.name;
    for (const auto& st : rep.stages) {
      t.stages.push_back(StageSpan{std::string(prof::toString(st.stage)) +
                                       (st.source != rep.source ? std::string(" (") + prof::toString(st.source) + ")" : ""),
                                   st.ms.min, st.ms.median, st.ms.max});
    }
    t.sparseMs = rep.derived.sparseMs.value_or(0);
    t.denseMs = drep.derived.sparseMs.value_or(0);
    t.denseTops = rep.derived.denseEquivalentTops.value_or(0);
    t.executedTops = rep.derived.executedTops.value_or(0);
    t.note = rep.sourceReason;
#else
    std::vector<core::StageTimes> times;
    core::EntryResult last;
    for (int i = 0; i < runs; ++i) {
      last = engine.run(config, opt);
      times.push_back(last.times);
      step(2 + i);
    }
    double denseTotal = 0;
    for (int i = 0; i < runs; ++i) {
      auto d = engine.run(dense, opt);
      denseTotal += d.times.predictMs + d.times.sparseMs;
      step(2 + runs + i);
    }
    auto span = [&](const char* name, double core::StageTimes::*field) {
      std::vector<double> v;
      for (auto& x : times) v.push_back(x.*field);
      std::sort(v.begin(), v.end());
      return StageSpan{name, v.front(), v[v.size() / 2], v.back()};
    };
    t.stages = {span("predict", &core::StageTimes::predictMs), span("sparse", &core::StageTimes::sparseMs),
                span("metrics", &core::StageTimes::metricsMs), span("total", &core::StageTimes::totalMs)};
    t.clock = last.times.clock;
    t.clockDetail = t.clock == "wall" ? "host steady_clock" : t.clock;
    t.device = engine.name();
    t.sparseMs = t.stages[0].medianMs + t.stages[1].medianMs;
    t.denseMs = denseTotal / runs;
    t.note = "profiler library not built: engine stage times";
#endif
    t.valid = true;
    post([t, epoch](Session& s) {
      s.progress_ = Progress{};
      if (epoch != s.epoch_) return;
      s.timing_ = t;
    });
  });
}

}  // namespace sparge::gui

namespace sparge::gui {

void Session::autoTune(TuneScope scope) { submitTune(scope, false); }

void Session::retuneSelectedForBudget() {
  if (!entryLoaded_) return;
  submitTune(TuneScope::SelectedHead, true);
}

void Session::onHeadTuned(const std::string& entry, const core::TunedHead& h, uint64_t epoch) {
  if (epoch != epoch_) return;
  TuneRow row{entry, h.head, h.params, h.isSparse, h.stage1Sparsity, h.totalSparsity, h.l1, h.probes, core::describe(h.decision)};
  auto it = std::find_if(tuned_.begin(), tuned_.end(),
                         [&](const TuneRow& r) { return r.entry == entry && r.head == h.head; });
  if (it != tuned_.end()) {
    *it = row;
  } else {
    // Kept ordered by entry, then head: heads finish in any order.
    auto pos = std::find_if(tuned_.begin(), tuned_.end(), [&](const TuneRow& r) {
      return r.entry == entry ? r.head > h.head : r.entry > entry;
    });
    tuned_.insert(pos, row);
  }
  auto& stored = tunedPerEntry_[entry];
  if (entry == entryName_ && entryLoaded_) {
    // Tuned values land on the sliders (as per-head overrides) and the head re-runs for its mask.
    if (config_.perHead.empty()) config_.perHead.assign(static_cast<size_t>(headsQ()), config_.defaults);
    if (h.head >= 0 && h.head < headsQ()) config_.perHead[h.head] = h.params;
    stored = config_.perHead;
    ++tuneGeneration_;
    scheduleRun({h.head}, false);
  } else {
    const core::EntryInfo* info = nullptr;
    for (const auto& e : entries_) {
      if (e.name == entry) info = &e;
    }
    if (info && stored.size() != static_cast<size_t>(info->headsQ)) {
      stored.assign(static_cast<size_t>(info->headsQ), config_.defaults);
    }
    if (h.head >= 0 && h.head < static_cast<int64_t>(stored.size())) stored[h.head] = h.params;
  }
}

}  // namespace sparge::gui
