// Where a rank runs: the GPU of its local rank, or its share of the host's cores for the CPU engine.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace sparge::scaleout {

struct Placement {
  // CUDA_VISIBLE_DEVICES for this rank (one device), or empty to leave the environment alone.
  std::string visibleDevices;
  int threads = 0;   // CPU engine threads; 0 = the engine's default (all cores)
  std::string note;  // one line for the user when ranks share a GPU, empty otherwise
  // The CPUs the rank binds itself to, those of its GPU's NUMA node; empty = the affinity stays as the
  // launcher set it.
  std::vector<int> cpus;
};

// The CPUs near a GPU named as in CUDA_VISIBLE_DEVICES, empty where they are not known.
using GpuCpus = std::function<std::vector<int>(const std::string& gpu)>;

// GPUs this process may use: the entries of CUDA_VISIBLE_DEVICES when it is set, else one per device
// the NVIDIA driver lists under /proc/driver/nvidia/gpus (or, where that is hidden, per /dev/nvidiaN),
// found without initialising CUDA, which must not happen before CUDA_VISIBLE_DEVICES is final.
std::vector<std::string> visibleGpus();

// The placement of local rank `localRank` of `localSize` on a host with `gpus` and `hostCores` cores, of
// which this process may use `affinityCores`. One process (localSize 1) keeps everything as it is.
// Otherwise each rank gets GPU localRank mod |gpus|, and `requestedThreads` (> 0) CPU threads, or the
// cores it was bound to when the launcher bound it, or max(1, hostCores / localSize).
// With `near` and a launcher that left the rank unbound, the rank's CPUs become those near its GPU (a
// rank's loading threads and page-locked buffers then sit on its GPU's NUMA node), and its threads that
// set's share among the local ranks whose GPUs have the same set; not where that set is every core.
Placement placeRank(int localRank, int localSize, const std::vector<std::string>& gpus, int hostCores,
                    int affinityCores, int requestedThreads, const GpuCpus& near = {});

// The CPUs near GPU `gpu` (a CUDA device index, as CUDA_VISIBLE_DEVICES names it) from sysfs under
// `sysRoot` ("/sys"): the local_cpulist of the NVIDIA display or 3D controller that CUDA numbers `gpu`.
// CUDA numbers GPUs in PCI bus order when CUDA_DEVICE_ORDER is PCI_BUS_ID, and by default fastest first,
// which is also PCI bus order when every GPU is the same model; otherwise, for UUIDs and MIG names, and
// where sysfs does not tell, the answer is empty.
std::vector<int> gpuLocalCpus(const std::string& sysRoot, const std::string& gpu, bool pciBusOrder);

// Linux's CPU list format ("0-3,8,10-11") to sorted CPU numbers and back; empty for a malformed list.
std::vector<int> parseCpuList(const std::string& list);
std::string formatCpuList(const std::vector<int>& cpus);

int hostCores();    // every core of the host
int usableCores();  // cores this process may run on (its CPU affinity; launchers often bind ranks)

// Sets CUDA_VISIBLE_DEVICES when the placement names a device and binds the process to the placement's
// CPUs when it has some (threads started later inherit the binding). Call before anything touches CUDA
// or starts a thread. Clears `placement.cpus` when the kernel refuses the binding.
void applyPlacement(Placement& placement);

}  // namespace sparge::scaleout
