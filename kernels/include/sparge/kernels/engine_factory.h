// Chooses an engine for the CLI and the GUI: the CUDA engine when built and a device is usable,
// otherwise the CPU reference engine (with a message saying why).
#pragma once

#include <memory>
#include <string>

#include "sparge/core/engine.h"

namespace sparge::engines {

struct EngineSelection {
  std::unique_ptr<core::Engine> engine;
  std::string message;  // empty, or why `auto` fell back to the CPU engine
};

// Auto: CUDA if available, else CPU with a message. Cuda: throws sparge::Error when the CUDA engine
// was not built or no device is usable. Cpu: the CPU engine with `cpuThreads` threads (0 = all cores).
EngineSelection makeEngine(core::EngineChoice choice, int cpuThreads = 0);

// Prepares this process for the CUDA contexts it may make later: unless the environment already sets
// CUDA_DEVICE_MAX_CONNECTIONS, sets it to kCudaConnections. A context sets up that many hardware work
// queues when it is made (CUDA's default is 8), and processes starting CUDA at once take turns in the
// driver, so each queue the engine never uses makes every rank of a multi-GPU job wait longer before its
// first run. The engine needs two: its kernels run on one stream and the selection's copies on another.
// Call first in main(), before any thread starts: it changes the environment.
void prepareCudaProcess();
inline constexpr int kCudaConnections = 2;

// True when this build contains the CUDA engine.
bool cudaEngineBuilt();
// True when a CUDA device is usable; otherwise `why` says what is missing.
bool cudaDeviceUsable(std::string* why);

}  // namespace sparge::engines
