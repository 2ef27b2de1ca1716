// Benchmark (not a test): times core::loadEntry on a capture (every entry, or those named), with the
// non-finite counts the CLI asks for, and prints min / median / max seconds and the float32 rate; beside it
// the CPU time of the load (all threads) and the time one thread takes to zero-fill buffers of the same size
// (what a value-initialised allocation costs).
//   sparge_load_bench CAPTURE [--entry NAME]... [--repeat R] [--threads T]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "sparge/core/capture.h"
#include "sparge/core/error.h"

using namespace sparge;
using Clock = std::chrono::steady_clock;

namespace {

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// CPU time of the whole process (every thread), user + system: on a busy machine it varies less than the wall
// clock does.
double cpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

struct Stats {
  double min = 0, median = 0, max = 0;
};

Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v.front(), v[v.size() / 2], v.back()};
}

// One thread allocating and zero-filling `floats` values, as std::vector<float>(n) does.
double zeroFillSeconds(size_t floats) {
  const auto t0 = Clock::now();
  std::vector<float> buffer(floats);
  const double s = secondsSince(t0);
  if (buffer[floats / 2] != 0.f) std::abort();  // keeps the fill
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  std::vector<std::string> names;
  int repeat = 3, threads = 0;
  for (int i = 1; i < argc; ++i) {
    const bool hasValue = i + 1 < argc;
    if (!std::strcmp(argv[i], "--entry") && hasValue)
      names.push_back(argv[++i]);
    else if (!std::strcmp(argv[i], "--repeat") && hasValue)
      repeat = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--threads") && hasValue)
      threads = std::atoi(argv[++i]);
    else if (argv[i][0] != '-' && path.empty())
      path = argv[i];
    else {
      std::fprintf(stderr, "usage: sparge_load_bench CAPTURE [--entry NAME]... [--repeat R] [--threads T]\n");
      return 2;
    }
  }
  if (path.empty()) {
    std::fprintf(stderr, "usage: sparge_load_bench CAPTURE [--entry NAME]... [--repeat R] [--threads T]\n");
    return 2;
  }
  try {
    const auto t0 = Clock::now();
    core::CaptureReader reader(path);
    std::printf("capture opened in %.3f s (%zu entries)\n", secondsSince(t0), reader.entries().size());
    if (names.empty())
      for (const auto& e : reader.entries()) names.push_back(e.name);
    std::printf("%-12s %9s %8s %9s %8s %12s %9s %12s\n", "entry", "MiB f32", "min s", "median s", "max s",
                "GiB/s (med)", "CPU s", "zero-fill s");
    for (const std::string& name : names) {
      std::vector<double> times, cpu;
      size_t floats = 0;
      int64_t nonFinite = 0;
      for (int r = 0; r < repeat; ++r) {
        std::vector<core::NonFiniteReport> reports;
        const auto t1 = Clock::now();
        const double c1 = cpuSeconds();
        const core::EntryData data = core::loadEntry(reader, name, &reports, threads);
        times.push_back(secondsSince(t1));
        cpu.push_back(cpuSeconds() - c1);
        floats = data.q.size() + data.k.size() + data.v.size();
        nonFinite = 0;
        for (const auto& nf : reports) nonFinite += nf.count;
      }
      const Stats s = stats(times);
      const double mib = double(floats) * 4 / (1 << 20);
      std::printf("%-12s %9.1f %8.3f %9.3f %8.3f %12.2f %9.3f %12.3f%s\n", name.c_str(), mib, s.min, s.median,
                  s.max, mib / 1024 / s.median, stats(cpu).median, zeroFillSeconds(floats),
                  nonFinite ? (" (" + std::to_string(nonFinite) + " NaN/Inf)").c_str() : "");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparge_load_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
