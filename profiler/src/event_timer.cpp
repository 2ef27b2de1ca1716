// CUDA-event timer; inert in a build without CUDA.
#include "sparge/profiler/event_timer.h"

#include <string>

#include "sparge/core/error.h"

#ifdef SPARGE_PROF_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace sparge::prof {

#ifdef SPARGE_PROF_HAVE_CUDA

namespace {
void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw Error("EventTimer", std::string(what) + ": " + cudaGetErrorString(err));
  }
}
}  // namespace

bool EventTimer::available() {
  static const bool ok = [] {
    int count = 0;
    bool yes = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
    cudaGetLastError();
    return yes;
  }();
  return ok;
}

EventTimer::EventTimer() {
  if (!available()) return;
  cudaEvent_t a = nullptr, b = nullptr;
  if (cudaEventCreate(&a) == cudaSuccess && cudaEventCreate(&b) == cudaSuccess) {
    start_ = a;
    stop_ = b;
  } else {
    if (a) cudaEventDestroy(a);
    cudaGetLastError();
  }
}

EventTimer::~EventTimer() {
  if (start_) cudaEventDestroy(static_cast<cudaEvent_t>(start_));
  if (stop_) cudaEventDestroy(static_cast<cudaEvent_t>(stop_));
}

void EventTimer::start(StreamHandle stream) {
  if (!start_) throw Error("EventTimer", "CUDA events unavailable (no device)");
  check(cudaEventRecord(static_cast<cudaEvent_t>(start_), stream), "cudaEventRecord");
  started_ = true;
  stopped_ = false;
}

void EventTimer::stop(StreamHandle stream) {
  if (!started_) throw Error("EventTimer", "stop() without start()");
  check(cudaEventRecord(static_cast<cudaEvent_t>(stop_), stream), "cudaEventRecord");
  stopped_ = true;
}

double EventTimer::elapsedMs() {
  if (!started_ || !stopped_) throw Error("EventTimer", "elapsedMs() needs start() and stop()");
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(stop_)), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start_), static_cast<cudaEvent_t>(stop_)),
        "cudaEventElapsedTime");
  return double(ms);
}

#else

bool EventTimer::available() {
  return false;
}
EventTimer::EventTimer() = default;
EventTimer::~EventTimer() = default;
void EventTimer::start(StreamHandle) {
  throw Error("EventTimer", "built without CUDA");
}
void EventTimer::stop(StreamHandle) {
  throw Error("EventTimer", "built without CUDA");
}
double EventTimer::elapsedMs() {
  throw Error("EventTimer", "built without CUDA");
}

#endif

}  // namespace sparge::prof
