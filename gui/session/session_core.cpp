#include "session_core.h"

#include <algorithm>
#include <array>

#include "sparge/core/error.h"

namespace sparge::gui {

namespace {
constexpr std::array<std::pair<JobKind, const char*>, 11> kJobKeys = {
    {{JobKind::Engine, "engine"},
     {JobKind::Open, "open"},
     {JobKind::Load, "load"},
     {JobKind::Run, "run"},
     {JobKind::Tune, "tune"},
     {JobKind::Profile, "profile"},
     {JobKind::Export, "export"},
     {JobKind::Overview, "overview"},
     {JobKind::Curves, "curves"},
     {JobKind::OrderCurves, "order-curves"},
     {JobKind::MethodCompare, "method-compare"}}};
}  // namespace

std::string jobKey(JobKind kind, const std::string& tag) {
  for (const auto& [k, key] : kJobKeys) {
    if (k == kind) return tag.empty() ? std::string(key) : std::string(key) + ":" + tag;
  }
  return "job";
}

std::optional<JobKind> jobKindOf(const std::string& key) {
  std::string head = key.substr(0, key.find(':'));
  for (const auto& [k, name] : kJobKeys) {
    if (head == name) return k;
  }
  return std::nullopt;
}

const core::EntryInfo* CaptureModel::find(const std::string& name) const {
  auto it = std::find_if(entries.begin(), entries.end(), [&](const auto& e) { return e.name == name; });
  return it == entries.end() ? nullptr : &*it;
}

void Messages::addNotice(std::string message) {
  notices_.push_back(std::move(message));
  if (notices_.size() > 50) notices_.erase(notices_.begin());
}

void Messages::addWarning(const std::string& w) {
  if (std::find(warnings_.begin(), warnings_.end(), w) == warnings_.end()) warnings_.push_back(w);
}

namespace {
core::Engine& ensure(const EngineFactory& factory, std::unique_ptr<core::Engine>& slot) {
  if (!slot) {
    engines::EngineSelection sel = factory();
    if (!sel.engine) throw Error("engine", "no engine available");
    slot = std::move(sel.engine);
  }
  return *slot;
}
}  // namespace

core::Engine& Backend::ensureEngine() {
  return ensure(factory, engine);
}

core::Engine& Backend::ensureOverviewEngine() {
  return ensure(factory, overviewEngine);
}

std::shared_ptr<const core::EntryData> Backend::load(const std::string& name) {
  if (entry && entry->info.name == name) return entry;
  if (!reader) throw Error("load", "no capture open");
  return std::make_shared<const core::EntryData>(core::loadEntry(*reader, name));
}

void SessionCore::post(std::function<void()> fn) {
  std::lock_guard lock(inboxMutex_);
  inbox_.push_back(std::move(fn));
  if (wake_) wake_();
}

void SessionCore::setWake(std::function<void()> wake) {
  std::lock_guard lock(inboxMutex_);
  wake_ = std::move(wake);
}

bool SessionCore::drainInbox() {
  std::vector<std::function<void()>> batch;
  {
    std::lock_guard lock(inboxMutex_);
    batch.swap(inbox_);
  }
  for (auto& fn : batch) fn();
  return !batch.empty();
}

bool SessionCore::inboxEmpty() const {
  std::lock_guard lock(inboxMutex_);
  return inbox_.empty();
}

uint64_t SessionCore::submit(JobKind kind, Worker::Job job, bool cancelRunning, const std::string& tag) {
  return worker.submit(jobKey(kind, tag), std::move(job), cancelRunning);
}

}  // namespace sparge::gui
