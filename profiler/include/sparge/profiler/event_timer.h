// CUDA-event timing around work on a stream: the fallback when CUPTI is unavailable. Usable without CUDA
// headers; in a build without CUDA (or without a device) available() is false and nothing is recorded.
#pragma once

struct CUstream_st;

namespace sparge::prof {

using StreamHandle = CUstream_st*;  // same type as cudaStream_t; nullptr = the legacy default stream

class EventTimer {
 public:
  EventTimer();
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  // True when this build has CUDA and a device answers (cached after the first call).
  static bool available();

  void start(StreamHandle stream = nullptr);  // records the start event on `stream`
  void stop(StreamHandle stream = nullptr);   // records the stop event on `stream`
  // Waits for the stop event, returns milliseconds between the two; throws sparge::Error when the pair was
  // not recorded or CUDA reports an error.
  double elapsedMs();

 private:
  void* start_ = nullptr;  // cudaEvent_t
  void* stop_ = nullptr;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace sparge::prof
