// Building a TimingReport from runs and attributed kernels: statistics, derived figures, timeline.
#include "sparge/profiler/report.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

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
using KernelKey = std::tuple<std::string, Stage, LaunchConfig>;

double median(std::vector<double> v) {
  return computeStats(std::move(v)).median;
}

std::string join(const std::string& a, const std::string& b) {
  return a.empty() ? b : b.empty() ? a : a + "; " + b;
}

// What the kernels and samples of the profiled runs add up to, before any statistic.
struct Tally {
  std::map<uint64_t, const RunRecord*> profiled;
  std::set<uint64_t> warm;
  std::map<uint64_t, std::map<Key, double>> perRun;         // run -> (stage, source) -> ms
  std::map<KernelKey, std::vector<double>> perKernel;       // per launch
  std::map<uint64_t, std::map<Stage, int>> launchesPerRun;  // run -> stage -> kernel launches
  std::vector<KernelSample> records;
};

void countRuns(const ReportInput& in, TimingReport& rep, Tally& t) {
  for (const RunRecord& r : in.runs) {
    if (r.warmup) {
      ++rep.warmupRuns;
      t.warm.insert(r.id);
    } else {
      ++rep.profiledRuns;
      t.profiled[r.id] = &r;
      if (rep.profiledRuns == 1) rep.run = r.info;
    }
  }
}

// Kernels of profiled runs by (stage, source) per run and by kernel; a run's `otherKernels` claims the
// kernels that no name rule attributes (not those named sparge_other_).
void tallyKernels(const ReportInput& in, TimingReport& rep, Tally& t) {
  for (const KernelSample& sample : in.kernels) {
    if (t.warm.count(sample.runId)) continue;
    auto run = t.profiled.find(sample.runId);
    if (run == t.profiled.end()) {
      ++rep.unattributedKernels;
      continue;
    }
    KernelSample k = sample;
    if (k.stage == Stage::Other && !ruleStage(k.name)) k.stage = run->second->info.otherKernels;
    t.perRun[k.runId][{k.stage, k.source}] += k.ms();
    t.perRun[k.runId][{Stage::Total, k.source}] += k.ms();
    t.perKernel[{k.name, k.stage, k.launch}].push_back(k.ms());
    ++t.launchesPerRun[k.runId][k.stage];
    t.records.push_back(std::move(k));
  }
  for (const auto& [id, r] : t.profiled) {
    auto& values = t.perRun[id];
    for (const StageSample& s : r->samples) values[{s.stage, s.source}] += s.ms;
  }
}

void stageStatistics(TimingReport& rep, const Tally& t) {
  std::map<Key, std::vector<double>> perStage;
  for (const auto& [id, r] : t.profiled) {
    TimingReport::RunRow row;
    row.id = id;
    row.index = r->index;
    row.label = r->info.label();
    auto values = t.perRun.find(id);
    if (values != t.perRun.end()) {
      for (const auto& [key, ms] : values->second) {
        perStage[key].push_back(ms);
        row.values.push_back({key.first, ms, key.second});
      }
    }
    rep.runs.push_back(std::move(row));
  }
  for (const auto& [key, values] : perStage)
    rep.stages.push_back({key.first, key.second, computeStats(values)});
}

// True when every run that launched kernels of `stage` launched exactly one.
bool oneLaunchPerRun(const Tally& t, Stage stage) {
  for (const auto& [id, stages] : t.launchesPerRun) {
    auto it = stages.find(stage);
    if (it != stages.end() && it->second != 1) return false;
  }
  return true;
}

void kernelStatistics(const ReportInput& in, TimingReport& rep, const Tally& t) {
  for (const auto& [key, values] : t.perKernel) {
    KernelStat k;
    k.name = std::get<0>(key);
    k.stage = std::get<1>(key);
    k.launch = std::get<2>(key);
    k.ms = computeStats(values);
    const bool attention = k.stage == Stage::Sparse || k.stage == Stage::Dense || k.stage == Stage::Cudnn;
    if (attention && in.workload.valid() && k.ms.median > 0 && oneLaunchPerRun(t, k.stage)) {
      const double seconds = k.ms.median * 1e-3;
      k.denseEquivalentTops = in.workload.denseFlops() / seconds * 1e-12;
      const bool executedKnown = k.stage != Stage::Sparse || in.workload.computedQkBlocks > 0;
      if (executedKnown)
        k.executedTops = (k.stage == Stage::Sparse ? in.workload.executedFlops() : in.workload.denseFlops()) /
                         seconds * 1e-12;
    }
    rep.kernels.push_back(std::move(k));
  }
  std::stable_sort(rep.kernels.begin(), rep.kernels.end(),
                   [](const KernelStat& a, const KernelStat& b) { return int(a.stage) < int(b.stage); });
}

// Per run with `src` stage times: the sparse call, our dense call and cuDNN's, as the figures define them.
struct RunFigures {
  std::vector<double> sparse, dense, cudnn, reference;
};

RunFigures runFigures(const Tally& t, TimingSource src) {
  RunFigures f;
  for (const auto& run : t.perRun) {
    if (!t.profiled.count(run.first)) continue;
    const auto& values = run.second;  // a structured binding: clang 14 cannot capture it in the lambda
    auto get = [&](Stage st) -> std::optional<double> {
      auto it = values.find({st, src});
      return it == values.end() ? std::nullopt : std::optional<double>(it->second);
    };
    const auto p = get(Stage::Predict), q = get(Stage::Quantize), s = get(Stage::Sparse);
    const auto d = get(Stage::Dense), c = get(Stage::Cudnn);
    // A run with a dense or cuDNN stage but no sparse stage is a baseline run: its predict and quantize
    // kernels belong to it and it must not enter the sparse figure.
    const bool baseline = !s && (d || c);
    if ((p || s) && !baseline) f.sparse.push_back(p.value_or(0) + q.value_or(0) + s.value_or(0));
    if (d) f.dense.push_back(*d + (baseline ? q.value_or(0) : 0.0));
    if (c) f.cudnn.push_back(*c);
    if (auto v = get(Stage::Reference)) f.reference.push_back(*v);
  }
  return f;
}

std::optional<TimingSource> figureSource(const Tally& t, TimingSource preferred) {
  for (TimingSource s : {preferred, TimingSource::Cupti, TimingSource::CudaEvent, TimingSource::WallClock}) {
    for (const auto& [id, values] : t.perRun)
      if (t.profiled.count(id) && (values.count({Stage::Sparse, s}) || values.count({Stage::Predict, s})))
        return s;
  }
  return std::nullopt;
}

// Picks the dense time the headline divides: the faster of our dense kernel and cuDNN, else the reference.
void chooseBaseline(DerivedFigures& d, const RunFigures& f) {
  if (!f.dense.empty()) d.denseMs = median(f.dense);
  if (!f.cudnn.empty()) d.cudnnMs = median(f.cudnn);
  std::optional<double> best;
  if (d.denseMs) {
    best = d.denseMs;
    d.speedupBaseline = "dense";
  }
  if (d.cudnnMs && (!best || *d.cudnnMs < *best)) {
    best = d.cudnnMs;
    d.speedupBaseline = "cudnn";
  }
  if (!best && !f.reference.empty()) {
    d.denseMs = median(f.reference);
    best = d.denseMs;
    d.speedupBaseline = "reference";
  }
  if (!d.sparseMs || *d.sparseMs <= 0) return;
  if (best && *best > 0) d.speedup = *best / *d.sparseMs;
  if (d.denseMs && *d.denseMs > 0 && d.speedupBaseline != "reference")
    d.speedupOverDense = *d.denseMs / *d.sparseMs;
}

DerivedFigures derive(const ReportInput& in, const Tally& t) {
  DerivedFigures d;
  const std::optional<TimingSource> src = figureSource(t, in.source);
  if (!src) {
    d.note = "no predict/sparse stage times were recorded";
    return d;
  }
  d.source = *src;
  const RunFigures f = runFigures(t, *src);
  if (!f.sparse.empty()) d.sparseMs = median(f.sparse);
  chooseBaseline(d, f);
  if (*src != in.source) d.note = std::string("figures use ") + toString(*src) + " stage times";
  const Workload& w = in.workload;
  auto tops = [&](const std::optional<double>& ms) -> std::optional<double> {
    if (!ms || *ms <= 0 || !w.valid()) return std::nullopt;
    return w.denseFlops() / (*ms * 1e-3) * 1e-12;
  };
  d.denseEquivalentTops = tops(d.sparseMs);
  if (d.sparseMs && *d.sparseMs > 0 && w.valid() && w.computedQkBlocks > 0 && w.blockQ > 0)
    d.executedTops = w.executedFlops() / (*d.sparseMs * 1e-3) * 1e-12;
  d.denseTops = tops(d.denseMs);
  d.cudnnTops = tops(d.cudnnMs);
  if (d.speedupBaseline.empty()) d.note = join(d.note, "no dense or reference time: no speedup");
  if (!w.valid()) d.note = join(d.note, "no workload: no TOPS");
  return d;
}

// The SM clock the runs actually ran at, next to the max clock: a throttled or idle-clocked GPU explains a
// slow figure.
void smClockFigures(const ReportInput& in, TimingReport& rep, const Tally& t) {
  std::vector<double> clocks;
  for (const auto& [id, r] : t.profiled)
    if (r->smClockMHz && *r->smClockMHz > 0) clocks.push_back(*r->smClockMHz);
  if (clocks.empty()) {
    rep.smClockMissing = !in.smClockMissing.empty() ? in.smClockMissing
                         : rep.profiledRuns == 0    ? std::string("no profiled runs")
                                                    : std::string("no SM clock samples in the profiled runs");
    // Without a GPU the note already says so; repeating "no GPU" would add nothing.
    if (in.device.gpu)
      rep.device.clockNote =
          join(rep.device.clockNote, "SM clock during runs not sampled: " + rep.smClockMissing);
    return;
  }
  const Stats c = computeStats(clocks);
  rep.smClockMHz = c;
  rep.smClockSource = in.smClockSource;
  rep.smClockSampleUs = in.smClockSampleUs;
  char buf[160];
  std::snprintf(buf, sizeof buf, "SM clock during runs %.0f MHz median (%.0f-%.0f)", c.median, c.min, c.max);
  std::string note = buf;
  if (c.count < rep.profiledRuns)
    note += " in " + std::to_string(c.count) + " of " + std::to_string(rep.profiledRuns) + " runs";
  if (in.device.maxSmClockKHz > 0) {
    std::snprintf(buf, sizeof buf, ", max %.0f MHz", in.device.maxSmClockKHz / 1000.0);
    note += buf;
  }
  std::string source = in.smClockSource;
  for (char& ch : source) ch = char(std::toupper(static_cast<unsigned char>(ch)));
  rep.device.clockNote = note + " (" + source + ")";
}

std::vector<std::pair<std::string, std::string>> launchArgs(const LaunchConfig& l) {
  if (!l.known()) return {};
  return {{"grid", l.gridLabel()},
          {"block", l.blockLabel()},
          {"registers_per_thread", std::to_string(l.registersPerThread)},
          {"static_shared_bytes", std::to_string(l.staticSharedBytes)},
          {"dynamic_shared_bytes", std::to_string(l.dynamicSharedBytes)}};
}

// Run spans, engine stage samples laid end to end, and kernels. One clock domain per report (CUPTI timestamps
// or host steady_clock); profiled runs only.
void buildTimeline(const ReportInput& in, TimingReport& rep, const Tally& t) {
  uint64_t origin = UINT64_MAX;
  for (const auto& [id, r] : t.profiled) origin = std::min(origin, r->startNs);
  for (const KernelSample& k : t.records) origin = std::min(origin, k.startNs);
  if (origin == UINT64_MAX) origin = 0;
  auto us = [&](uint64_t ns) { return ns >= origin ? double(ns - origin) * 1e-3 : 0.0; };

  const std::string runsProcess = std::string("sparge runs (") + toString(in.source) + ")";
  rep.tracks.push_back({0, 0, runsProcess, "runs"});
  bool haveSampleTrack = false;
  for (const auto& [id, r] : t.profiled) {
    TimelineEvent e;
    e.name = r->info.label() + " #" + std::to_string(r->index);
    e.category = "run";
    e.tsUs = us(r->startNs);
    e.durUs = r->endNs > r->startNs ? double(r->endNs - r->startNs) * 1e-3 : 0.0;
    e.args = {{"run", std::to_string(id)},  {"index", std::to_string(r->index)}, {"entry", r->info.entry},
              {"heads", r->info.heads},     {"params", r->info.params},          {"engine", r->info.engine},
              {"clock", toString(r->clock)}};
    rep.timeline.push_back(std::move(e));
    // Stage samples carry no start time: lay them end to end from the run's start.
    double cursor = us(r->startNs);
    for (const StageSample& s : r->samples) {
      if (s.stage == Stage::Total) continue;
      haveSampleTrack = true;
      TimelineEvent x;
      x.name = toString(s.stage);
      x.category = toString(s.stage);
      x.tsUs = cursor;
      x.durUs = s.ms * 1e3;
      x.tid = 1;
      x.args = {{"run", std::to_string(id)},
                {"source", toString(s.source)},
                {"placement", "sequential (stage times carry no start timestamp)"}};
      cursor += x.durUs;
      rep.timeline.push_back(std::move(x));
    }
  }
  if (haveSampleTrack) rep.tracks.push_back({0, 1, runsProcess, "stages"});
  std::set<std::pair<int, int>> gpuTracks;
  for (const KernelSample& k : t.records) {
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
    for (auto& a : launchArgs(k.launch)) e.args.push_back(std::move(a));
    gpuTracks.insert({e.pid, e.tid});
    rep.timeline.push_back(std::move(e));
  }
  for (const auto& [pid, tid] : gpuTracks) {
    std::string gpu = "GPU " + std::to_string(pid - 1);
    if (in.device.gpu && !in.device.name.empty()) gpu += ": " + in.device.name;
    rep.tracks.push_back({pid, tid, gpu + " (cupti)", "stream " + std::to_string(tid)});
  }
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
  rep.notes = in.notes;
  Tally t;
  countRuns(in, rep, t);
  tallyKernels(in, rep, t);
  stageStatistics(rep, t);
  kernelStatistics(in, rep, t);
  rep.derived = derive(in, t);
  smClockFigures(in, rep, t);
  buildTimeline(in, rep, t);
  rep.records = std::move(t.records);
  return rep;
}

}  // namespace sparge::prof
