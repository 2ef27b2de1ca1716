// Plain activity records and their attribution to runs and stages. The CUPTI collector feeds this from
// its buffer callbacks; tests feed it synthetic records, so nothing here needs CUPTI.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "sparge/profiler/stage.h"

namespace sparge::prof {

// How a kernel was launched, as CUpti_ActivityKernel10 records it; all zero when unknown.
struct LaunchConfig {
  std::array<int32_t, 3> grid{0, 0, 0};   // blocks in x, y, z
  std::array<int32_t, 3> block{0, 0, 0};  // threads per block in x, y, z
  int32_t registersPerThread = 0;
  int32_t staticSharedBytes = 0;   // shared memory declared in the kernel
  int32_t dynamicSharedBytes = 0;  // shared memory requested at launch

  bool known() const { return block[0] > 0; }
  std::string gridLabel() const;   // "128x32x1"
  std::string blockLabel() const;  // "256x1x1"
  auto operator<=>(const LaunchConfig&) const = default;
};

// What a kernel activity record says (a subset of CUpti_ActivityKernel10). Times are CUPTI timestamps (ns).
struct KernelActivity {
  std::string name;  // as reported: usually the mangled name
  uint64_t startNs = 0;
  uint64_t endNs = 0;
  uint32_t deviceId = 0;
  uint32_t contextId = 0;
  uint32_t streamId = 0;
  uint32_t correlationId = 0;
  LaunchConfig launch;
};

// CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: the launch `correlationId` happened while `externalId` (our run
// id) was pushed.
struct ExternalCorrelation {
  uint32_t correlationId = 0;
  uint64_t externalId = 0;
};

// A run's time window in the same clock as the kernel records, for attribution without external correlation.
struct RunWindow {
  uint64_t runId = 0;
  uint64_t startNs = 0;
  uint64_t endNs = 0;
};

enum class Attribution { ExternalId, TimeWindow, None };
const char* toString(Attribution a);  // "external-id", "time-window", "none"

// One kernel execution, attributed. runId 0 means no run claimed it (launched outside every scope).
struct KernelSample {
  std::string name;     // demangled, for people
  std::string rawName;  // as reported
  Stage stage = Stage::Other;
  uint64_t runId = 0;
  Attribution attribution = Attribution::None;
  uint64_t startNs = 0;
  uint64_t endNs = 0;
  uint32_t deviceId = 0;
  uint32_t streamId = 0;
  TimingSource source = TimingSource::Cupti;
  LaunchConfig launch;

  double ms() const { return endNs > startNs ? double(endNs - startNs) * 1e-6 : 0.0; }
};

// Collects records (thread-safe: CUPTI delivers buffers on its own thread) and attributes them on demand.
class ActivityLog {
 public:
  void add(const KernelActivity& kernel);
  void add(const ExternalCorrelation& correlation);
  void addDropped(uint64_t count);

  // Attribution order: the external id of the kernel's correlation id when one was recorded (and names a
  // known run when `windows` is not empty), else the run whose window contains the kernel's start, else none.
  // Every kernel becomes exactly one sample, in start-time order.
  std::vector<KernelSample> resolve(const std::vector<RunWindow>& windows) const;

  size_t kernelCount() const;
  uint64_t dropped() const;
  void clear();

 private:
  mutable std::mutex mutex_;
  std::vector<KernelActivity> kernels_;
  std::vector<ExternalCorrelation> correlations_;
  uint64_t dropped_ = 0;
};

}  // namespace sparge::prof
