// PTX wrappers for the Hopper (sm_90a) attention family: wgmma.mma_async with accumulators in the fragment
// layout of parts/online_softmax.cuh (float or int32 [N/8][4]), fences and group waits. Shapes: fp16/bf16
// m64n128k16 and m64n64k16 (A, B K-major in shared memory: 128- and 64-key blocks) and m64nDk16 (A from
// registers, B MN-major: transposed V); s8 m64n128k32 (shared memory, int32 accumulators); e4m3 m64nDk32 and
// m64n(D+8)k32 (A from registers, B K-major). scaleD = 0 overwrites the accumulators. Only usable in device code compiled for
// sm_90a (callers guard with SPARGE_SM90A_DEVICE). The accumulator operand lists come from the
// SPARGE_WGMMA_* macros below and are checked by ptxas.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "attention/sm90/smem_layout_sm90.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define SPARGE_SM90A_DEVICE 1
#endif

namespace sparge::cuda::sm90 {

#ifdef SPARGE_SM90A_DEVICE

__device__ __forceinline__ void wgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Pins register values at this point of the program for the compiler: code that produces them stays before,
// code that reads them after (the asm claims to modify them). The wgmma waits carry no register operands, so
// without such fences the compiler may move a softmax below a wait it could have overlapped, or a read of
// the accumulators above the wait that completes them (ptxas then serialises the wgmmas to stay correct).
template <typename R, int N>
__device__ __forceinline__ void fenceRegs(R (&x)[N][4]) {
  static_assert(std::is_same_v<R, float> || std::is_same_v<R, int32_t>, "fp32 or int32 accumulators");
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if constexpr (std::is_same_v<R, float>)
        asm volatile("" : "+f"(x[i][e])::"memory");
      else
        asm volatile("" : "+r"(x[i][e])::"memory");
    }
}
__device__ __forceinline__ void fenceRegs(float (&x)[2]) {
  asm volatile("" : "+f"(x[0]), "+f"(x[1])::"memory");
}

// Shared memory written through the generic proxy and read next by wgmma or TMA (async proxy).
__device__ __forceinline__ void fenceProxyAsync() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// D[64 x N] (+)= A[64 x K] · B[K x N]; A and B K-major in shared memory.
template <typename T, int N>
struct WgmmaSS {
  static __device__ __forceinline__ void run(float (&d)[N / 8][4], uint64_t descA, uint64_t descB,
                                             int scaleD);
};
// D[64 x N] (+)= A[64 x 16] · B[16 x N]; A from registers (mma.sync m16n8k16 A layout per warp), B MN-major.
template <typename T, int N>
struct WgmmaRS {
  static __device__ __forceinline__ void run(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t descB,
                                             int scaleD);
};
// INT8 S[64 x 128] (+)= Q[64 x 32] · K[32 x 128], both K-major in shared memory, exact int32.
struct WgmmaS8 {
  static __device__ __forceinline__ void run(int32_t (&d)[16][4], uint64_t descA, uint64_t descB, int scaleD);
};
// e4m3 D[64 x N] (+)= P[64 x 32] · V[32 x N]; P from registers (mma.sync m16n8k32 A layout), V K-major.
template <int N>
struct WgmmaE4m3 {
  static __device__ __forceinline__ void run(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t descB,
                                             int scaleD);
};

// The accumulator fragment d[R][4] as asm operands %0 .. %(4R - 1), row by row ("+f" fp32, "+r" int32), and
// the PTX vector of those operands: one list per fragment size for every wrapper below.
#define SPARGE_WGMMA_ROW(c, d, i) c(d[i][0]), c(d[i][1]), c(d[i][2]), c(d[i][3])
#define SPARGE_WGMMA_ACC4(c, d) \
  SPARGE_WGMMA_ROW(c, d, 0), SPARGE_WGMMA_ROW(c, d, 1), SPARGE_WGMMA_ROW(c, d, 2), SPARGE_WGMMA_ROW(c, d, 3)
#define SPARGE_WGMMA_ACC8(c, d)                                                                             \
  SPARGE_WGMMA_ACC4(c, d), SPARGE_WGMMA_ROW(c, d, 4), SPARGE_WGMMA_ROW(c, d, 5), SPARGE_WGMMA_ROW(c, d, 6), \
      SPARGE_WGMMA_ROW(c, d, 7)
#define SPARGE_WGMMA_ACC16(c, d)                                                                             \
  SPARGE_WGMMA_ACC8(c, d), SPARGE_WGMMA_ROW(c, d, 8), SPARGE_WGMMA_ROW(c, d, 9), SPARGE_WGMMA_ROW(c, d, 10), \
      SPARGE_WGMMA_ROW(c, d, 11), SPARGE_WGMMA_ROW(c, d, 12), SPARGE_WGMMA_ROW(c, d, 13),                    \
      SPARGE_WGMMA_ROW(c, d, 14), SPARGE_WGMMA_ROW(c, d, 15)
#define SPARGE_WGMMA_R16 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define SPARGE_WGMMA_R32 \
  SPARGE_WGMMA_R16 ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define SPARGE_WGMMA_R64                                                                        \
  SPARGE_WGMMA_R32                                                                              \
      ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, " \
      "%49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"

template <>
__device__ __forceinline__ void WgmmaSS<__half, 128>::run(float (&d)[16][4], uint64_t descA, uint64_t descB,
                                                          int scaleD) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
      "{" SPARGE_WGMMA_R64
      "}, "
      "%64, %65, p, 1, 1, 0, 0;\n}\n"
      : SPARGE_WGMMA_ACC16("+f", d)
      : "l"(descA), "l"(descB), "r"(scaleD));
}

template <>
__device__ __forceinline__ void WgmmaSS<__half, 64>::run(float (&d)[8][4], uint64_t descA, uint64_t descB,
                                                         int scaleD) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{" SPARGE_WGMMA_R32
      "}, "
      "%32, %33, p, 1, 1, 0, 0;\n}\n"
      : SPARGE_WGMMA_ACC8("+f", d)
      : "l"(descA), "l"(descB), "r"(scaleD));
}

template <>
__device__ __forceinline__ void WgmmaRS<__half, 64>::run(float (&d)[8][4], const uint32_t (&a)[4],
                                                         uint64_t descB, int scaleD) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{" SPARGE_WGMMA_R32
      "}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : SPARGE_WGMMA_ACC8("+f", d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(descB), "r"(scaleD));
}

template <>
__device__ __forceinline__ void WgmmaRS<__half, 128>::run(float (&d)[16][4], const uint32_t (&a)[4],
                                                          uint64_t descB, int scaleD) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
      "{" SPARGE_WGMMA_R64
      "}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : SPARGE_WGMMA_ACC16("+f", d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(descB), "r"(scaleD));
}

template <>
__device__ __forceinline__ void WgmmaSS<__nv_bfloat16, 128>::run(float (&d)[16][4], uint64_t descA,
                                                                 uint64_t descB, int scaleD) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{" SPARGE_WGMMA_R64
      "}, "
      "%64, %65, p, 1, 1, 0, 0;\n}\n"
      : SPARGE_WGMMA_ACC16("+f", d)
      : "l"(descA), "l"(descB), "r"(scaleD));
}

template <>
__device__ __forceinline__ void WgmmaSS<__nv_bfloat16, 64>::run(float (&d)[8][4], uint64_t descA,
                                                                uint64_t descB, int scaleD) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{" SPARGE_WGMMA_R32
      "}, "
      "%32, %33, p, 1, 1, 0, 0;\n}\n"
      : SPARGE_WGMMA_ACC8("+f", d)
      : "l"(descA), "l"(descB), "r"(scaleD));
}

template <>
__device__ __forceinline__ void WgmmaRS<__nv_bfloat16, 64>::run(float (&d)[8][4], const uint32_t (&a)[4],
                                                                uint64_t descB, int scaleD) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{" SPARGE_WGMMA_R32
      "}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : SPARGE_WGMMA_ACC8("+f", d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(descB), "r"(scaleD));
}

template <>
__device__ __forceinline__ void WgmmaRS<__nv_bfloat16, 128>::run(float (&d)[16][4], const uint32_t (&a)[4],
                                                                 uint64_t descB, int scaleD) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{" SPARGE_WGMMA_R64
      "}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : SPARGE_WGMMA_ACC16("+f", d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(descB), "r"(scaleD));
}

__device__ __forceinline__ void WgmmaS8::run(int32_t (&d)[16][4], uint64_t descA, uint64_t descB,
                                             int scaleD) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 "
      "{" SPARGE_WGMMA_R64
      "}, "
      "%64, %65, p;\n}\n"
      : SPARGE_WGMMA_ACC16("+r", d)
      : "l"(descA), "l"(descB), "r"(scaleD));
}

template <>
__device__ __forceinline__ void WgmmaE4m3<32>::run(float (&d)[4][4], const uint32_t (&a)[4], uint64_t descB,
                                                   int scaleD) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 "
      "{" SPARGE_WGMMA_R16
      "}, "
      "{%16, %17, %18, %19}, %20, p, 1, 1;\n}\n"
      : SPARGE_WGMMA_ACC4("+f", d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(descB), "r"(scaleD));
}

template <>
__device__ __forceinline__ void WgmmaE4m3<64>::run(float (&d)[8][4], const uint32_t (&a)[4], uint64_t descB,
                                                   int scaleD) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
      "{" SPARGE_WGMMA_R32
      "}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
      : SPARGE_WGMMA_ACC8("+f", d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(descB), "r"(scaleD));
}

template <>
__device__ __forceinline__ void WgmmaE4m3<128>::run(float (&d)[16][4], const uint32_t (&a)[4], uint64_t descB,
                                                    int scaleD) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
      "{" SPARGE_WGMMA_R64
      "}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
      : SPARGE_WGMMA_ACC16("+f", d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(descB), "r"(scaleD));
}

// P·V with the ones atom of the tensor cores' row sums (D + 8 channels, Sm90Traits::kTensorRowSums).
template <>
__device__ __forceinline__ void WgmmaE4m3<72>::run(float (&d)[9][4], const uint32_t (&a)[4], uint64_t descB,
                                                   int scaleD) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %41, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n72k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "
      "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35}, "
      "{%36, %37, %38, %39}, %40, p, 1, 1;\n}\n"
      : SPARGE_WGMMA_ACC8("+f", d), SPARGE_WGMMA_ROW("+f", d, 8)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(descB), "r"(scaleD));
}

template <>
__device__ __forceinline__ void WgmmaE4m3<136>::run(float (&d)[17][4], const uint32_t (&a)[4], uint64_t descB,
                                                    int scaleD) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %73, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n136k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "
      "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, "
      "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "
      "%62, %63, %64, %65, %66, %67}, "
      "{%68, %69, %70, %71}, %72, p, 1, 1;\n}\n"
      : SPARGE_WGMMA_ACC16("+f", d), SPARGE_WGMMA_ROW("+f", d, 16)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(descB), "r"(scaleD));
}

#undef SPARGE_WGMMA_ROW
#undef SPARGE_WGMMA_ACC4
#undef SPARGE_WGMMA_ACC8
#undef SPARGE_WGMMA_ACC16
#undef SPARGE_WGMMA_R16
#undef SPARGE_WGMMA_R32
#undef SPARGE_WGMMA_R64

#endif  // SPARGE_SM90A_DEVICE

}  // namespace sparge::cuda::sm90
