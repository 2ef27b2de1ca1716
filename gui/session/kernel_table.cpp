#include "kernel_table.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace sparge::gui {

namespace {
std::string argOf(const prof::TimelineEvent& e, const std::string& key) {
  for (const auto& [k, v] : e.args) {
    if (k == key) return v;
  }
  return {};
}
}  // namespace

std::vector<KernelRow> kernelRows(const prof::TimingReport& report) {
  std::vector<KernelRow> rows;
  const double runs = std::max(1, report.profiledRuns);
  for (const prof::KernelStat& k : report.kernels) {
    KernelRow r;
    r.name = k.name;
    r.stage = prof::toString(k.stage);
    r.source = prof::toString(k.source);
    r.launch = k.launch;
    r.launches = k.ms.count;
    r.launchesPerRun = double(k.ms.count) / runs;
    r.minMs = k.ms.min;
    r.medianMs = k.ms.median;
    r.maxMs = k.ms.max;
    r.executedTflops = k.executedTops.value_or(std::nan(""));
    r.denseEquivalentTflops = k.denseEquivalentTops.value_or(std::nan(""));
    rows.push_back(std::move(r));
  }
  return rows;
}

std::vector<TimelineBar> runTimeline(const prof::TimingReport& report) {
  if (report.runs.empty()) return {};
  auto sparse = std::find_if(report.runs.begin(), report.runs.end(), [](const prof::TimingReport::RunRow& r) {
    return std::any_of(r.values.begin(), r.values.end(),
                       [](const prof::StageSample& v) { return v.stage == prof::Stage::Sparse; });
  });
  const std::string runId = std::to_string((sparse != report.runs.end() ? *sparse : report.runs.front()).id);
  double runStartUs = 0;
  bool haveKernels = false;
  for (const auto& e : report.timeline) {
    if (argOf(e, "run") != runId) continue;
    if (e.category == "run") runStartUs = e.tsUs;
    if (e.pid >= 1) haveKernels = true;
  }
  std::map<std::pair<int, int>, int> tracks;  // (device, stream) -> track
  std::vector<TimelineBar> bars;
  for (const auto& e : report.timeline) {
    if (argOf(e, "run") != runId || e.category == "run") continue;
    bool kernel = e.pid >= 1;
    if (kernel != haveKernels) continue;  // kernel records supersede the engine's own stage times
    TimelineBar b;
    b.name = e.name;
    b.stage = e.category;
    b.startMs = (e.tsUs - runStartUs) * 1e-3;
    b.durMs = e.durUs * 1e-3;
    if (kernel) b.track = tracks.emplace(std::make_pair(e.pid, e.tid), int(tracks.size()) + 1).first->second;
    b.details = e.args;
    bars.push_back(std::move(b));
  }
  std::stable_sort(bars.begin(), bars.end(),
                   [](const TimelineBar& a, const TimelineBar& b) { return a.startMs < b.startMs; });
  return bars;
}

}  // namespace sparge::gui
