// The kernel view's data: one row per kernel of a timing report (launch shape, duration statistics,
// TFLOPS of the attention kernels) and the kernels or stages of one run laid out on a timeline.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sparge/profiler/report.h"

namespace sparge::gui {

struct KernelRow {
  std::string name;    // demangled
  std::string stage;   // predict, sparse, dense, reference, metrics, other
  std::string run;     // which profiled run set: "sparse" or "dense baseline"
  std::string source;  // the clock: "cupti" or "cuda-event"
  int64_t launches = 0;
  double launchesPerRun = 0;
  double minMs = 0, medianMs = 0, maxMs = 0;
  // Attention kernels only (sparse and dense stages), from the run's workload and the median launch;
  // NaN for every other kernel.
  double executedTflops = 0;
  double denseEquivalentTflops = 0;
};

// One row per kernel statistic of `report`, in the report's order (stage, then name).
std::vector<KernelRow> kernelRows(const prof::TimingReport& report, const std::string& run);

struct TimelineBar {
  std::string name;
  std::string stage;
  double startMs = 0;  // from the start of the run
  double durMs = 0;
  int track = 0;  // 0: engine stages (host clock); 1 + n: GPU stream n
  std::vector<std::pair<std::string, std::string>> details;
};

// The kernels (or, without kernel records, the engine's stages) of the first profiled run of `report`,
// ordered by start.
std::vector<TimelineBar> runTimeline(const prof::TimingReport& report);

}  // namespace sparge::gui
