// Encoding and merging of raw profiler runs from several ranks.
#include "rank_timings.h"

#include <algorithm>
#include <map>

#include "sparge/scaleout/wire.h"

namespace sparge::scaleout {

// A field added to one of these records must be added to its WireFields below, or ranks would drop it
// silently; these sizes make the build fail until that is done (then update the size here).
static_assert(sizeof(prof::ReportInput) == 432, "ReportInput changed: update scaleout/jobs/rank_timings.cpp");
static_assert(sizeof(prof::DeviceInfo) == 160, "DeviceInfo changed: update scaleout/jobs/rank_timings.cpp");
static_assert(sizeof(prof::RunRecord) == 216, "RunRecord changed: update scaleout/jobs/rank_timings.cpp");
static_assert(sizeof(prof::RunInfo) == 136, "RunInfo changed: update scaleout/jobs/rank_timings.cpp");
static_assert(sizeof(prof::StageSample) == 24, "StageSample changed: update scaleout/jobs/rank_timings.cpp");
static_assert(sizeof(prof::KernelSample) == 152, "KernelSample changed: update scaleout/jobs/rank_timings.cpp");
static_assert(sizeof(prof::Workload) == 80, "Workload changed: update scaleout/jobs/rank_timings.cpp");
static_assert(sizeof(prof::LaunchConfig) == 36, "LaunchConfig changed: update scaleout/jobs/rank_timings.cpp");

template <>
struct WireFields<prof::DeviceInfo> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.gpu, v.index, v.name, v.ccMajor, v.ccMinor, v.maxSmClockKHz, v.driverVersion, v.runtimeVersion,
      v.cuptiVersion, v.hostCpu, v.clockNote, v.probeError);
  }
};

template <>
struct WireFields<prof::RunInfo> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.entry, v.heads, v.params, v.engine, v.otherKernels);
  }
};

template <>
struct WireFields<prof::StageSample> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.stage, v.ms, v.source);
  }
};

template <>
struct WireFields<prof::RunRecord> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.id, v.index, v.warmup, v.info, v.clock, v.startNs, v.endNs, v.samples, v.smClockMHz);
  }
};

template <>
struct WireFields<prof::LaunchConfig> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.grid[0], v.grid[1], v.grid[2], v.block[0], v.block[1], v.block[2], v.registersPerThread,
      v.staticSharedBytes, v.dynamicSharedBytes);
  }
};

template <>
struct WireFields<prof::KernelSample> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.name, v.rawName, v.stage, v.runId, v.attribution, v.startNs, v.endNs, v.deviceId, v.streamId,
      v.source);
  }
};

template <>
struct WireFields<prof::Workload> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.batch, v.heads, v.tokensQ, v.tokensKV, v.headDim, v.headDimV, v.causal, v.blockQ, v.blockK,
      v.computedQkBlocks, v.computedPvBlocks);
  }
};

template <>
struct WireFields<prof::ReportInput> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.source, v.sourceReason, v.device, v.runs, v.kernels, v.workload, v.droppedRecords, v.smClockSource,
      v.smClockMissing, v.smClockSampleUs, v.notes);
  }
};



std::string encodeTimings(const prof::ReportInput& input) {
  return encode(input);
}

prof::ReportInput decodeTimings(const std::string& data, const std::string& source) {
  return decode<prof::ReportInput>(data, source);
}

prof::ReportInput mergeTimings(const std::vector<std::string>& payloads) {
  std::vector<std::pair<int, prof::ReportInput>> inputs;
  for (size_t r = 0; r < payloads.size(); ++r)
    if (!payloads[r].empty())
      inputs.emplace_back(int(r), decodeTimings(payloads[r], "timings of rank " + std::to_string(r)));
  if (inputs.empty()) return {};
  prof::ReportInput out = inputs.front().second;
  if (payloads.size() == 1) return out;
  out.runs.clear();
  out.kernels.clear();
  out.notes.clear();
  out.droppedRecords = 0;
  uint64_t nextId = 1;
  for (auto& [rank, in] : inputs) {
    std::map<uint64_t, uint64_t> ids;  // this rank's run id -> merged run id
    for (prof::RunRecord r : in.runs) {
      ids[r.id] = nextId;
      r.id = nextId++;
      r.index = int(out.runs.size());
      r.info.engine = "rank " + std::to_string(rank) + ": " + r.info.engine;
      out.runs.push_back(std::move(r));
    }
    for (prof::KernelSample k : in.kernels) {
      auto it = ids.find(k.runId);
      k.runId = it == ids.end() ? 0 : it->second;
      out.kernels.push_back(std::move(k));
    }
    out.droppedRecords += in.droppedRecords;
    for (const std::string& n : in.notes)
      if (std::find(out.notes.begin(), out.notes.end(), n) == out.notes.end()) out.notes.push_back(n);
    if (!out.workload.valid() && in.workload.valid()) out.workload = in.workload;
    if (in.source != out.source || in.device.name != out.device.name)
      out.sourceReason += "; rank " + std::to_string(rank) + " measured with " + prof::describe(in.source) +
                          " on " + in.device.name;
  }
  return out;
}

}  // namespace sparge::scaleout
