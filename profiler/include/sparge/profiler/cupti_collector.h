// CUPTI Activity API collector: concurrent-kernel and external-correlation records into an ActivityLog.
// In a build without CUPTI it exists but start() always fails with a reason.
#pragma once

#include <cstdint>
#include <string>

#include "sparge/profiler/activity.h"

namespace sparge::prof {

// CUPTI's activity callbacks are process-wide, so at most one collector is active at a time.
class CuptiCollector {
 public:
  CuptiCollector() = default;
  ~CuptiCollector();
  CuptiCollector(const CuptiCollector&) = delete;
  CuptiCollector& operator=(const CuptiCollector&) = delete;

  // Enables the activity kinds. Returns false (and reason() says why) when there is no device, CUPTI refuses
  // (permissions, missing library, CUPTI_ERROR_UNKNOWN without a GPU) or another collector is active.
  // Never throws, never aborts.
  bool start();
  void stop();  // flushes, then disables; safe to call twice
  bool active() const { return active_; }
  const std::string& reason() const { return reason_; }
  // False when CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION could not be enabled: runs are then matched by time
  // window.
  bool externalCorrelation() const { return externalCorrelation_; }

  // Tag every launch until pop() with `runId` (no-op without external correlation).
  void push(uint64_t runId);
  void pop();
  // The CUPTI timestamp (ns, the kernel records' clock); host steady_clock ns when inactive.
  uint64_t timestampNs() const;
  // cudaDeviceSynchronize, then cuptiActivityFlushAll(FORCED): every finished kernel is in log() afterwards.
  void flush();

  ActivityLog& log() { return log_; }
  const ActivityLog& log() const { return log_; }

 private:
  ActivityLog log_;
  bool active_ = false;
  bool externalCorrelation_ = false;
  std::string reason_;
};

}  // namespace sparge::prof
