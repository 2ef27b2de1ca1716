// CUPTI Activity API collector. Without CUPTI in the build it compiles to a collector that never starts; with
// it, libcupti is loaded at run time (cupti_loader.h) and a missing library is a reason, not a crash.
#include "sparge/profiler/cupti_collector.h"

#include <chrono>
#include <cstdlib>
#include <mutex>

#include "steady_clock.h"

#ifdef SPARGE_PROF_HAVE_CUPTI
#include <cuda_runtime_api.h>

#include "cupti_loader.h"
#endif

namespace sparge::prof {

#ifdef SPARGE_PROF_HAVE_CUPTI

namespace {

// CUPTI calls the buffer callbacks from its own thread; they reach the active collector's log through here.
std::mutex g_mutex;
ActivityLog* g_log = nullptr;
bool g_callbacksRegistered = false;

constexpr size_t kBufferBytes = size_t(4) << 20;
constexpr size_t kBufferAlign = 8;  // CUPTI requires 8-byte aligned activity buffers
constexpr CUpti_ExternalCorrelationKind kCorrelationKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;

std::string cuptiError(const char* call, CUptiResult r) {
  const char* text = nullptr;
  if (cupti().api.getResultString(r, &text) != CUPTI_SUCCESS || !text) text = "unknown CUPTI error";
  return std::string(call) + " failed: " + text + " (" + std::to_string(int(r)) + ")";
}

void CUPTIAPI bufferRequested(uint8_t** buffer, size_t* size, size_t* maxNumRecords) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;  // a zero size makes CUPTI drop records instead of crashing
  *maxNumRecords = 0;
}

void CUPTIAPI bufferCompleted(CUcontext context, uint32_t streamId, uint8_t* buffer, size_t,
                              size_t validSize) {
  std::lock_guard lock(g_mutex);
  CUpti_Activity* record = nullptr;
  while (validSize > 0 && cupti().api.activityGetNextRecord(buffer, validSize, &record) == CUPTI_SUCCESS) {
    if (!g_log) continue;
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        KernelActivity a;
        a.name = k->name ? k->name : "<unnamed kernel>";
        a.startNs = k->start;
        a.endNs = k->end;
        a.deviceId = k->deviceId;
        a.contextId = k->contextId;
        a.streamId = k->streamId;
        a.correlationId = k->correlationId;
        a.launch.grid = {k->gridX, k->gridY, k->gridZ};
        a.launch.block = {k->blockX, k->blockY, k->blockZ};
        a.launch.registersPerThread = k->registersPerThread;
        a.launch.staticSharedBytes = k->staticSharedMemory;
        a.launch.dynamicSharedBytes = k->dynamicSharedMemory;
        g_log->add(a);
        break;
      }
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const auto* c = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
        if (c->externalKind == kCorrelationKind)
          g_log->add(ExternalCorrelation{c->correlationId, c->externalId});
        break;
      }
      default:
        break;
    }
  }
  size_t dropped = 0;
  if (g_log && cupti().api.activityGetNumDroppedRecords(context, streamId, &dropped) == CUPTI_SUCCESS &&
      dropped > 0)
    g_log->addDropped(dropped);
  std::free(buffer);
}

}  // namespace

bool CuptiCollector::start() {
  if (active_) return true;
  // Checked before the device so that the reason names the missing library even on a machine without a GPU.
  if (!cupti().ok) {
    reason_ = cupti().error;
    return false;
  }
  int count = 0;  // left untouched by cudaGetDeviceCount when there is no driver
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count <= 0) {
    reason_ = err != cudaSuccess
                  ? std::string("no CUDA device (cudaGetDeviceCount: ") + cudaGetErrorString(err) + ")"
                  : std::string("no CUDA device");
    cudaGetLastError();
    return false;
  }
  {
    std::lock_guard lock(g_mutex);
    if (g_log) {
      reason_ = "another CUPTI collector is active in this process";
      return false;
    }
    if (!g_callbacksRegistered) {
      CUptiResult r = cupti().api.activityRegisterCallbacks(bufferRequested, bufferCompleted);
      if (r != CUPTI_SUCCESS) {
        reason_ = cuptiError("cuptiActivityRegisterCallbacks", r);
        return false;
      }
      g_callbacksRegistered = true;
    }
    g_log = &log_;
  }
  CUptiResult r = cupti().api.activityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (r != CUPTI_SUCCESS) {
    reason_ = cuptiError("cuptiActivityEnable(CONCURRENT_KERNEL)", r);
    if (r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)
      reason_ += ": profiling needs permission (see NVreg_RestrictProfilingToAdminUsers)";
    std::lock_guard lock(g_mutex);
    g_log = nullptr;
    return false;
  }
  r = cupti().api.activityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  externalCorrelation_ = r == CUPTI_SUCCESS;
  reason_ = externalCorrelation_ ? std::string()
                                 : cuptiError("cuptiActivityEnable(EXTERNAL_CORRELATION)", r) +
                                       ": kernels are matched to runs by time window";
  active_ = true;
  return true;
}

void CuptiCollector::stop() {
  if (!active_) return;
  flush();
  cupti().api.activityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (externalCorrelation_) cupti().api.activityDisable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  std::lock_guard lock(g_mutex);
  if (g_log == &log_) g_log = nullptr;
  active_ = false;
  externalCorrelation_ = false;
}

void CuptiCollector::push(uint64_t runId) {
  if (active_ && externalCorrelation_) cupti().api.activityPushExternalCorrelationId(kCorrelationKind, runId);
}

void CuptiCollector::pop() {
  if (!active_ || !externalCorrelation_) return;
  uint64_t last = 0;
  cupti().api.activityPopExternalCorrelationId(kCorrelationKind, &last);
}

uint64_t CuptiCollector::timestampNs() const {
  uint64_t t = 0;
  if (active_ && cupti().api.getTimestamp(&t) == CUPTI_SUCCESS) return t;
  return steadyNs();
}

void CuptiCollector::flush() {
  if (!active_) return;
  cudaDeviceSynchronize();
  cudaGetLastError();
  cupti().api.activityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

#else

bool CuptiCollector::start() {
  reason_ = "built without CUPTI";
  return false;
}
void CuptiCollector::stop() {}
void CuptiCollector::push(uint64_t) {}
void CuptiCollector::pop() {}
uint64_t CuptiCollector::timestampNs() const {
  return steadyNs();
}
void CuptiCollector::flush() {}

#endif

CuptiCollector::~CuptiCollector() {
  try {
    stop();
  } catch (...) {
  }
}

}  // namespace sparge::prof
