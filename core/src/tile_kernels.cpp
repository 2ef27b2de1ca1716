// Run-time choice among the instruction-set variants of the Stage-2 inner loops
// (core/src/isa/tile_kernels.cpp).
#include "tile_kernels.h"

#include <cstdlib>
#include <string>

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

const Kernels& choose() {
  __builtin_cpu_init();
  const bool v3 = cpuHasX86_64V3(), v4 = v3 && cpuHasX86_64V4();
  const char* asked = std::getenv("SPARGE_CPU_ISA");
  const std::string want = asked ? asked : "";
  if (want.empty()) return v4 ? avx512::kernels() : (v3 ? avx2::kernels() : baseline::kernels());
  if (want == "x86-64") return baseline::kernels();
  if ((want == "avx2" && v3) || (want == "avx512" && v4))
    return want == "avx2" ? avx2::kernels() : avx512::kernels();
  if (want == "avx2" || want == "avx512")
    throw Error("SPARGE_CPU_ISA",
                "this CPU cannot run the " + want + " variant; unset it or ask for a lower one");
  throw Error("SPARGE_CPU_ISA", "unknown variant '" + want + "': use avx512, avx2 or x86-64 (or unset it)");
}

}  // namespace

const Kernels& kernels() {
  static const Kernels& k = choose();
  return k;
}

}  // namespace sparge::core::tile
