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

Choice choose() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4")) return {multiplyAvx512, "avx512"};
  if (__builtin_cpu_supports("x86-64-v3")) return {multiplyAvx2, "avx2"};
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
