#include "sparge/kernels/engine_factory.h"

#include <cstdlib>
#include <string>

#include "sparge/core/cpu_engine.h"
#include "sparge/core/error.h"

#ifdef SPARGE_HAVE_CUDA
#include "sparge/kernels/cuda_engine.h"
#endif

namespace sparge::engines {

void prepareCudaProcess() {
  // overwrite = 0: a value the user set is kept.
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", std::to_string(kCudaConnections).c_str(), 0);
}

bool cudaEngineBuilt() {
#ifdef SPARGE_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

bool cudaDeviceUsable(std::string* why) {
#ifdef SPARGE_HAVE_CUDA
  return cuda::deviceUsable(why);
#else
  if (why) *why = "this build has no CUDA engine (configured without a CUDA compiler)";
  return false;
#endif
}

EngineSelection makeEngine(core::EngineChoice choice, int cpuThreads) {
  EngineSelection sel;
  if (choice == core::EngineChoice::Cpu) {
    sel.engine = std::make_unique<core::CpuEngine>(cpuThreads);
    return sel;
  }
  std::string why;
  if (cudaDeviceUsable(&why)) {
#ifdef SPARGE_HAVE_CUDA
    sel.engine = std::make_unique<cuda::CudaEngine>();
    return sel;
#endif
  }
  if (choice == core::EngineChoice::Cuda) throw Error("--engine cuda", "CUDA engine unavailable: " + why);
  sel.engine = std::make_unique<core::CpuEngine>(cpuThreads);
  sel.message = "using the CPU engine: " + why;
  return sel;
}

}  // namespace sparge::engines
