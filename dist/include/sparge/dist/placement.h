// Where a rank runs: the GPU of its local rank, or its share of the host's cores for the CPU engine.
#pragma once

#include <string>
#include <vector>

namespace sparge::dist {

struct Placement {
  // CUDA_VISIBLE_DEVICES for this rank (one device), or empty to leave the environment alone.
  std::string visibleDevices;
  int threads = 0;   // CPU engine threads; 0 = the engine's default (all cores)
  std::string note;  // one line for the user when ranks share a GPU, empty otherwise
};

// GPUs this process may use: the entries of CUDA_VISIBLE_DEVICES when it is set, else one per device
// the NVIDIA driver lists under /proc/driver/nvidia/gpus (or, where that is hidden, per /dev/nvidiaN),
// found without initialising CUDA, which must not happen before CUDA_VISIBLE_DEVICES is final.
std::vector<std::string> visibleGpus();

// The placement of local rank `localRank` of `localSize` on a host with `gpus` and `hostCores` cores, of
// which this process may use `affinityCores`. One process (localSize 1) keeps everything as it is.
// Otherwise each rank gets GPU localRank mod |gpus|, and `requestedThreads` (> 0) CPU threads, or the
// cores it was bound to when the launcher bound it, or max(1, hostCores / localSize).
Placement placeRank(int localRank, int localSize, const std::vector<std::string>& gpus, int hostCores,
                    int affinityCores, int requestedThreads);

int hostCores();    // every core of the host
int usableCores();  // cores this process may run on (its CPU affinity; launchers often bind ranks)

// Sets CUDA_VISIBLE_DEVICES when the placement names a device. Call before anything touches CUDA.
void applyPlacement(const Placement& placement);

}  // namespace sparge::dist
