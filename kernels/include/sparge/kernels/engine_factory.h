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

// True when this build contains the CUDA engine.
bool cudaEngineBuilt();
// True when a CUDA device is usable; otherwise `why` says what is missing.
bool cudaDeviceUsable(std::string* why);

}  // namespace sparge::engines
