// Rank placement: one GPU per local rank (round robin when ranks outnumber GPUs), CPU threads shared.
#include "sparge/scaleout/placement.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace sparge::scaleout {

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

namespace {

// Binds the rank to the CPUs near its GPU and shares them out among the local ranks near the same CPUs.
// Where every GPU is near every CPU (one NUMA node) there is nothing to bind.
void bindNearGpu(Placement& p, int localSize, const std::vector<std::string>& gpus, int hostCores,
                 int requestedThreads, const GpuCpus& near) {
  std::vector<int> mine = near(p.visibleDevices);
  if (mine.empty() || int(mine.size()) >= hostCores) return;
  int sharing = 0;
  for (int r = 0; r < localSize; ++r) sharing += near(gpus[size_t(r) % gpus.size()]) == mine;
  if (requestedThreads <= 0) p.threads = std::max(1, int(mine.size()) / std::max(1, sharing));
  p.cpus = std::move(mine);
}

std::string readLine(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

Placement placeRank(int localRank, int localSize, const std::vector<std::string>& gpus, int hostCores,
                    int affinityCores, int requestedThreads, const GpuCpus& near) {
  Placement p;
  p.threads = requestedThreads;
  if (localSize <= 1) return p;
  // A launcher that bound the rank to some cores has already shared them out.
  const bool launcherBound = affinityCores < hostCores;
  if (requestedThreads <= 0)
    p.threads = launcherBound ? std::max(1, affinityCores) : std::max(1, hostCores / localSize);
  if (gpus.empty()) return p;
  p.visibleDevices = gpus[size_t(localRank) % gpus.size()];
  if (size_t(localSize) > gpus.size())
    p.note = std::to_string(localSize) + " ranks on this host share " + std::to_string(gpus.size()) + " GPU" +
             (gpus.size() == 1 ? "" : "s") + ": start one rank per GPU for full speed";
  if (near && !launcherBound) bindNearGpu(p, localSize, gpus, hostCores, requestedThreads, near);
  return p;
}

std::vector<int> parseCpuList(const std::string& list) {
  std::vector<int> cpus;
  std::stringstream s(list);
  std::string item;
  while (std::getline(s, item, ',')) {
    int a = -1, b = -1;
    char dash = 0, extra = 0;
    std::stringstream r(item);
    if (!(r >> a) || a < 0) return {};
    b = a;
    if (r >> dash && (dash != '-' || !(r >> b) || b < a || (r >> extra))) return {};
    if (b - a > 65535) return {};
    for (int c = a; c <= b; ++c) cpus.push_back(c);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string formatCpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out.append("-").append(std::to_string(cpus[j]));
    i = j + 1;
  }
  return out;
}

std::vector<int> gpuLocalCpus(const std::string& sysRoot, const std::string& gpu, bool pciBusOrder) {
  if (gpu.empty() || gpu.find_first_not_of("0123456789") != std::string::npos || gpu.size() > 4) return {};
  namespace fs = std::filesystem;
  struct Found {
    std::string address, model;
    fs::path dir;
  };
  std::vector<Found> found;
  std::error_code ec;
  for (auto it = fs::directory_iterator(fs::path(sysRoot) / "bus/pci/devices", ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    // NVIDIA's display (0x0300xx) and 3D (0x0302xx) controllers; NVSwitches (0x0680xx) are not GPUs.
    if (readLine(it->path() / "vendor") != "0x10de" || readLine(it->path() / "class").rfind("0x03", 0) != 0)
      continue;
    found.push_back({it->path().filename().string(), readLine(it->path() / "device"), it->path()});
  }
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.address < b.address; });
  const size_t index = std::stoul(gpu);
  if (index >= found.size()) return {};
  for (const Found& f : found)
    if (!pciBusOrder && f.model != found[0].model) return {};  // fastest first may differ from bus order
  return parseCpuList(readLine(found[index].dir / "local_cpulist"));
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

void applyPlacement(Placement& placement) {
  if (!placement.visibleDevices.empty()) setenv("CUDA_VISIBLE_DEVICES", placement.visibleDevices.c_str(), 1);
  if (placement.cpus.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : placement.cpus)
    if (c < CPU_SETSIZE) CPU_SET(c, &set);
  // A set the kernel refuses (CPUs offline or outside the cgroup) leaves the affinity as it was.
  if (sched_setaffinity(0, sizeof set, &set) != 0) placement.cpus.clear();
}

}  // namespace sparge::scaleout
