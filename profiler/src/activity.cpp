// Attribution of kernel records to runs (external correlation id, else time window) and to stages.
#include "sparge/profiler/activity.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace sparge::prof {

namespace {
std::string dims(const std::array<int32_t, 3>& d) {
  return std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]);
}
}  // namespace

std::string LaunchConfig::gridLabel() const {
  return dims(grid);
}
std::string LaunchConfig::blockLabel() const {
  return dims(block);
}

const char* toString(Attribution a) {
  switch (a) {
    case Attribution::ExternalId:
      return "external-id";
    case Attribution::TimeWindow:
      return "time-window";
    case Attribution::None:
      return "none";
  }
  return "none";
}

void ActivityLog::add(const KernelActivity& kernel) {
  std::lock_guard lock(mutex_);
  kernels_.push_back(kernel);
}

void ActivityLog::add(const ExternalCorrelation& correlation) {
  std::lock_guard lock(mutex_);
  correlations_.push_back(correlation);
}

void ActivityLog::addDropped(uint64_t count) {
  std::lock_guard lock(mutex_);
  dropped_ += count;
}

size_t ActivityLog::kernelCount() const {
  std::lock_guard lock(mutex_);
  return kernels_.size();
}

uint64_t ActivityLog::dropped() const {
  std::lock_guard lock(mutex_);
  return dropped_;
}

void ActivityLog::clear() {
  std::lock_guard lock(mutex_);
  kernels_.clear();
  correlations_.clear();
  dropped_ = 0;
}

std::vector<KernelSample> ActivityLog::resolve(const std::vector<RunWindow>& windows) const {
  std::vector<KernelActivity> kernels;
  std::unordered_map<uint32_t, uint64_t> external;
  {
    std::lock_guard lock(mutex_);
    kernels = kernels_;
    // Records and correlations arrive in any buffer order; the last word for a correlation id wins.
    for (const ExternalCorrelation& c : correlations_) external[c.correlationId] = c.externalId;
  }
  std::unordered_set<uint64_t> knownRuns;
  for (const RunWindow& w : windows) knownRuns.insert(w.runId);

  std::vector<KernelSample> out;
  out.reserve(kernels.size());
  for (const KernelActivity& k : kernels) {
    KernelSample s;
    s.rawName = k.name;
    s.name = demangle(k.name);
    s.stage = stageForKernel(k.name);
    s.startNs = k.startNs;
    s.endNs = k.endNs;
    s.deviceId = k.deviceId;
    s.streamId = k.streamId;
    s.source = TimingSource::Cupti;
    s.launch = k.launch;
    auto it = external.find(k.correlationId);
    if (k.correlationId != 0 && it != external.end() && it->second != 0 &&
        (knownRuns.empty() || knownRuns.count(it->second))) {
      s.runId = it->second;
      s.attribution = Attribution::ExternalId;
    } else {
      for (const RunWindow& w : windows) {
        if (k.startNs >= w.startNs && k.startNs <= w.endNs) {
          s.runId = w.runId;
          s.attribution = Attribution::TimeWindow;
          break;
        }
      }
    }
    out.push_back(std::move(s));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const KernelSample& a, const KernelSample& b) { return a.startNs < b.startNs; });
  return out;
}

}  // namespace sparge::prof
