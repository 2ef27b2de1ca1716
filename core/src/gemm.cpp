// Run-time choice among the instruction-set variants of gemm::multiply (core/src/isa/gemm_kernels.cpp).
#include "gemm.h"

namespace sparge::core::gemm {

using Kernel = void (*)(int, int, int, const float*, int, const float*, int, bool, float*, int, bool);
void multiplyAvx512(int, int, int, const float*, int, const float*, int, bool, float*, int, bool);
void multiplyAvx2(int, int, int, const float*, int, const float*, int, bool, float*, int, bool);
void multiplyBaseline(int, int, int, const float*, int, const float*, int, bool, float*, int, bool);

namespace {

struct Choice {
  Kernel kernel;
  const char* name;
};

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

Choice choose() {
  __builtin_cpu_init();
  if (cpuHasX86_64V3() && cpuHasX86_64V4()) return {multiplyAvx512, "avx512"};
  if (cpuHasX86_64V3()) return {multiplyAvx2, "avx2"};
  return {multiplyBaseline, "x86-64"};
}

const Choice& chosen() {
  static const Choice c = choose();
  return c;
}

}  // namespace

void multiply(int m, int n, int k, const float* a, int lda, const float* b, int ldb, bool bTransposed,
              float* c, int ldc, bool accumulate) {
  chosen().kernel(m, n, k, a, lda, b, ldb, bTransposed, c, ldc, accumulate);
}

const char* isaName() {
  return chosen().name;
}

}  // namespace sparge::core::gemm
