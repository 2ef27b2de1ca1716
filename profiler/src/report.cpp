// Building a TimingReport from runs and attributed kernels: statistics, derived figures, timeline.
#include "sparge/profiler/report.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <set>

#include "sparge/core/result.h"

namespace sparge::prof {

namespace {

std::string formatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string headsLabel(const std::vector<int64_t>& heads) {
  if (heads.empty()) return "all";
  std::vector<int64_t> h = heads;
  std::sort(h.begin(), h.end());
  bool contiguous = true;
  for (size_t i = 1; i < h.size(); ++i) contiguous = contiguous && h[i] == h[i - 1] + 1;
  if (contiguous && h.size() > 1) return std::to_string(h.front()) + "-" + std::to_string(h.back());
  std::string out;
  for (size_t i = 0; i < h.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(h[i]);
  }
  return out;
}

using Key = std::pair<Stage, TimingSource>;

double median(std::vector<double> v) {
  return computeStats(std::move(v)).median;
}

}  // namespace

std::string RunInfo::label() const {
  std::string out = entry.empty() ? std::string("run") : entry;
  if (!heads.empty()) out += " heads " + heads;
  if (!params.empty()) out += " [" + params + "]";
  return out;
}

RunInfo makeRunInfo(const std::string& entry, const core::RunConfig& config,
                    const std::vector<int64_t>& heads, const std::string& engine) {
  RunInfo info;
  info.entry = entry;
  info.heads = headsLabel(heads);
  info.engine = engine;
  const core::HeadParams& p = config.defaults;
  std::string params;
  if (p.dense) {
    params = "dense";
  } else {
    params = "theta=" + formatNumber(p.theta);
    params +=
        p.mode == core::SelectMode::Cdf ? " tau=" + formatNumber(p.tau) : " topk=" + formatNumber(p.topk);
    params += " lambda=" + formatNumber(p.lambda);
  }
  params += " " + std::to_string(config.geometry.blockQ) + "x" + std::to_string(config.geometry.blockK);
  if (!config.perHead.empty()) params += " +per-head";
  info.params = params;
  return info;
}

double Workload::denseFlops() const {
  if (!valid()) return 0;
  const double dv = headDimV > 0 ? double(headDimV) : double(headDim);
  double f =
      2.0 * double(batch) * double(heads) * double(tokensQ) * double(tokensKV) * (double(headDim) + dv);
  return causal ? 0.5 * f : f;
}

double Workload::executedFlops() const {
  const double area = double(blockQ) * double(blockK);
  const double dv = headDimV > 0 ? double(headDimV) : double(headDim);
  return 2.0 * area * (double(computedQkBlocks) * double(headDim) + double(computedPvBlocks) * dv);
}

Workload Workload::fromResult(const core::EntryResult& r) {
  Workload w;
  w.batch = r.info.batch;
  w.heads = r.info.batch > 0 ? int64_t(r.heads.size()) / r.info.batch : 0;
  w.tokensQ = r.info.tokensQ;
  w.tokensKV = r.info.tokensKV;
  w.headDim = r.info.headDim;
  w.headDimV = r.info.headDimV;
  w.causal = r.info.causal;
  w.blockQ = r.config.geometry.blockQ;
  w.blockK = r.config.geometry.blockK;
  // Sum over heads rather than trusting the entry-level sums, which a caller may not have aggregated.
  for (const core::HeadResult& h : r.heads) {
    w.computedQkBlocks += h.sparsity.selectedBlocks;
    w.computedPvBlocks += h.sparsity.computedPvBlocks;
  }
  return w;
}

TimingReport buildReport(const ReportInput& in) {
  TimingReport rep;
  rep.source = in.source;
  rep.sourceReason = in.sourceReason;
  rep.clock = describe(in.source);
  rep.device = in.device;
  rep.workload = in.workload;
  rep.droppedRecords = in.droppedRecords;

  std::map<uint64_t, const RunRecord*> profiled;
  std::set<uint64_t> warm;
  for (const RunRecord& r : in.runs) {
    if (r.warmup) {
      ++rep.warmupRuns;
      warm.insert(r.id);
    } else {
      ++rep.profiledRuns;
      profiled[r.id] = &r;
      if (rep.profiledRuns == 1) rep.run = r.info;
    }
  }

  // Per run, (stage, source) -> ms.
  std::map<uint64_t, std::map<Key, double>> perRun;
  std::map<std::pair<std::string, Stage>, std::vector<double>> perKernel;
  for (const KernelSample& k : in.kernels) {
    if (warm.count(k.runId)) continue;
    if (!profiled.count(k.runId)) {
      ++rep.unattributedKernels;
      continue;
    }
    perRun[k.runId][{k.stage, k.source}] += k.ms();
    perRun[k.runId][{Stage::Total, k.source}] += k.ms();
    perKernel[{k.name, k.stage}].push_back(k.ms());
  }
  for (const auto& [id, r] : profiled) {
    auto& values = perRun[id];
    for (const StageSample& s : r->samples) values[{s.stage, s.source}] += s.ms;
  }

  std::map<Key, std::vector<double>> perStage;
  for (const auto& [id, r] : profiled) {
    TimingReport::RunRow row;
    row.id = id;
    row.index = r->index;
    row.label = r->info.label();
    for (const auto& [key, ms] : perRun[id]) {
      perStage[key].push_back(ms);
      row.values.push_back({key.first, ms, key.second});
    }
    rep.runs.push_back(std::move(row));
  }
  for (const auto& [key, values] : perStage)
    rep.stages.push_back({key.first, key.second, computeStats(values)});
  for (const auto& [key, values] : perKernel) {
    rep.kernels.push_back({key.first, key.second, TimingSource::Cupti, computeStats(values)});
  }
  std::stable_sort(rep.kernels.begin(), rep.kernels.end(),
                   [](const KernelStat& a, const KernelStat& b) { return int(a.stage) < int(b.stage); });

  // Derived figures: prefer the report's source; fall back to whichever source timed predict/sparse.
  DerivedFigures& d = rep.derived;
  auto hasSparse = [&](TimingSource src) {
    for (const auto& [id, values] : perRun)
      if (profiled.count(id) && (values.count({Stage::Sparse, src}) || values.count({Stage::Predict, src})))
        return true;
    return false;
  };
  std::optional<TimingSource> src;
  for (TimingSource s : {in.source, TimingSource::Cupti, TimingSource::CudaEvent, TimingSource::WallClock}) {
    if (hasSparse(s)) {
      src = s;
      break;
    }
  }
  if (!src) {
    d.note = "no predict/sparse stage times were recorded";
  } else {
    d.source = *src;
    std::vector<double> sparse, dense, reference;
    for (const auto& [id, values] : perRun) {
      if (!profiled.count(id)) continue;
      auto get = [&](Stage st) -> std::optional<double> {
        auto it = values.find({st, *src});
        return it == values.end() ? std::nullopt : std::optional<double>(it->second);
      };
      auto p = get(Stage::Predict), s = get(Stage::Sparse);
      // A run with a dense stage but no sparse stage is a dense baseline run (its predict kernels
      // belong to it): it must not enter the sparse figure.
      const bool denseBaseline = !s && get(Stage::Dense);
      if ((p || s) && !denseBaseline) sparse.push_back(p.value_or(0) + s.value_or(0));
      if (auto v = get(Stage::Dense)) dense.push_back(*v);
      if (auto v = get(Stage::Reference)) reference.push_back(*v);
    }
    if (!sparse.empty()) d.sparseMs = median(sparse);
    if (!dense.empty()) {
      d.denseMs = median(dense);
      d.speedupBaseline = "dense";
    } else if (!reference.empty()) {
      d.denseMs = median(reference);
      d.speedupBaseline = "reference";
    }
    if (*src != in.source) d.note = std::string("figures use ") + toString(*src) + " stage times";
    if (d.sparseMs && *d.sparseMs > 0) {
      if (d.denseMs && *d.denseMs > 0) d.speedup = *d.denseMs / *d.sparseMs;
      if (in.workload.valid()) {
        d.denseEquivalentTops = in.workload.denseFlops() / (*d.sparseMs * 1e-3) * 1e-12;
        if (in.workload.computedQkBlocks > 0 && in.workload.blockQ > 0)
          d.executedTops = in.workload.executedFlops() / (*d.sparseMs * 1e-3) * 1e-12;
      }
    }
    if (d.denseMs && *d.denseMs > 0 && in.workload.valid())
      d.denseTops = in.workload.denseFlops() / (*d.denseMs * 1e-3) * 1e-12;
    if (!d.denseMs)
      d.note += std::string(d.note.empty() ? "" : "; ") + "no dense or reference time: no speedup";
    if (!in.workload.valid()) d.note += std::string(d.note.empty() ? "" : "; ") + "no workload: no TOPS";
  }

  // The SM clock the runs actually ran at, next to the max clock: a throttled or idle-clocked GPU explains
  // a slow figure.
  std::vector<double> clocks;
  for (const auto& [id, r] : profiled)
    if (r->smClockMHz && *r->smClockMHz > 0) clocks.push_back(*r->smClockMHz);
  if (!clocks.empty()) {
    const Stats c = computeStats(clocks);
    rep.smClockMHz = c;
    rep.smClockSource = in.smClockSource;
    rep.smClockSampleUs = in.smClockSampleUs;
    char buf[160];
    std::snprintf(buf, sizeof buf, "SM clock during runs %.0f MHz median (%.0f-%.0f)", c.median, c.min,
                  c.max);
    std::string note = buf;
    if (c.count < rep.profiledRuns)
      note += " in " + std::to_string(c.count) + " of " + std::to_string(rep.profiledRuns) + " runs";
    if (in.device.maxSmClockKHz > 0) {
      std::snprintf(buf, sizeof buf, ", max %.0f MHz", in.device.maxSmClockKHz / 1000.0);
      note += buf;
    }
    std::string src = in.smClockSource;
    for (char& ch : src) ch = char(std::toupper(static_cast<unsigned char>(ch)));
    rep.device.clockNote = note + " (" + src + ")";
  } else {
    rep.smClockMissing = !in.smClockMissing.empty() ? in.smClockMissing
                         : rep.profiledRuns == 0    ? std::string("no profiled runs")
                                                    : std::string("no SM clock samples in the profiled runs");
    // Without a GPU the note already says so; repeating "no GPU" would add nothing.
    if (in.device.gpu)
      rep.device.clockNote += (rep.device.clockNote.empty() ? "" : "; ") +
                              std::string("SM clock during runs not sampled: ") + rep.smClockMissing;
  }

  // Timeline. Profiled runs only; one clock domain per report (CUPTI timestamps or host steady_clock).
  uint64_t origin = UINT64_MAX;
  for (const auto& [id, r] : profiled) origin = std::min(origin, r->startNs);
  for (const KernelSample& k : in.kernels)
    if (profiled.count(k.runId)) origin = std::min(origin, k.startNs);
  if (origin == UINT64_MAX) origin = 0;
  auto us = [&](uint64_t ns) { return ns >= origin ? double(ns - origin) * 1e-3 : 0.0; };

  const std::string runsProcess = std::string("sparge runs (") + toString(in.source) + ")";
  rep.tracks.push_back({0, 0, runsProcess, "runs"});
  bool haveSampleTrack = false;
  std::set<std::pair<int, int>> gpuTracks;
  for (const auto& [id, r] : profiled) {
    TimelineEvent e;
    e.name = r->info.label() + " #" + std::to_string(r->index);
    e.category = "run";
    e.tsUs = us(r->startNs);
    e.durUs = r->endNs > r->startNs ? double(r->endNs - r->startNs) * 1e-3 : 0.0;
    e.pid = 0;
    e.tid = 0;
    e.args = {{"run", std::to_string(id)},  {"index", std::to_string(r->index)}, {"entry", r->info.entry},
              {"heads", r->info.heads},     {"params", r->info.params},          {"engine", r->info.engine},
              {"clock", toString(r->clock)}};
    rep.timeline.push_back(std::move(e));
    // Stage samples carry no start time: lay them end to end from the run's start.
    double cursor = us(r->startNs);
    for (const StageSample& s : r->samples) {
      if (s.stage == Stage::Total) continue;
      haveSampleTrack = true;
      TimelineEvent t;
      t.name = toString(s.stage);
      t.category = toString(s.stage);
      t.tsUs = cursor;
      t.durUs = s.ms * 1e3;
      t.pid = 0;
      t.tid = 1;
      t.args = {{"run", std::to_string(id)},
                {"source", toString(s.source)},
                {"placement", "sequential (stage times carry no start timestamp)"}};
      cursor += t.durUs;
      rep.timeline.push_back(std::move(t));
    }
  }
  if (haveSampleTrack) rep.tracks.push_back({0, 1, runsProcess, "stages"});
  for (const KernelSample& k : in.kernels) {
    if (!profiled.count(k.runId)) continue;
    TimelineEvent e;
    e.name = k.name;
    e.category = toString(k.stage);
    e.tsUs = us(k.startNs);
    e.durUs = double(k.endNs - std::min(k.endNs, k.startNs)) * 1e-3;
    e.pid = 1 + int(k.deviceId);
    e.tid = int(k.streamId);
    e.args = {{"stage", toString(k.stage)},
              {"run", std::to_string(k.runId)},
              {"attribution", toString(k.attribution)},
              {"source", toString(k.source)},
              {"mangled", k.rawName}};
    gpuTracks.insert({e.pid, e.tid});
    rep.timeline.push_back(std::move(e));
  }
  for (const auto& [pid, tid] : gpuTracks) {
    std::string gpu = "GPU " + std::to_string(pid - 1);
    if (in.device.gpu && !in.device.name.empty()) gpu += ": " + in.device.name;
    rep.tracks.push_back({pid, tid, gpu + " (cupti)", "stream " + std::to_string(tid)});
  }
  return rep;
}

}  // namespace sparge::prof
