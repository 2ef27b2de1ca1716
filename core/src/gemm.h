// Single-precision matrix products for the CPU engine (Eigen), compiled for AVX-512, AVX2+FMA and baseline
// x86-64 and chosen once at run time from the CPU's features.
#pragma once

namespace sparge::core::gemm {

// C[m, n] = A[m, k] · op(B), or C += A · op(B) with `accumulate`. All matrices are row-major with the given
// leading dimensions; op(B) = Bᵀ with B stored [n, k] when `bTransposed`, else B stored [k, n].
void multiply(int m, int n, int k, const float* a, int lda, const float* b, int ldb, bool bTransposed,
              float* c, int ldc, bool accumulate);

// The instruction set of the variant in use: "avx512", "avx2" or "x86-64".
const char* isaName();

}  // namespace sparge::core::gemm
