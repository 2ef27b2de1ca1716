// The kernel view's data: one row per kernel of a timing report (launch configuration, duration statistics,
// TFLOPS of the attention kernels) and the kernels or stages of one run laid out on a timeline.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sparge/profiler/report.h"

namespace sparge::gui {

struct KernelRow {
  std::string name;           // demangled
  std::string stage;          // predict, quantize, sparse, dense, cudnn, reference, metrics, other
  std::string source;         // the clock: "cupti" or "cuda-event"
  prof::LaunchConfig launch;  // grid, block, registers, shared memory (all zero when not recorded)
  int64_t launches = 0;
  double launchesPerRun = 0;
  double minMs = 0, medianMs = 0, maxMs = 0;
  // The profiler's figures for attention kernels launched once per run; NaN for every other kernel.
  double executedTflops = 0;
  double denseEquivalentTflops = 0;
};

// One row per kernel statistic of `report` (name and launch configuration), in the report's order.
std::vector<KernelRow> kernelRows(const prof::TimingReport& report);

struct TimelineBar {
  std::string name;
  std::string stage;
  double startMs = 0;  // from the start of the run
  double durMs = 0;
  int track = 0;  // 0: engine stages (host clock); 1 + n: GPU stream n
  std::vector<std::pair<std::string, std::string>> details;
};

// The kernels (or, without kernel records, the engine's stages) of the first profiled sparse run of
// `report` (the first run when none has a sparse stage), ordered by start.
std::vector<TimelineBar> runTimeline(const prof::TimingReport& report);

}  // namespace sparge::gui
