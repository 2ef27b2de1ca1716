// Rank placement: one GPU per local rank (round robin when ranks outnumber GPUs), CPU threads shared.
#include "sparge/dist/placement.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <thread>

namespace sparge::dist {

std::vector<std::string> visibleGpus() {
  std::vector<std::string> gpus;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) {
    std::stringstream s(v);
    std::string item;
    while (std::getline(s, item, ','))
      if (!item.empty()) gpus.push_back(item);
    return gpus;
  }
  std::error_code ec;
  int count = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++count;
  if (count == 0) {
    // Sandboxes and containers may hide /proc/driver/nvidia but still show the device nodes /dev/nvidiaN.
    for (auto it = std::filesystem::directory_iterator("/dev", ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.size() > 6 && name.compare(0, 6, "nvidia") == 0 &&
          name.find_first_not_of("0123456789", 6) == std::string::npos)
        ++count;
    }
  }
  for (int i = 0; i < count; ++i) gpus.push_back(std::to_string(i));
  return gpus;
}

Placement placeRank(int localRank, int localSize, const std::vector<std::string>& gpus, int hostCores,
                    int affinityCores, int requestedThreads) {
  Placement p;
  p.threads = requestedThreads;
  if (localSize <= 1) return p;
  // A launcher that bound the rank to some cores has already shared them out.
  if (requestedThreads <= 0)
    p.threads = affinityCores < hostCores ? std::max(1, affinityCores) : std::max(1, hostCores / localSize);
  if (gpus.empty()) return p;
  p.visibleDevices = gpus[size_t(localRank) % gpus.size()];
  if (size_t(localSize) > gpus.size())
    p.note = std::to_string(localSize) + " ranks on this host share " + std::to_string(gpus.size()) + " GPU" +
             (gpus.size() == 1 ? "" : "s") + ": start one rank per GPU for full speed";
  return p;
}

int hostCores() {
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

int usableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return hostCores();
}

void applyPlacement(const Placement& placement) {
  if (!placement.visibleDevices.empty()) setenv("CUDA_VISIBLE_DEVICES", placement.visibleDevices.c_str(), 1);
}

}  // namespace sparge::dist
