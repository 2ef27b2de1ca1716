// Process memory figures for the status bar (resident set size; GPU memory when the CUDA runtime is linked).
#pragma once

#include <cstdint>

namespace sparge::gui {

// Resident set size of this process in bytes (from /proc/self/statm), 0 when unknown.
int64_t processRssBytes();

// GPU memory in use / total on the current device; false when there is no CUDA runtime or device.
// Creates a CUDA context on first use, so call it from the worker thread, not the UI thread.
bool gpuMemory(int64_t* usedBytes, int64_t* totalBytes);

}  // namespace sparge::gui
