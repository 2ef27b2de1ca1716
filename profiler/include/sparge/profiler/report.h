// Timing reports: what was run, on which device, measured by which clock, and statistics per stage and
// kernel.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sparge/profiler/activity.h"
#include "sparge/profiler/stage.h"
#include "sparge/profiler/stats.h"

namespace sparge::core {
struct EntryResult;
struct RunConfig;
}  // namespace sparge::core

namespace sparge::prof {

// What one profiled run was: shown in reports and as the label of its trace span.
struct RunInfo {
  std::string entry;   // capture entry name
  std::string heads;   // "all", "0-7", "0,3,5"
  std::string params;  // "theta=0.6 tau=0.98 lambda=50 128x64"
  std::string engine;  // "cpu (2 threads)", "cuda: NVIDIA H100 ..."
  // Kernels of this run that no name rule attributes (stageForKernel gives Other) count as this stage: a
  // baseline run of another library's kernels (Stage::Cudnn) sets it, whatever those kernels are called.
  Stage otherKernels = Stage::Other;

  std::string label() const;  // "l0 heads all [theta=0.6 ...]"
};

// Builds a RunInfo from what the CLI has before a run: the entry name, the config and the head list
// (empty = all heads).
RunInfo makeRunInfo(const std::string& entry, const core::RunConfig& config,
                    const std::vector<int64_t>& heads, const std::string& engine = {});

// The work of one run, for TOPS figures.
struct Workload {
  int64_t batch = 0;
  int64_t heads = 0;  // query heads run per batch item
  int64_t tokensQ = 0;
  int64_t tokensKV = 0;
  int64_t headDim = 0;
  int64_t headDimV = 0;
  bool causal = false;
  int blockQ = 0;
  int blockK = 0;
  int64_t computedQkBlocks = 0;  // blocks whose QK^T was computed (Stage-1 selected), summed over heads
  int64_t computedPvBlocks = 0;  // blocks whose PV was computed, summed over heads

  bool valid() const { return batch > 0 && heads > 0 && tokensQ > 0 && tokensKV > 0 && headDim > 0; }
  // 2·B·H·Nq·Nkv·(D + Dv), i.e. 4·B·H·Nq·Nkv·D when Dv = D; halved when causal.
  double denseFlops() const;
  // (computedQk·blockQ·blockK·D + computedPv·blockQ·blockK·Dv)·2.
  double executedFlops() const;

  static Workload fromResult(const core::EntryResult& result);
};

struct DeviceInfo {
  bool gpu = false;
  int index = -1;
  std::string name;  // GPU name, or the host CPU model when there is no GPU
  int ccMajor = 0, ccMinor = 0;
  int maxSmClockKHz = 0;  // cudaDevAttrClockRate (NVML's max SM clock if that fails): not the current one
  int driverVersion = 0;  // cudaDriverGetVersion, e.g. 13000
  int runtimeVersion = 0;
  int cuptiVersion = 0;  // cuptiGetVersion (API version)
  std::string hostCpu;
  // What we know about the SM clock, in words. In a report: the SM clock observed during the runs, e.g.
  // "SM clock during runs 1980 MHz median (1755-1980), max 1980 MHz (NVML)", or why it was not sampled.
  std::string clockNote;
  std::string probeError;  // why no GPU was found, when none was
};

// Queries device `index` (never throws; without CUDA or a GPU `gpu` is false and `probeError` says why).
DeviceInfo queryDevice(int index = 0);

// A stage time measured outside CUPTI (wall clock, CUDA events) or supplied by an engine.
struct StageSample {
  Stage stage = Stage::Other;
  double ms = 0;
  TimingSource source = TimingSource::WallClock;
};

// One begin()/end() pair. startNs/endNs are in `clock`'s time base (CUPTI timestamps under CUPTI, host
// steady_clock otherwise).
struct RunRecord {
  uint64_t id = 0;
  int index = 0;  // 0-based, warm-up runs included
  bool warmup = false;
  RunInfo info;
  TimingSource clock = TimingSource::WallClock;
  uint64_t startNs = 0;
  uint64_t endNs = 0;
  std::vector<StageSample> samples;
  std::optional<double> smClockMHz;  // SM clock read (NVML) right after the run's device sync, if read
};

struct StageStat {
  Stage stage = Stage::Other;
  TimingSource source = TimingSource::WallClock;
  Stats ms;  // over profiled runs: one value per run that had this stage (kernels of a run summed)
};

// One kernel (name and launch configuration) over the profiled runs.
struct KernelStat {
  std::string name;
  Stage stage = Stage::Other;
  TimingSource source = TimingSource::Cupti;
  LaunchConfig launch;
  Stats ms;  // over launches of profiled runs
  // For an attention kernel launched once per run (sparse, dense or cuDNN stage): the run's dense work
  // (Workload::denseFlops) and the work it executed (computed blocks for sparse, the dense work otherwise)
  // over its median time.
  std::optional<double> denseEquivalentTops;
  std::optional<double> executedTops;
};

// Headline figures. Times are medians over profiled runs with the report's source. A baseline run is one
// without a sparse stage but with a dense or cuDNN stage; it never enters the sparse figure.
struct DerivedFigures {
  TimingSource source = TimingSource::WallClock;  // whose stage times these figures use
  std::optional<double> sparseMs;                 // the whole call: predict + quantize + sparse per run
  std::optional<double> denseMs;  // our dense kernel per run (+ its quantization), else the reference
  std::optional<double> cudnnMs;  // cuDNN's fused attention on the same entry, per run
  // Which dense time the headline speedup divides: "cudnn" or "dense" (the faster one measured), else
  // "reference"; "" when none was measured.
  std::string speedupBaseline;
  std::optional<double> speedup;              // fastest dense measured / sparseMs (the headline)
  std::optional<double> speedupOverDense;     // denseMs / sparseMs: over our own dense kernel
  std::optional<double> denseEquivalentTops;  // Workload::denseFlops / sparseMs
  std::optional<double> executedTops;         // Workload::executedFlops / sparseMs
  std::optional<double> denseTops;            // Workload::denseFlops / denseMs
  std::optional<double> cudnnTops;            // Workload::denseFlops / cudnnMs
  std::string note;                           // why a figure is missing
};

// One bar of the Chrome trace. ts/dur in microseconds from the report's origin.
struct TimelineEvent {
  std::string name;
  std::string category;  // the stage name, or "run"
  double tsUs = 0;
  double durUs = 0;
  int pid = 0;
  int tid = 0;
  std::vector<std::pair<std::string, std::string>> args;
};

struct TimelineTrack {
  int pid = 0;
  int tid = 0;
  std::string processName;
  std::string threadName;
};

struct TimingReport {
  int version = 1;
  TimingSource source = TimingSource::WallClock;  // what produced the stage figures
  std::string sourceReason;                       // why this source (e.g. why CUPTI was not used)
  std::string clock;                              // describe(source)
  DeviceInfo device;
  RunInfo run;  // of the first profiled run
  Workload workload;
  int warmupRuns = 0;
  int profiledRuns = 0;
  int64_t unattributedKernels = 0;  // kernels launched outside every run
  uint64_t droppedRecords = 0;      // CUPTI records lost (buffers full)
  std::vector<StageStat> stages;    // Stage order, then source order
  std::vector<KernelStat> kernels;  // Stage order, then name and launch configuration
  // Every kernel record of the profiled runs, attributed, in start order (what a kernel view lists).
  std::vector<KernelSample> records;
  std::vector<std::string> notes;  // things the figures leave out, in words (e.g. why cuDNN was not timed)
  // Per profiled run and (stage, source): the value that entered the stage statistics.
  struct RunRow {
    uint64_t id = 0;
    int index = 0;
    std::string label;
    std::vector<StageSample> values;
  };
  std::vector<RunRow> runs;
  DerivedFigures derived;
  // The SM clock observed at the end of each profiled run (count = runs that have a sample), with its
  // source ("nvml"); nullopt when nothing was sampled, and smClockMissing says why.
  std::optional<Stats> smClockMHz;
  std::string smClockSource;
  std::string smClockMissing;
  double smClockSampleUs = 0;  // median host cost of one sample (taken outside the timed region)
  std::vector<TimelineTrack> tracks;
  std::vector<TimelineEvent> timeline;
};

struct ReportInput {
  TimingSource source = TimingSource::WallClock;
  std::string sourceReason;
  DeviceInfo device;
  std::vector<RunRecord> runs;
  std::vector<KernelSample> kernels;  // already attributed (ActivityLog::resolve)
  Workload workload;
  uint64_t droppedRecords = 0;
  std::string smClockSource = "nvml";  // who read RunRecord::smClockMHz
  std::string smClockMissing;          // why runs carry no SM clock sample (used when none does)
  double smClockSampleUs = 0;
  std::vector<std::string> notes;
};

// Pure function of its input: statistics, derived figures and the timeline. Warm-up runs and their kernels
// are left out of everything; unattributed kernels are counted but not in any statistic.
TimingReport buildReport(const ReportInput& input);

}  // namespace sparge::prof
