// Run-time choice among the instruction-set variants of the Stage-2 inner loops
// (core/src/isa/tile_kernels.cpp).
#include "tile_kernels.h"

#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

#include "sparge/core/error.h"

namespace sparge::core::tile {

namespace avx512 {
const Kernels& kernels();
}
namespace avx2 {
const Kernels& kernels();
}
namespace baseline {
const Kernels& kernels();
}

namespace {

// The variants are compiled with -march=x86-64-v4 / -v3. GCC checks those levels directly; clang (up to 15)
// knows only single features, so it checks the ones that define each level and that it can name (for v3 it
// cannot name f16c, lzcnt and movbe, which every CPU with AVX2, FMA and BMI2 has).
bool cpuHasX86_64V4() {
#if defined(__clang__)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl");
#else
  return __builtin_cpu_supports("x86-64-v4");
#endif
}

bool cpuHasX86_64V3() {
#if defined(__clang__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
         __builtin_cpu_supports("bmi2");
#else
  return __builtin_cpu_supports("x86-64-v3");
#endif
}

// The variants this CPU can run, best first.
std::vector<const Kernels*> runnable() {
  __builtin_cpu_init();
  std::vector<const Kernels*> out;
  if (cpuHasX86_64V3() && cpuHasX86_64V4()) out.push_back(&avx512::kernels());
  if (cpuHasX86_64V3()) out.push_back(&avx2::kernels());
  out.push_back(&baseline::kernels());
  return out;
}

const Kernels& named(const std::string& isa, const std::string& where) {
  for (const Kernels* k : runnable())
    if (isa == k->isa) return *k;
  if (isa == "avx512" || isa == "avx2")
    throw Error(where, "this CPU cannot run the " + isa + " variant; ask for a lower one (" +
                           std::string(runnable().front()->isa) + " is the best it runs)");
  throw Error(where, "unknown instruction-set variant '" + isa + "': use avx512, avx2 or x86-64");
}

std::atomic<const Kernels*> gChosen{nullptr};

}  // namespace

const Kernels& kernels() {
  const Kernels* k = gChosen.load();
  if (k) return *k;
  const char* asked = std::getenv("SPARGE_CPU_ISA");
  k = asked && *asked ? &named(asked, "SPARGE_CPU_ISA") : runnable().front();
  gChosen.store(k);
  return *k;
}

void useVariant(const std::string& isa) {
  gChosen.store(&named(isa, "instruction set"));
}

std::vector<std::string> variants() {
  std::vector<std::string> out;
  for (const Kernels* k : runnable()) out.push_back(k->isa);
  return out;
}

}  // namespace sparge::core::tile
