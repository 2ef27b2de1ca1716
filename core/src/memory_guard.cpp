// Memory estimates from entry shapes, the machine's available memory (/proc/meminfo, cgroup limits)
// and the check that turns "would not fit" into an error before any allocation.
#include "sparge/core/memory_guard.h"

#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "sparge/core/error.h"
#include "sparge/core/names.h"

namespace sparge::core {
namespace {

std::atomic<double> gLimit{0.0};

// Per (batch item, head) of one run, bytes per block of the grid: the Stage-1 mask, the PV-skip map and
// the reasons (1 byte each), pooled probabilities, block scores and reference block mass (4 bytes each).
constexpr double kEngineBytesPerBlock = 3 + 4 + 4 + 4;
// The block validity and areas kept once per geometry (1 + 8 bytes per block).
constexpr double kValidityBytesPerBlock = 9;
// The cached reference: its block masses (4 bytes per block) and its output.
constexpr double kReferenceBytesPerBlock = 4;

std::string gib(double bytes) {
  char buf[64];
  if (bytes >= 1024.0 * 1024 * 1024)
    std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1024.0 * 1024 * 1024));
  else
    std::snprintf(buf, sizeof buf, "%.0f MiB", std::ceil(bytes / (1024.0 * 1024)));
  return buf;
}

// A value of /proc/meminfo in bytes ("MemAvailable:  123 kB"), or -1.
double meminfoBytes(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size() + 1, key + ":") != 0) continue;
    std::istringstream fields(line.substr(key.size() + 1));
    double kb = -1;
    fields >> kb;
    return kb >= 0 ? kb * 1024.0 : -1;
  }
  return -1;
}

// A number from a one-line cgroup file, or -1 ("max", missing, unreadable).
double cgroupValue(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return -1;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  return end && *end == '\0' ? v : -1;
}

// Memory left under this process's cgroup limit (v2, then v1), or -1 when there is no limit.
double cgroupRemaining() {
  const double limit2 = cgroupValue("/sys/fs/cgroup/memory.max");
  if (limit2 > 0) return limit2 - std::max(0.0, cgroupValue("/sys/fs/cgroup/memory.current"));
  const double limit1 = cgroupValue("/sys/fs/cgroup/memory/memory.limit_in_bytes");
  if (limit1 > 0 && limit1 < 1e18)  // v1 reports "no limit" as a huge number
    return limit1 - std::max(0.0, cgroupValue("/sys/fs/cgroup/memory/memory.usage_in_bytes"));
  return -1;
}

}  // namespace

MemoryEstimate estimateEntryMemory(const EntryInfo& e) {
  MemoryEstimate m;
  const double b = double(e.batch);
  m.entryBytes = 4.0 * b *
                 (double(e.headsQ) * double(e.tokensQ) * double(e.headDim) +
                  double(e.headsKV) * double(e.tokensKV) * double(e.headDim + e.headDimV));
  return m;
}

MemoryEstimate estimateRunMemory(const EntryInfo& e, const Geometry& g, int64_t heads) {
  MemoryEstimate m = estimateEntryMemory(e);
  const double blocks = std::ceil(double(e.tokensQ) / g.blockQ) * std::ceil(double(e.tokensKV) / g.blockK);
  const double tasks = double(e.batch) * double(heads);
  const double output = 4.0 * double(e.tokensQ) * double(e.headDimV);
  m.engineBytes = tasks * (kEngineBytesPerBlock * blocks + output) + kValidityBytesPerBlock * blocks;
  m.referenceBytes = tasks * (kReferenceBytesPerBlock * blocks + output);
  return m;
}

double availableMemoryBytes() {
  const double available = meminfoBytes("MemAvailable");
  const double cgroup = cgroupRemaining();
  if (available < 0) return cgroup;
  return cgroup >= 0 ? std::min(available, cgroup) : available;
}

void setMemoryLimit(double bytes) {
  gLimit.store(bytes > 0 ? bytes : 0.0);
}

double memoryBudgetBytes() {
  const double limit = gLimit.load();
  return limit > 0 ? limit : availableMemoryBytes();
}

void checkMemory(const MemoryEstimate& m, const std::string& what, const std::string& fix) {
  const double limit = gLimit.load();
  const double have = memoryBudgetBytes();
  if (have < 0 || m.total() <= have) return;
  std::string parts = "entry data " + gib(m.entryBytes);
  if (m.engineBytes > 0) parts += ", engine buffers " + gib(m.engineBytes);
  if (m.referenceBytes > 0) parts += ", dense reference " + gib(m.referenceBytes);
  const std::string source = limit > 0 ? "the --max-memory limit is " + gib(limit)
                                       : "only " + gib(have) + " is available (MemAvailable)";
  const std::string runFix =
      "run fewer heads (--heads 0,1), another entry (--entry NAME), or raise the limit with --max-memory "
      "SIZE "
      "(e.g. --max-memory 64G) if you know it fits";
  throw Error(what, "needs about " + gib(m.total()) + " of memory (" + parts + "), but " + source + " — " +
                        (fix.empty() ? runFix : fix));
}

double parseByteSize(const std::string& text, const std::string& option) {
  const auto bad = [&] {
    return Error(option, "'" + shortForDisplay(text) +
                             "' is not a size — use bytes or a number with K, M, G or T (e.g. 8G)");
  };
  char* end = nullptr;
  const double number = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !std::isfinite(number) || number <= 0) throw bad();
  std::string unit(end);
  for (char& c : unit) c = char(std::toupper(static_cast<unsigned char>(c)));
  if (unit.size() > 1 && (unit.substr(1) == "B" || unit.substr(1) == "IB")) unit = unit.substr(0, 1);
  double scale = 1;
  if (unit == "K")
    scale = 1024.0;
  else if (unit == "M")
    scale = 1024.0 * 1024;
  else if (unit == "G")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "T")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!unit.empty() && unit != "B")
    throw bad();
  const double bytes = number * scale;
  if (bytes < 1) throw bad();
  // A product beyond every machine (1e300T is infinite) would mean "no limit" without saying so.
  if (!(bytes <= kMaxByteSize))
    throw Error(option, "'" + shortForDisplay(text) +
                            "' is more than any machine's memory (at most 1 EiB, "
                            "1048576T) — give the memory the run may use, e.g. 64G");
  return bytes;
}

void checkRunMemory(const std::string& capturePath, const EntryInfo& entry, const Geometry& geometry,
                    size_t heads) {
  const int64_t count = heads > 0 ? int64_t(heads) : entry.headsQ;
  checkMemory(estimateRunMemory(entry, geometry, count),
              shortForDisplay(capturePath) + ":/entries/" + shortForDisplay(entry.name));
}

}  // namespace sparge::core
