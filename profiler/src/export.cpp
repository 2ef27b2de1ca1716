// JSON, CSV and Chrome trace renderings of a TimingReport, and the atomic writer.
#include "sparge/profiler/export.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "sparge/core/atomic_file.h"
#include "sparge/core/error.h"
#include "sparge/core/option_values.h"

namespace sparge::prof {

namespace {

using nlohmann::json;

// JSON has no NaN or infinity; a missing figure is null.
json number(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}
json optional(const std::optional<double>& v) {
  return v ? number(*v) : json(nullptr);
}

json statsJson(const Stats& s) {
  return {{"count", s.count},
          {"min_ms", number(s.min)},
          {"median_ms", number(s.median)},
          {"max_ms", number(s.max)},
          {"mean_ms", number(s.mean)},
          {"total_ms", number(s.total)},
          {"stddev_ms", number(s.stddev)}};
}

json deviceJson(const DeviceInfo& d) {
  return {{"gpu", d.gpu},
          {"index", d.index},
          {"name", d.name},
          {"compute_capability", d.gpu ? std::to_string(d.ccMajor) + "." + std::to_string(d.ccMinor) : ""},
          {"max_sm_clock_mhz", d.maxSmClockKHz > 0 ? json(d.maxSmClockKHz / 1000.0) : json(nullptr)},
          {"clock_note", d.clockNote},
          {"driver_version", d.driverVersion},
          {"runtime_version", d.runtimeVersion},
          {"cupti_version", d.cuptiVersion},
          {"host_cpu", d.hostCpu},
          {"probe_error", d.probeError}};
}

// The observed SM clock: {min, median, max, samples, source, sample_cost_us} or null (device.sm_clock_note
// says why).
json smClockJson(const TimingReport& r) {
  if (!r.smClockMHz) return nullptr;
  const Stats& c = *r.smClockMHz;
  return {{"min", number(c.min)},      {"median", number(c.median)},
          {"max", number(c.max)},      {"samples", c.count},
          {"source", r.smClockSource}, {"sample_cost_us", number(r.smClockSampleUs)}};
}

json runInfoJson(const RunInfo& r) {
  return {{"entry", r.entry},
          {"heads", r.heads},
          {"params", r.params},
          {"engine", r.engine},
          {"label", r.label()}};
}

json workloadJson(const Workload& w) {
  return {{"batch", w.batch},
          {"heads", w.heads},
          {"tokens_q", w.tokensQ},
          {"tokens_kv", w.tokensKV},
          {"head_dim", w.headDim},
          {"head_dim_v", w.headDimV},
          {"causal", w.causal},
          {"block_q", w.blockQ},
          {"block_k", w.blockK},
          {"computed_qk_blocks", w.computedQkBlocks},
          {"computed_pv_blocks", w.computedPvBlocks},
          {"dense_flops", w.valid() ? json(w.denseFlops()) : json(nullptr)},
          {"executed_flops", w.valid() && w.blockQ > 0 ? json(w.executedFlops()) : json(nullptr)}};
}

json launchJson(const LaunchConfig& l) {
  if (!l.known()) return nullptr;
  return {{"grid", l.grid},
          {"block", l.block},
          {"registers_per_thread", l.registersPerThread},
          {"static_shared_bytes", l.staticSharedBytes},
          {"dynamic_shared_bytes", l.dynamicSharedBytes}};
}

std::string csvField(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string csvNumber(double v) {
  if (!std::isfinite(v)) return "";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.6f", v);
  return buf;
}

std::string csvOptional(const std::optional<double>& v) {
  return v ? csvNumber(*v) : std::string("n/a");
}

std::string oneLine(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  std::replace(text.begin(), text.end(), '\r', ' ');
  return text;
}

}  // namespace

TimingFormat formatForPath(const std::string& path) {
  // The CLI checks --timings by the same rule (core::outputFormat) before it runs anything.
  const std::string format = core::outputFormat(path, {".json", ".csv", ".trace.json"});
  if (format == ".trace.json") return TimingFormat::ChromeTrace;
  if (format == ".json") return TimingFormat::Json;
  if (format == ".csv") return TimingFormat::Csv;
  throw Error(path, "unknown timings format: use .json, .csv or .trace.json");
}

std::string toJson(const TimingReport& r) {
  json j;
  j["sparge_timings_version"] = r.version;
  j["source"] = toString(r.source);
  j["source_reason"] = r.sourceReason;
  j["clock"] = r.clock;
  j["device"] = deviceJson(r.device);
  j["device"]["sm_clock_mhz"] = smClockJson(r);
  j["device"]["sm_clock_missing"] = r.smClockMissing;
  j["run"] = runInfoJson(r.run);
  j["workload"] = workloadJson(r.workload);
  j["warmup_runs"] = r.warmupRuns;
  j["profiled_runs"] = r.profiledRuns;
  j["unattributed_kernels"] = r.unattributedKernels;
  j["dropped_records"] = r.droppedRecords;
  json stages = json::array();
  for (const StageStat& s : r.stages) {
    json e = statsJson(s.ms);
    e["stage"] = toString(s.stage);
    e["source"] = toString(s.source);
    stages.push_back(std::move(e));
  }
  j["stages"] = std::move(stages);
  json kernels = json::array();
  for (const KernelStat& k : r.kernels) {
    json e = statsJson(k.ms);
    e["name"] = k.name;
    e["stage"] = toString(k.stage);
    e["source"] = toString(k.source);
    e["launch"] = launchJson(k.launch);
    e["dense_equivalent_tops"] = optional(k.denseEquivalentTops);
    e["executed_tops"] = optional(k.executedTops);
    kernels.push_back(std::move(e));
  }
  j["kernels"] = std::move(kernels);
  json runs = json::array();
  for (const auto& row : r.runs) {
    json values = json::array();
    for (const StageSample& v : row.values)
      values.push_back({{"stage", toString(v.stage)}, {"source", toString(v.source)}, {"ms", number(v.ms)}});
    runs.push_back(
        {{"id", row.id}, {"index", row.index}, {"label", row.label}, {"stages", std::move(values)}});
  }
  j["runs"] = std::move(runs);
  const DerivedFigures& d = r.derived;
  j["derived"] = {{"source", toString(d.source)},
                  {"sparse_ms", optional(d.sparseMs)},
                  {"dense_ms", optional(d.denseMs)},
                  {"cudnn_ms", optional(d.cudnnMs)},
                  {"speedup_baseline", d.speedupBaseline},
                  {"speedup", optional(d.speedup)},
                  {"speedup_over_dense", optional(d.speedupOverDense)},
                  {"dense_equivalent_tops", optional(d.denseEquivalentTops)},
                  {"executed_tops", optional(d.executedTops)},
                  {"dense_tops", optional(d.denseTops)},
                  {"cudnn_tops", optional(d.cudnnTops)},
                  {"note", d.note}};
  j["notes"] = r.notes;
  return j.dump(2) + "\n";
}

std::string toCsv(const TimingReport& r) {
  std::string out;
  auto comment = [&](const std::string& key, const std::string& value) {
    out += "# " + key + ": " + oneLine(value) + "\n";
  };
  comment("sparge_timings_version", std::to_string(r.version));
  comment("source", toString(r.source));
  comment("source_reason", r.sourceReason);
  comment("clock", r.clock);
  comment("device", r.device.name);
  comment("max_sm_clock_mhz",
          r.device.maxSmClockKHz > 0 ? csvNumber(r.device.maxSmClockKHz / 1000.0) : "n/a");
  if (r.smClockMHz) {
    comment("sm_clock_mhz", "min " + csvNumber(r.smClockMHz->min) + " median " +
                                csvNumber(r.smClockMHz->median) + " max " + csvNumber(r.smClockMHz->max) +
                                " (" + r.smClockSource + ", " + std::to_string(r.smClockMHz->count) +
                                " runs)");
  } else {
    comment("sm_clock_mhz", "n/a (" + r.smClockMissing + ")");
  }
  comment("clock_note", r.device.clockNote);
  comment("driver_version", std::to_string(r.device.driverVersion));
  comment("runtime_version", std::to_string(r.device.runtimeVersion));
  comment("run", r.run.label());
  comment("runs",
          std::to_string(r.profiledRuns) + " profiled after " + std::to_string(r.warmupRuns) + " warm-up");
  comment("speedup", csvOptional(r.derived.speedup) + " (baseline " +
                         (r.derived.speedupBaseline.empty() ? "none" : r.derived.speedupBaseline) + ")");
  comment("speedup_over_dense", csvOptional(r.derived.speedupOverDense));
  comment("cudnn_ms", csvOptional(r.derived.cudnnMs));
  comment("dense_equivalent_tops", csvOptional(r.derived.denseEquivalentTops));
  comment("executed_tops", csvOptional(r.derived.executedTops));
  for (const std::string& n : r.notes) comment("note", n);
  out +=
      "kind,name,stage,source,count,min_ms,median_ms,max_ms,mean_ms,total_ms,grid,block,"
      "registers_per_thread,static_shared_bytes,dynamic_shared_bytes\n";
  auto row = [&](const char* kind, const std::string& name, Stage stage, TimingSource source, const Stats& s,
                 const LaunchConfig& l) {
    std::vector<std::string> cells{kind,
                                   csvField(name),
                                   toString(stage),
                                   toString(source),
                                   std::to_string(s.count),
                                   csvNumber(s.min),
                                   csvNumber(s.median),
                                   csvNumber(s.max),
                                   csvNumber(s.mean),
                                   csvNumber(s.total)};
    if (l.known())
      cells.insert(cells.end(), {l.gridLabel(), l.blockLabel(), std::to_string(l.registersPerThread),
                                 std::to_string(l.staticSharedBytes), std::to_string(l.dynamicSharedBytes)});
    else
      cells.resize(cells.size() + 5);
    for (size_t i = 0; i < cells.size(); ++i) out += (i ? "," : "") + cells[i];
    out += '\n';
  };
  for (const StageStat& s : r.stages)
    row("stage", toString(s.stage), s.stage, s.source, s.ms, LaunchConfig{});
  for (const KernelStat& k : r.kernels) row("kernel", k.name, k.stage, k.source, k.ms, k.launch);
  return out;
}

std::string toChromeTrace(const TimingReport& r) {
  json events = json::array();
  std::set<int> namedProcesses;
  for (const TimelineTrack& t : r.tracks) {
    if (namedProcesses.insert(t.pid).second) {
      events.push_back({{"name", "process_name"},
                        {"ph", "M"},
                        {"pid", t.pid},
                        {"tid", t.tid},
                        {"args", {{"name", t.processName}}}});
      events.push_back({{"name", "process_sort_index"},
                        {"ph", "M"},
                        {"pid", t.pid},
                        {"tid", t.tid},
                        {"args", {{"sort_index", t.pid}}}});
    }
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", t.pid},
                      {"tid", t.tid},
                      {"args", {{"name", t.threadName}}}});
  }
  for (const TimelineEvent& e : r.timeline) {
    json args = json::object();
    for (const auto& [k, v] : e.args) args[k] = v;
    events.push_back({{"name", e.name},
                      {"cat", e.category},
                      {"ph", "X"},
                      {"ts", number(e.tsUs)},
                      {"dur", number(e.durUs)},
                      {"pid", e.pid},
                      {"tid", e.tid},
                      {"args", std::move(args)}});
  }
  json j;
  j["traceEvents"] = std::move(events);
  j["displayTimeUnit"] = "ms";
  j["otherData"] = {{"sparge_timings_version", r.version},
                    {"source", toString(r.source)},
                    {"clock", r.clock},
                    {"device", r.device.name},
                    {"source_reason", r.sourceReason},
                    {"clock_note", r.device.clockNote},
                    {"max_sm_clock_mhz",
                     r.device.maxSmClockKHz > 0 ? json(r.device.maxSmClockKHz / 1000.0) : json(nullptr)},
                    {"sm_clock_mhz", smClockJson(r)},
                    {"sm_clock_missing", r.smClockMissing}};
  return j.dump() + "\n";
}

std::string render(const TimingReport& report, TimingFormat format) {
  switch (format) {
    case TimingFormat::Json:
      return toJson(report);
    case TimingFormat::Csv:
      return toCsv(report);
    case TimingFormat::ChromeTrace:
      return toChromeTrace(report);
  }
  return toJson(report);
}

void writeTimings(const TimingReport& report, const std::string& path) {
  core::writeTextAtomically(path, render(report, formatForPath(path)));
}

}  // namespace sparge::prof
