#include "session.h"

#include <algorithm>
#include <thread>

#include "sparge/core/digest.h"
#include "sparge/core/error.h"
#include "sysinfo.h"

namespace sparge::gui {

using Clock = std::chrono::steady_clock;

Session::Session(EngineFactory factory)
    : worker_(),
      core_(worker_),
      runs_(core_),
      tuning_(core_, runs_),
      profiling_(core_, runs_),
      overview_(core_, runs_, tuning_),
      curves_(core_, runs_),
      orderCurves_(core_, runs_),
      methodCompare_(core_, runs_, tuning_),
      files_(core_, runs_, tuning_) {
  core_.backend->factory = std::move(factory);
  worker_.setErrorSink([this](const std::string& key, const std::string& message) {
    core_.post([this, kind = jobKindOf(key), message] {
      // Tuning and profiling own the progress bar; a failed sweep stops showing as running.
      if (kind == JobKind::Tune || kind == JobKind::Profile) core_.progress = Progress{};
      if (kind == JobKind::Curves) curves_.cancel();
      if (kind == JobKind::OrderCurves) orderCurves_.cancel();
      if (kind == JobKind::MethodCompare) methodCompare_.cancel();
      core_.messages.pushError(message);
    });
  });
  startEngine();
}

Session::~Session() {
  worker_.shutdown();
}

void Session::startEngine() {
  auto backend = core_.backend;
  core_.submit(JobKind::Engine, [this, backend](const core::CancelFlag&) {
    engines::EngineSelection sel = backend->factory();
    if (!sel.engine) throw Error("engine", "no engine available");
    EngineStatus status;
    status.name = sel.engine->name();
    status.gpu = sel.engine->isGpu();
    status.message = sel.message;
    status.ready = true;
    status.deviceTarget = sel.engine->deviceTarget();
    backend->engine = std::move(sel.engine);
    if (status.gpu) gpuMemory(&status.gpuUsed, &status.gpuTotal);
    core_.post([this, status] {
      core_.engine = status;
      if (followDeviceTarget_) adoptDeviceTarget();
    });
  });
}

void Session::adoptDeviceTarget() {
  if (!core_.engine.deviceTarget) return;
  const core::Target t = *core_.engine.deviceTarget;
  core::RunConfig c = runs_.config();
  if (core::targetOf(c.geometry, c.numerics) == t) return;
  c.setTarget(t);
  runs_.applyConfig(c);
  core_.messages.addNotice(std::string("target ") + core::toString(t) + " (" + c.geometry.label() +
                           " tiles, " + core::toString(c.numerics) +
                           "): the kernels SpargeAttn runs on this GPU; " +
                           "the Controls' target changes it");
}

bool Session::poll() {
  bool changed = core_.drainInbox();
  overview_.update();
  return changed;
}

std::string Session::activity() const {
  auto kind = runningJob();
  if (!kind) return {};
  switch (*kind) {
    case JobKind::Engine:
      return "starting engine";
    case JobKind::Open:
      return "opening capture";
    case JobKind::Load:
      return "loading entry " + core_.capture.entryName;
    case JobKind::Run:
      return "running";
    case JobKind::Tune:
      return core_.progress.label.empty() ? "tuning" : core_.progress.label;
    case JobKind::Profile:
      return "profiling";
    case JobKind::Export:
      return "exporting";
    case JobKind::Overview:
      return "filling the overview";
    case JobKind::Curves:
      return "sweeping curves";
    case JobKind::OrderCurves:
      return "sweeping curves in each token order";
    case JobKind::MethodCompare:
      return "comparing block predictors";
  }
  return {};
}

bool Session::waitIdle(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  for (;;) {
    poll();
    if (worker_.idle() && core_.inboxEmpty()) {
      poll();  // a last result may schedule more work (a re-run, the next slice of a sweep)
      if (worker_.idle() && core_.inboxEmpty()) return true;
    }
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void Session::cancel() {
  core_.cancel(JobKind::Run);
  core_.cancel(JobKind::Tune);
  core_.cancel(JobKind::Profile);  // the progress bar's Cancel button is shown for profiling too
  curves_.cancel();
  core_.progress = Progress{};
  // What was owed stays owed: F5 or the next change runs it.
}

bool Session::presetAvailable(core::Preset preset) const {
  if (!core_.capture.loaded) return false;
  return preset != core::Preset::Tuned || tuning_.storedParams(core_.capture.entryName) != nullptr;
}

void Session::applyPreset(core::Preset preset) {
  if (!presetAvailable(preset)) return;
  if (preset == core::Preset::Tuned) {
    core::RunConfig c = runs_.config();
    c.perHead = *tuning_.storedParams(core_.capture.entryName);
    runs_.applyConfig(c);
    return;
  }
  runs_.setParams(core::presetParams(preset, runs_.config().defaults), ApplyTarget::AllHeads);
}

void Session::reset(ResetScope scope) {
  ++core_.epoch;
  runs_.reset(scope);
  tuning_.reset(scope);
  profiling_.reset(scope);
  overview_.reset(scope);
  curves_.reset(scope);
  orderCurves_.reset(scope);
  methodCompare_.reset(scope);
  if (scope == ResetScope::Capture) core_.messages.setWarnings({});
}

// ---------------------------------------------------------------- opening data

void Session::openCapture(const std::string& path, const std::string& entry) {
  // The old capture stays on screen until the new one has opened: a bad file changes nothing.
  auto backend = core_.backend;
  core_.cancel(JobKind::Run);
  core_.cancel(JobKind::Tune);
  core_.submit(JobKind::Open, [this, backend, path, entry](const core::CancelFlag&) {
    auto reader = std::make_unique<core::CaptureReader>(path);
    auto entries = reader->entries();
    auto attrs = reader->rootAttributes();
    backend->reader = std::move(reader);
    core_.post([this, path, entries, attrs, entry] {
      CaptureModel& c = core_.capture;
      c.path = path;
      c.entries = entries;
      c.rootAttributes = attrs;
      c.entryName.clear();
      c.loaded = false;
      reset(ResetScope::Capture);
      if (!entries.empty()) selectEntry(entry.empty() ? entries.front().name : entry);
    });
  });
}

void Session::openEntryData(std::shared_ptr<const core::EntryData> entry) {
  worker_.cancelAll();
  CaptureModel& c = core_.capture;
  c.path = "(in memory)";
  c.entries = {entry->info};
  c.rootAttributes.clear();
  c.entryName = entry->info.name;
  c.loaded = false;
  reset(ResetScope::Capture);
  auto backend = core_.backend;
  uint64_t epoch = core_.epoch;
  core_.submit(JobKind::Load, [this, backend, entry, epoch, order = permutation_](const core::CancelFlag&) {
    backend->reader.reset();
    adoptOrder(entry, order);
    core_.post([this, info = backend->entry->info,
                digest = entry->digest.empty() ? core::entryDigest(*entry) : entry->digest,
                epoch] { onEntryLoaded(info, digest, {}, epoch); });
  });
}

void Session::selectEntry(const std::string& name) {
  CaptureModel& c = core_.capture;
  if (name == c.entryName && c.loaded) return;
  if (!c.find(name)) {
    core_.messages.pushError("no entry named '" + name + "' in " + c.path);
    return;
  }
  core_.cancel(JobKind::Run);
  core_.cancel(JobKind::Tune);
  // Tuned values belong to the entry they were tuned on: if the current overrides are exactly that
  // entry's tuned set, they do not follow to an entry that has none (manual overrides still do).
  if (const auto* stored = tuning_.storedParams(c.entryName)) runs_.dropOverridesEqualTo(*stored);
  c.entryName = name;
  c.loaded = false;
  reset(ResetScope::Entry);
  submitLoad(name);
}

void Session::submitLoad(const std::string& name) {
  auto backend = core_.backend;
  uint64_t epoch = core_.epoch;
  core_.submit(JobKind::Load, [this, backend, name, epoch, order = permutation_](const core::CancelFlag&) {
    if (!backend->reader) throw Error("load", "no capture open");
    std::vector<core::NonFiniteReport> nonFinite;
    auto entry = std::make_shared<core::EntryData>(core::loadEntry(*backend->reader, name, &nonFinite));
    adoptOrder(entry, order);
    std::vector<std::string> warnings;
    for (const auto& nf : nonFinite) {
      warnings.push_back(name + ": " + core::toString(nf.tensor) + " batch " + std::to_string(nf.batch) +
                         " head " + std::to_string(nf.head) + " holds " + std::to_string(nf.count) +
                         " NaN/Inf values");
    }
    core_.post([this, info = backend->entry->info, digest = entry->digest, warnings, epoch] {
      onEntryLoaded(info, digest, warnings, epoch);
    });
  });
}

void Session::onEntryLoaded(const core::EntryInfo& info, const std::string& digest,
                            std::vector<std::string> warnings, uint64_t epoch) {
  if (epoch != core_.epoch) return;
  CaptureModel& c = core_.capture;
  c.entryInfo = info;
  c.entryDigest = digest;
  c.loaded = true;
  core_.messages.setWarnings(std::move(warnings));
  c.selected = HeadRef{std::clamp<int64_t>(c.selected.batch, 0, info.batch - 1),
                       std::clamp<int64_t>(c.selected.head, 0, info.headsQ - 1)};
  runs_.onEntryLoaded(tuning_.storedParams(info.name), tuning_.storedExact(info.name));
}

void Session::selectHead(HeadRef head) {
  CaptureModel& c = core_.capture;
  if (c.loaded) {
    head.batch = std::clamp<int64_t>(head.batch, 0, c.entryInfo.batch - 1);
    head.head = std::clamp<int64_t>(head.head, 0, c.entryInfo.headsQ - 1);
  }
  if (head == c.selected) return;
  c.selected = head;
  tuning_.onSelectionChanged();
}

void Session::showResultForTesting(std::shared_ptr<const core::EntryResult> result) {
  CaptureModel& c = core_.capture;
  c.path = "(synthetic result)";
  c.entries = {result->info};
  c.entryName = result->info.name;
  c.entryInfo = result->info;
  c.loaded = true;
  reset(ResetScope::Capture);
  runs_.showResult(std::move(result));
}

}  // namespace sparge::gui

namespace sparge::gui {

void Session::showOverviewForTesting(std::vector<core::EntryInfo> entries, std::vector<OverviewRow> rows) {
  CaptureModel& c = core_.capture;
  c.path = "(synthetic overview)";
  c.entries = std::move(entries);
  reset(ResetScope::Capture);
  overview_.showRows(std::move(rows));
}

}  // namespace sparge::gui
